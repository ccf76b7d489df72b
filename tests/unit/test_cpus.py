"""Usable cores (`libs.cpus`): the affinity, lowered by a container's CFS quota in either cgroup
layout; and the size of Lance's compute pool the index derives from them
(`services.index.store.lance`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from libs.cpus import cgroup_quota, usable_cores
from services.index.store import lance

AFFINITY = len(os.sched_getaffinity(0))


def v2(root: Path, text: str) -> Path:
    (root / "cpu.max").write_text(text + "\n")
    return root


def v1(root: Path, quota: str, period: str = "100000") -> Path:
    (root / "cpu").mkdir()
    (root / "cpu" / "cpu.cfs_quota_us").write_text(quota + "\n")
    (root / "cpu" / "cpu.cfs_period_us").write_text(period + "\n")
    return root


def test_no_cgroup_files_means_no_limit(tmp_path: Path) -> None:
    assert cgroup_quota(tmp_path) is None
    assert usable_cores(tmp_path) == AFFINITY


@pytest.mark.parametrize(
    ("text", "quota"),
    [("max 100000", None), ("150000 100000", 1.5), ("50000 100000", 0.5), ("bad", None)],
)
def test_cgroup_v2_quota(tmp_path: Path, text: str, quota: float | None) -> None:
    assert cgroup_quota(v2(tmp_path, text)) == quota


@pytest.mark.parametrize(("quota", "expected"), [("-1", None), ("200000", 2.0), ("", None)])
def test_cgroup_v1_quota(tmp_path: Path, quota: str, expected: float | None) -> None:
    assert cgroup_quota(v1(tmp_path, quota)) == expected


def test_a_quota_rounds_up_and_never_raises_the_affinity(tmp_path: Path) -> None:
    assert usable_cores(v2(tmp_path, "50000 100000")) == 1  # half a core: one
    (tmp_path / "cpu.max").write_text("150000 100000")
    assert usable_cores(tmp_path) == min(AFFINITY, 2)
    (tmp_path / "cpu.max").write_text(f"{(AFFINITY + 8) * 100000} 100000")
    assert usable_cores(tmp_path) == AFFINITY


@pytest.mark.parametrize(
    ("setting", "cores", "threads"),
    [(0, 1, 1), (0, 2, 2), (0, 3, 2), (0, 4, 2), (0, 5, 3), (0, 16, 14), (3, 2, 3)],
)
def test_compute_pool_size(setting: int, cores: int, threads: int) -> None:
    """Every core up to two (Lance alone gives one on two or three), cores less two beyond
    four as Lance does, and the setting when it is not 0."""
    assert lance.compute_threads(setting, cores) == threads


def test_lance_cpu_threads_in_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANCE_CPU_THREADS", "5")
    assert lance.size_compute_pool(1) == "5"
    monkeypatch.delenv("LANCE_CPU_THREADS")
    assert lance.size_compute_pool(3) == "3"
    assert os.environ["LANCE_CPU_THREADS"] == "3"
