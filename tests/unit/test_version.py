"""The server version is one number: code, package metadata and the tool spec agree."""

from __future__ import annotations

import re
import tomllib

from libs import SERVER_NAME, SERVER_VERSION
from tests.conftest import REPO


def test_versions_agree() -> None:
    spec = (REPO / "docs" / "mcp-tool-spec.md").read_text(encoding="utf-8")
    table = re.search(r"^\| Version \| `([0-9.]+)`", spec, re.MULTILINE)
    assert table is not None and table.group(1) == SERVER_VERSION
    assert f"### {SERVER_VERSION}" in spec, "the changelog has no entry for this version"
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == SERVER_VERSION
    assert f"| Name | `{SERVER_NAME}` |" in spec
