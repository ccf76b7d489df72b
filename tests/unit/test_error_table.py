"""Every error code the server can send is in the one table of `docs/mcp-tool-spec.md`, with
the HTTP status the code is sent with."""

from __future__ import annotations

import re

import libs.modelfiles
import services.converter.errors
import services.embedder.errors
import services.gateway.errors
import services.index.errors
from libs.errors import MvdbError
from tests.conftest import REPO


def _all_error_classes() -> set[type[MvdbError]]:
    # The service modules are imported above so that their subclasses are counted too.
    assert libs.modelfiles and services.converter.errors and services.embedder.errors
    assert services.gateway.errors and services.index.errors
    found: set[type[MvdbError]] = set()
    todo: list[type[MvdbError]] = [MvdbError]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith(("libs.", "services.")):  # not a test's own subclass
            found.add(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_error_code_is_in_the_spec_table_with_its_status() -> None:
    spec = (REPO / "docs" / "mcp-tool-spec.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| `([a-z_]+)` \| (\d{3}) \|", spec, re.MULTILINE))
    classes = _all_error_classes()
    assert len(classes) > 20
    for cls in classes:
        assert table.get(cls.error_code) == str(cls.http_status), (cls, cls.error_code)
    assert set(table) == {cls.error_code for cls in classes}, "the table lists a code no class has"
