"""The sync client's hash cache (`mcpvectordb_sync.hashes`): a digest is reused while the
file's size and modification time stay the same, across passes and across runs (the cache
file); anything else, `--checksum`, a file modified just before it was hashed, a cache file
that cannot be read or written, and it is computed again."""

from __future__ import annotations

import json
import time
from pathlib import Path

from mcpvectordb_sync.hashes import Hashes
from mcpvectordb_sync.scan import LocalFile

HOUR_AGO_NS = time.time_ns() - 3600 * 1_000_000_000


def local(path: str, size: int = 10, mtime_ns: int = HOUR_AGO_NS) -> LocalFile:
    return LocalFile(source=path, path=path, size=size, mtime_ns=mtime_ns)


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return f"digest-{self.calls}"


def one_pass(hashes: Hashes, files: list[LocalFile], compute: Counter) -> list[str]:
    hashes.begin()
    digests = [hashes.digest(f, compute) for f in files]
    hashes.commit(complete=True)
    return digests


def test_unchanged_files_are_not_hashed_again_in_this_run_or_the_next(tmp_path: Path) -> None:
    compute = Counter()
    hashes = Hashes("/docs", tmp_path)
    assert one_pass(hashes, [local("/docs/a"), local("/docs/b")], compute) == [
        "digest-1",
        "digest-2",
    ]
    assert one_pass(hashes, [local("/docs/a"), local("/docs/b")], compute) == [
        "digest-1",
        "digest-2",
    ]
    assert compute.calls == 2 and hashes.read == 0
    # A later run reads the cache file: still nothing to hash.
    again = Hashes("/docs", tmp_path)
    assert one_pass(again, [local("/docs/a")], compute) == ["digest-1"]
    assert compute.calls == 2
    # Another folder has its own cache file.
    assert one_pass(Hashes("/other", tmp_path), [local("/docs/a")], compute) == ["digest-3"]


def test_a_new_size_or_time_or_checksum_hashes_again(tmp_path: Path) -> None:
    compute = Counter()
    hashes = Hashes("/docs", tmp_path)
    one_pass(hashes, [local("/docs/a")], compute)
    assert one_pass(hashes, [local("/docs/a", size=11)], compute) == ["digest-2"]
    assert one_pass(hashes, [local("/docs/a", size=11, mtime_ns=HOUR_AGO_NS + 1)], compute) == [
        "digest-3"
    ]
    verify = Hashes("/docs", tmp_path, verify=True)
    assert one_pass(verify, [local("/docs/a", size=11, mtime_ns=HOUR_AGO_NS + 1)], compute) == [
        "digest-4"
    ]
    assert verify.read == 1


def test_a_file_modified_just_before_it_was_hashed_is_hashed_again(tmp_path: Path) -> None:
    """Its time could stay the same through one more write in the same tick."""
    compute = Counter()
    hashes = Hashes("/docs", tmp_path)
    fresh = local("/docs/a", mtime_ns=time.time_ns())
    one_pass(hashes, [fresh], compute)
    one_pass(hashes, [fresh], compute)
    assert compute.calls == 2


def test_files_gone_are_forgotten_after_a_complete_pass_only(tmp_path: Path) -> None:
    compute = Counter()
    hashes = Hashes("/docs", tmp_path)
    one_pass(hashes, [local("/docs/a"), local("/docs/b")], compute)
    hashes.begin()
    hashes.digest(local("/docs/a"), compute)
    hashes.commit(complete=False)  # a pass that stopped: b is still known
    assert one_pass(hashes, [local("/docs/b")], compute) == ["digest-2"]
    # That complete pass saw only b: a is forgotten.
    assert one_pass(hashes, [local("/docs/a")], compute) == ["digest-3"]
    stored = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert list(stored["files"]) == ["/docs/a"]


def test_a_broken_or_unwritable_cache_costs_only_the_hashing(tmp_path: Path) -> None:
    compute = Counter()
    hashes = Hashes("/docs", tmp_path)
    one_pass(hashes, [local("/docs/a")], compute)
    cache = next(tmp_path.glob("*.json"))
    cache.write_text("{not json")
    broken = Hashes("/docs", tmp_path)
    assert one_pass(broken, [local("/docs/a")], compute) == ["digest-2"]
    [warning] = broken.take_warnings()
    assert "could not read the hash cache" in warning and "every file is hashed" in warning
    assert json.loads(cache.read_text())["files"]["/docs/a"][2] == "digest-2"  # rewritten

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    unwritable = Hashes("/docs", blocked / "cache")
    assert one_pass(unwritable, [local("/docs/a")], compute) == ["digest-3"]
    [warning] = unwritable.take_warnings()
    assert "could not write the hash cache" in warning and "--cache-dir" in warning
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".hashes-")]
