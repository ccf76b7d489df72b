"""`python -m services.entrypoints.serve index` sets LanceDB's log filter before LanceDB
starts its logger: its warnings stay, the one it writes per empty IVF partition at each fold
does not; a LANCEDB_LOG of the operator's own wins. Other services leave it alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.entrypoints import serve


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
