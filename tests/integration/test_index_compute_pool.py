"""`INDEX_CPU_THREADS` reaches Lance: an index process's compute pool has the threads the
setting asks for (Lance names them `lance-cpu`), whatever the machine's core count."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROGRAM = """
import asyncio, os, sys, time
from libs.contracts import IndexSearchRequest
from services.index.settings import IndexSettings
from services.index.store import IndexStore
from tests.index_helpers import upsert_request

store = IndexStore(IndexSettings(lancedb_uri=sys.argv[1], index_cpu_threads=int(sys.argv[2])))
store.upsert(upsert_request("a.md", ["walrus one", "walrus two"], seed=1))
store.optimize()
asyncio.run(store.search(IndexSearchRequest(query="walrus", top_k=2, mode="bm25")))
def name(task):
    try:
        with open(f"/proc/self/task/{task}/comm") as comm:
            return comm.read().strip()
    except FileNotFoundError:  # a short-lived thread (an I/O worker) ended meanwhile
        return None
# The most seen over half a second: on a loaded machine a pool thread may start late.
counts = []
for _ in range(10):
    counts.append([name(task) for task in os.listdir("/proc/self/task")].count("lance-cpu"))
    time.sleep(0.05)
print(os.environ["LANCE_CPU_THREADS"], max(counts))
"""


def pool(tmp_path: Path, threads: int) -> tuple[str, int]:
    env = {key: value for key, value in os.environ.items() if key != "LANCE_CPU_THREADS"}
    uri = str(tmp_path / f"lancedb-{threads}")
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, uri, str(threads)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    setting, counted = done.stdout.split()
    return setting, int(counted)


def test_the_setting_sizes_lances_compute_pool(tmp_path: Path) -> None:
    one, three = pool(tmp_path, 1), pool(tmp_path, 3)
    assert one[0] == "1" and three[0] == "3"
    # Lance runs one `lance-cpu` thread besides the pool's; two more threads asked, two more.
    assert three[1] - one[1] == 2
