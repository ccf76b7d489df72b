"""`mcpvectordb-sync` against a gateway on a real socket over the hand-written fakes: passes
that upload, skip and delete; dry runs; a locked file; deletions kept inside the prefix and
withheld after an incomplete scan; the CLI's JSON summary and exit codes; --watch noticing a
change."""

from __future__ import annotations

import io
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import BinaryIO

import httpx
import pytest

from mcpvectordb_sync.cli import main
from mcpvectordb_sync.engine import Options, Summary, open_file, sync_once
from mcpvectordb_sync.scan import Filters
from mcpvectordb_sync.transport import Gateway, RetryPolicy
from mcpvectordb_sync.watch import watch
from services.gateway.app import create_app
from services.gateway.settings import GatewaySettings
from tests.fakes import fake_ports
from tests.servers import serve

pytestmark = pytest.mark.integration

TOKEN = "sync-token"
FAST = RetryPolicy(attempts=2, total_s=5, first_s=0.01, max_s=0.02)


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = GatewaySettings(
        _env_file=None, var_dir=tmp_path_factory.mktemp("var"), auth_token=[TOKEN]
    )
    with serve(create_app(settings, fake_ports())) as url:
        yield url


def _folder(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _sources(url: str, library: str) -> list[str]:
    answer = httpx.get(
        f"{url}/sources", params={"library": library}, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    return [e["source"] for e in answer.json()["sources"]]


def _sync(url: str, folder: Path, library: str, **options: object) -> Summary:
    gateway = Gateway(url, TOKEN, policy=FAST)
    return sync_once(gateway, Options(folder=str(folder), library=library, **options))  # type: ignore[arg-type]


def test_passes_upload_skip_and_delete(gateway_url: str, tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        {
            "Q3/report.md": "third quarter",
            "Q4/report.md": "fourth quarter",
            "Grüße/über.txt": "umlauts",
            "a.md": "alpha",
            "b.md": "beta",
            "skip.bin": "not a document",
        },
    )
    first = _sync(gateway_url, folder, "pass", delete=True)
    assert (first.uploaded, first.unchanged, first.deleted, first.failed) == (5, 0, 0, 0)
    assert first.ignored == 1
    assert _sources(gateway_url, "pass") == [
        "Grüße/über.txt", "Q3/report.md", "Q4/report.md", "a.md", "b.md",
    ]  # fmt: skip

    second = _sync(gateway_url, folder, "pass", delete=True)
    assert (second.uploaded, second.unchanged, second.deleted) == (0, 5, 0)
    assert second.bytes_sent < 1000  # the manifest request, no file bodies

    (folder / "Q3/report.md").write_text("third quarter, revised")
    (folder / "a.md").unlink()
    (folder / "b.md").unlink()
    dry = _sync(gateway_url, folder, "pass", delete=True, dry_run=True)
    assert (dry.uploaded, dry.deleted, dry.dry_run) == (1, 2, True)
    assert "a.md" in _sources(gateway_url, "pass")
    third = _sync(gateway_url, folder, "pass", delete=True)
    assert (third.uploaded, third.unchanged, third.deleted, third.failed) == (1, 2, 2, 0)
    assert _sources(gateway_url, "pass") == ["Grüße/über.txt", "Q3/report.md", "Q4/report.md"]


def test_delete_stays_inside_the_prefix(gateway_url: str, tmp_path: Path) -> None:
    one = _folder(tmp_path / "one", {"x.md": "one x", "y.md": "one y"})
    two = _folder(tmp_path / "two", {"x.md": "two x"})
    _sync(gateway_url, one, "prefixed", prefix="One", delete=True)
    _sync(gateway_url, two, "prefixed", prefix="Two", delete=True)
    (one / "y.md").unlink()
    result = _sync(gateway_url, one, "prefixed", prefix="One", delete=True)
    assert result.deleted == 1
    assert _sources(gateway_url, "prefixed") == ["One/x.md", "Two/x.md"]
    # Without --delete nothing goes, whatever is missing.
    (one / "x.md").unlink()
    assert _sync(gateway_url, one, "prefixed", prefix="One").deleted == 0


def test_a_locked_file_fails_alone_and_is_tried_again(gateway_url: str, tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"open.md": "in use", "free.md": "free"})
    locked = {str(folder / "open.md")}

    def windows_like(path: str) -> BinaryIO:
        if path in locked:
            raise PermissionError(
                13, "The process cannot access the file because it is being used by another process"
            )
        return open_file(path)

    gateway = Gateway(gateway_url, TOKEN, policy=FAST)
    options = Options(folder=str(folder), library="locked", delete=True)
    first = sync_once(gateway, options, opener=windows_like)
    assert (first.uploaded, first.failed) == (1, 1)
    assert first.errors[0]["source"] == "open.md"
    assert "another process" in first.errors[0]["error"]
    locked.clear()
    second = sync_once(gateway, options, opener=windows_like)
    assert (second.uploaded, second.unchanged, second.failed) == (1, 1, 0)


def test_no_deletions_after_an_incomplete_scan(gateway_url: str, tmp_path: Path) -> None:
    import os

    folder = _folder(tmp_path, {"keep.md": "keep", "gone.md": "gone"})
    _sync(gateway_url, folder, "incomplete", delete=True)
    (folder / "gone.md").unlink()
    fd = os.open(folder, os.O_RDONLY)  # a subfolder deeper than PATH_MAX cannot be listed
    try:
        for _ in range(18):
            os.mkdir("d" * 250, dir_fd=fd)
            inner = os.open("d" * 250, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    result = _sync(gateway_url, folder, "incomplete", delete=True)
    assert result.deleted == 0
    assert any("not deleting" in w for w in result.warnings)
    assert _sources(gateway_url, "incomplete") == ["gone.md", "keep.md"]


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_cli_summary_and_exit_codes(gateway_url: str, tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"a.md": "alpha", "empty.md": ""})
    code, out, err = _cli(
        str(folder), "--url", gateway_url, "--token", TOKEN, "--library", "cli", "--json"
    )
    summary = json.loads(out)
    assert code == 1  # the empty file has no text: failed, named on stderr
    assert (summary["uploaded"], summary["failed"]) == (1, 1)
    assert summary["errors"][0]["source"] == "empty.md" and "failed: empty.md" in err
    (folder / "empty.md").write_text("now with text")
    code, out, _ = _cli(str(folder), "--url", gateway_url, "--token", TOKEN, "--library", "cli")
    assert code == 0 and "1 uploaded, 1 unchanged, 0 deleted, 0 failed" in out

    code, _, err = _cli(str(folder), "--url", gateway_url, "--token", "wrong", "--library", "cli")
    assert code == 1 and "bearer token" in err
    code, _, err = _cli(str(tmp_path / "missing"), "--url", gateway_url, "--token", TOKEN)
    assert code == 1 and "does not exist" in err
    with pytest.raises(SystemExit) as bad:
        _cli(str(folder))  # no --url
    assert bad.value.code == 2
    with pytest.raises(SystemExit) as bad:
        _cli(str(folder), "--url", gateway_url, "--prefix", "../up")
    assert bad.value.code == 2


def test_watch_syncs_a_change_without_waiting_for_the_interval(
    gateway_url: str, tmp_path: Path
) -> None:
    folder = _folder(tmp_path, {"a.md": "alpha"})
    gateway = Gateway(gateway_url, TOKEN, policy=FAST)
    options = Options(folder=str(folder), library="watch", delete=True)
    passes: list[Summary] = []
    stop = threading.Event()
    runner = threading.Thread(
        target=watch,
        args=(lambda: passes.append(sync_once(gateway, options)), str(folder), "", Filters()),
        kwargs={"interval_s": 600, "poll_s": 0.1, "stop": stop},
        daemon=True,
    )
    runner.start()
    try:
        deadline = time.monotonic() + 10
        while not passes and time.monotonic() < deadline:
            time.sleep(0.05)
        (folder / "b.md").write_text("beta")
        while len(passes) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        runner.join(timeout=10)
    assert len(passes) >= 2, "the change was not synced before the interval"
    assert passes[0].uploaded == 1 and passes[1].uploaded == 1
    assert _sources(gateway_url, "watch") == ["a.md", "b.md"]


def test_unchanged_files_are_not_read_again(gateway_url: str, tmp_path: Path) -> None:
    """With the hash cache, a pass over files whose size and time are as before opens none
    of them, in the same run and in the next; a file touched without a change is read and
    found unchanged; one changed in place is sent; --checksum reads them all."""
    folder = _folder(tmp_path / "docs", {f"note-{k}.md": f"note number {k}" for k in range(5)})
    hour_ago = time.time() - 3600
    for path in folder.iterdir():
        os.utime(path, (hour_ago, hour_ago))
    cache = tmp_path / "cache"
    opened: list[str] = []

    def counting(path: str) -> BinaryIO:
        opened.append(Path(path).name)
        return open_file(path)

    gateway = Gateway(gateway_url, TOKEN, policy=FAST)
    options = Options(folder=str(folder), library="hashed", cache_dir=str(cache))
    first = sync_once(gateway, options, opener=counting)
    assert (first.uploaded, first.hashed) == (5, 5)
    opened.clear()
    second = sync_once(gateway, options, opener=counting)
    assert (second.unchanged, second.hashed, opened) == (5, 0, [])

    touched, edited = folder / "note-1.md", folder / "note-2.md"
    os.utime(touched, (hour_ago + 60, hour_ago + 60))
    edited.write_text("note number 9")  # the same size, another text
    os.utime(edited, (hour_ago, hour_ago + 120))
    third = sync_once(gateway, options, opener=counting)
    assert (third.uploaded, third.unchanged, third.hashed) == (1, 4, 2)
    assert sorted(opened) == ["note-1.md", "note-2.md", "note-2.md"]  # hashed, hashed + sent

    verify = Options(folder=str(folder), library="hashed", cache_dir=str(cache), checksum=True)
    assert sync_once(gateway, verify).hashed == 5
    code, out, _ = _cli(
        str(folder), "--url", gateway_url, "--token", TOKEN, "--library", "hashed", "--json",
        "--cache-dir", str(cache),
    )  # fmt: skip
    assert code == 0 and json.loads(out)["hashed"] == 0
