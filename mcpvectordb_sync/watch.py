"""`--watch`: run a pass, then another every `interval` seconds, and sooner when the folder
changes.

The standard library has no portable file-event API, so changes are noticed by polling: every
`poll_s` seconds the folder is walked (names, sizes, modification times; nothing is read) and a
difference from the last walk starts a pass once the folder has been quiet for one poll (a
file still being copied is not sent half-written). A pass that fails (gateway unreachable) is
reported and the next one tries again; the loop ends on Ctrl-C or when `stop` is set.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from mcpvectordb_sync.scan import Filters, ScanError, scan

Snapshot = frozenset[tuple[str, int, int]]


def snapshot(folder: str, prefix: str, filters: Filters) -> Snapshot | None:
    try:
        found = scan(folder, prefix, filters)
    except ScanError:
        return None
    return frozenset((f.source, f.size, f.mtime_ns) for f in found.files)


def watch(
    run_pass: Callable[[], None],
    folder: str,
    prefix: str,
    filters: Filters,
    *,
    interval_s: float,
    poll_s: float = 2.0,
    stop: threading.Event | None = None,
) -> None:
    """Call `run_pass` now, every `interval_s`, and after the folder changes and settles."""
    stop = stop or threading.Event()
    poll_s = max(0.05, min(poll_s, interval_s))
    while not stop.is_set():
        before = snapshot(folder, prefix, filters)
        run_pass()
        due = time.monotonic() + interval_s
        last = before
        pending_change = False
        while not stop.is_set() and time.monotonic() < due:
            stop.wait(min(poll_s, max(0.0, due - time.monotonic())))
            now = snapshot(folder, prefix, filters)
            if now != last:
                pending_change, last = True, now  # changed: wait until it holds still
            elif pending_change:
                break  # changed, then quiet for a poll
