"""How many cores this process may use: the ones it may run on, lowered by a container's CPU
limit.

`os.sched_getaffinity` alone counts the host's cores inside a container, where a CPU limit
(k3s `limits.cpu`, `docker run --cpus`) is a CFS quota of the cgroup instead: a pool sized to
the host's 16 cores under a limit of 1 is throttled. Both cgroup layouts are read as a
container sees them (its own cgroup mounted at `/sys/fs/cgroup`): v2's `cpu.max`
("<quota> <period>" or "max <period>") and v1's `cpu/cpu.cfs_quota_us` (-1 for none) over
`cpu/cpu.cfs_period_us`. A quota is rounded up to whole cores.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cores(cgroup_root: Path = CGROUP_ROOT) -> int:
    """The cores this process may use (see the module docstring), at least 1."""
    cores = len(os.sched_getaffinity(0))
    quota = cgroup_quota(cgroup_root)
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def cgroup_quota(cgroup_root: Path = CGROUP_ROOT) -> float | None:
    """The cgroup's CPU limit in cores, or None where there is none (or none is readable)."""
    v2 = _read(cgroup_root / "cpu.max")
    if v2 is not None:
        quota, _, period = v2.partition(" ")
        return _ratio(quota, period)
    return _ratio(
        _read(cgroup_root / "cpu" / "cpu.cfs_quota_us"),
        _read(cgroup_root / "cpu" / "cpu.cfs_period_us"),
    )


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _ratio(quota: str | None, period: str | None) -> float | None:
    try:
        limit, every = int(quota or ""), int(period or "")
    except ValueError:  # "max", missing or unreadable: no limit
        return None
    return limit / every if limit > 0 and every > 0 else None
