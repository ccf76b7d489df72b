"""Every process that runs the index (`python -m services.entrypoints.serve index`, and
`mcpvectordb` over stdio or `--standalone`) sets LanceDB's log filter before LanceDB starts
its logger: its warnings stay, the one it writes per empty IVF partition at each fold does
not; a LANCEDB_LOG of the operator's own wins. Other services leave it alone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from services.entrypoints import mcpvectordb, serve
from services.entrypoints.lancelog import FORK_WARNING, LANCE_LOG


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.setenv("LANCEDB_URI", str(tmp_path / "lancedb"))
    monkeypatch.setenv("LANCEDB_LOG", "restored after the test")
    monkeypatch.delenv("LANCEDB_LOG")
    return monkeypatch


def test_the_index_keeps_lances_warnings_but_not_the_empty_partitions(
    clean: pytest.MonkeyPatch,
) -> None:
    serve.build("index")
    assert os.environ["LANCEDB_LOG"] == "warn,lance::index::vector::builder=error"


def test_the_operators_lancedb_log_wins(clean: pytest.MonkeyPatch) -> None:
    clean.setenv("LANCEDB_LOG", "info")
    serve.build("index")
    assert os.environ["LANCEDB_LOG"] == "info"


def test_the_gateway_leaves_it_alone(clean: pytest.MonkeyPatch) -> None:
    serve.build("gateway")
    assert "LANCEDB_LOG" not in os.environ


def test_the_stdio_server_runs_the_index_in_process_and_sets_it_too(
    clean: pytest.MonkeyPatch,
) -> None:
    ran: list[str] = []

    def run(main: Coroutine[Any, Any, None]) -> None:
        ran.append(os.environ.get("LANCEDB_LOG", "unset"))
        main.close()

    clean.setattr(mcpvectordb.asyncio, "run", run)
    assert mcpvectordb.main(["--transport", "stdio"]) == 0
    assert ran == [LANCE_LOG]


@pytest.mark.parametrize(("standalone", "expected"), [(True, LANCE_LOG), (False, None)])
def test_an_http_gateway_sets_it_only_with_the_index_in_process(
    clean: pytest.MonkeyPatch, standalone: bool, expected: str | None
) -> None:
    clean.setattr(mcpvectordb.uvicorn, "run", lambda *args, **kwargs: None)
    argv = ["--transport", "sse", "--host", "127.0.0.1", "--port", "18999"]
    assert mcpvectordb.main([*argv, "--standalone"] if standalone else argv) == 0
    assert os.environ.get("LANCEDB_LOG") == expected


@pytest.mark.parametrize("quiet", [False, True])
def test_lances_warning_at_a_fork_is_not_shown_where_the_index_runs(quiet: bool) -> None:
    """Lance warns at every fork once imported; a process that runs the index forks only to
    exec (git), so `quiet_lance_log` hides it. Checked in a fresh interpreter, whose warning
    filters are Python's own."""
    code = (
        "import subprocess, sys\n"
        "if sys.argv[1] == 'quiet':\n"
        "    from services.entrypoints.lancelog import quiet_lance_log\n"
        "    quiet_lance_log()\n"
        "import lance\n"
        "subprocess.run(['true'], preexec_fn=lambda: None, check=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "quiet" if quiet else "loud"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert (FORK_WARNING in done.stderr) is not quiet, done.stderr
