"""How many heaps (arenas) the C allocator keeps, fewer than glibc's default, and handing its
free pages back: for processes whose native threads come and go.

glibc's malloc gives a thread that finds the heaps in use one of its own, up to eight per
core, and a heap's freed pages mostly stay with the process. Lance's threads (its I/O
runtime, its compute pool, the service's worker threads calling into it) allocate and free
large buffers on every fold and search, each in the heap it happened to get, so an index
process's memory climbed fold after fold: at a million chunks 321 MB at the start, 1,189 MB
after twelve folds of 100 chunks and 1,498 MB after 60 searches more, against 666 and
1,015 MB with two heaps, folds and searches as fast (docs/benchmarks.md). The limit must be
set before the threads first allocate; a `MALLOC_ARENA_MAX` in the environment, which glibc
reads itself at start, is left to win. Other C libraries (musl, macOS) have no such
setting, and nothing is done there.

Even with two heaps, a fold at a million chunks leaves a few hundred MB of freed pages inside
them, and they built up fold after fold (1,559 MB after twelve folds with searches between);
handing them back after each fold (`release_free_memory`, glibc's `malloc_trim`, 4-18 ms
there) kept the same run at 1,132 MB (docs/benchmarks.md). An index reader, which never
folds, hands them back after the writer's commits, whose new index segments its searches
read while letting the old ones go. A converter worker hands them back after each document
it replies to: a large one left about 150 MB of them in the idle worker.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
from collections.abc import Callable

from libs.cpus import usable_cores

log = logging.getLogger(__name__)

# glibc's mallopt parameter for the number of arenas (malloc.h).
_M_ARENA_MAX = -8


def limit_arenas(count: int | None = None) -> int | None:
    """Cap glibc's malloc at `count` arenas, by default one per usable core and at least two
    (see the module docstring); the cap in effect, None where it cannot be set (not glibc) or
    the environment already sets it."""
    if count is None:
        count = max(2, usable_cores())
    if "MALLOC_ARENA_MAX" in os.environ:
        return None
    mallopt = _glibc("mallopt")
    if mallopt is None:
        return None
    if mallopt(_M_ARENA_MAX, count) != 1:
        log.warning("could not limit malloc's arenas", extra={"fields": {"arenas": count}})
        return None
    return count


def release_free_memory() -> bool:
    """Hand the pages glibc's heaps hold free back to the system (`malloc_trim`; see the
    module docstring). Whether it ran: False where the C library is not glibc."""
    trim = _glibc("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True


@functools.cache
def _glibc(function: str) -> Callable[..., int] | None:
    """glibc's `function`, None where the C library is not glibc or lacks it."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        found: Callable[..., int] = getattr(ctypes.CDLL(name), function)
    except (OSError, AttributeError):  # not glibc
        return None
    return found
