"""`libs.malloc.limit_arenas`: glibc's malloc keeps at most that many heaps, checked in a child
process whose eight threads each hold an allocation at once (glibc's `malloc_stats` lists one
"Arena N:" per heap); an environment that sets MALLOC_ARENA_MAX wins.
`libs.malloc.release_free_memory`: the pages of blocks freed inside a heap, which glibc keeps,
leave the process's resident memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from libs import malloc

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import ctypes, sys, threading
from libs.malloc import limit_arenas
cap = int(sys.argv[1])
print(limit_arenas(cap) if cap else None, flush=True)
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
together = threading.Barrier(8)
def hold():
    block = libc.malloc(65536)
    together.wait()
    libc.free(ctypes.c_void_p(block))
threads = [threading.Thread(target=hold) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc.malloc_stats()
"""

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
    reason="glibc only",
)


def arenas(cap: int, env: dict[str, str] | None = None) -> tuple[str, int]:
    """What `limit_arenas(cap)` returned in a child (cap 0: not called) and its heaps."""
    full = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | (env or {})
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(cap)],
        cwd=REPO, env=full, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    heaps = sum(line.startswith("Arena ") for line in done.stderr.splitlines())
    return done.stdout.strip(), heaps


@glibc
def test_the_cap_bounds_the_heaps_of_threads_that_allocate_at_once() -> None:
    said, heaps = arenas(0)  # glibc's default: up to eight heaps a core, one per thread here
    assert said == "None" and heaps > 3
    assert arenas(2) == ("2", 2)
    assert arenas(3) == ("3", 3)


@glibc
def test_malloc_arena_max_in_the_environment_wins() -> None:
    assert arenas(2, {"MALLOC_ARENA_MAX": "4"}) == ("None", 4)


# A thread fills its heap with 200 MB of small blocks and frees all but the last, which keeps
# the heap's top in place: glibc trims a heap only from its top, so the freed pages stay
# resident until `release_free_memory`. Prints the resident MB after the frees, then after it.
HOLES = """
import ctypes, threading
from libs.malloc import release_free_memory
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
def resident_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20
def fill():
    blocks = [libc.malloc(1024) for _ in range(200_000)]
    for block in blocks:
        ctypes.memset(block, 1, 1024)
    for block in blocks[:-1]:
        libc.free(ctypes.c_void_p(block))
worker = threading.Thread(target=fill)
worker.start()
worker.join()
print(resident_mb(), flush=True)
print(release_free_memory(), resident_mb(), flush=True)
"""


@glibc
def test_released_pages_leave_resident_memory() -> None:
    done = subprocess.run(
        [sys.executable, "-c", HOLES],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    held, (ran, after) = float(done.stdout.split()[0]), done.stdout.split()[1:]
    assert ran == "True"
    assert held - float(after) > 150, done.stdout


def test_nothing_is_done_without_a_c_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(malloc.ctypes.util, "find_library", lambda name: None)
    malloc._glibc.cache_clear()
    try:
        assert malloc.limit_arenas(2) is None
        assert malloc.release_free_memory() is False
    finally:
        malloc._glibc.cache_clear()
