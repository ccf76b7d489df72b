"""Every LanceDB call the store awaits runs to its end (`libs.tasks.to_the_end`):
a LanceDB future cancelled halfway can leave the index process stuck
(tests/integration/test_index_cancelled_reads.py), so a read added later must not await one
bare. Checked in the source, as a new read would not show it until a cancel hit it."""

from __future__ import annotations

import ast
from pathlib import Path

import services.index.store as store_package

# LanceDB's async methods that start work in Lance (AsyncTable and its queries).
LANCE_CALLS = {
    "to_arrow",
    "to_batches",
    "to_list",
    "to_pandas",
    "to_polars",
    "count_rows",
    "version",
    "list_versions",
    "list_indices",
    "index_stats",
    "schema",
    "head",
    "explain_plan",
    "analyze_plan",
}
STORE = Path(store_package.__file__).parent


def bare_awaits(source: str) -> list[str]:
    """`await x.<lance call>(...)` anywhere in `source`, not wrapped in `to_the_end`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Await):
            continue
        call = node.value
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            continue
        if call.func.attr in LANCE_CALLS:
            found.append(f"line {node.lineno}: await ….{call.func.attr}()")
    return found


def test_the_store_awaits_no_lancedb_call_bare() -> None:
    offenders = {
        path.name: bare
        for path in sorted(STORE.glob("*.py"))
        if (bare := bare_awaits(path.read_text(encoding="utf-8")))
    }
    assert not offenders, f"await these through libs.tasks.to_the_end(...): {offenders}"


def test_the_check_sees_a_bare_await() -> None:
    source = (
        "async def f(table):\n"
        "    n = await table.count_rows()\n"
        "    rows = (await table.query().limit(n).to_arrow()).to_pylist()\n"
        "    return await to_the_end(table.version())\n"
    )
    assert bare_awaits(source) == [
        "line 2: await ….count_rows()",
        "line 3: await ….to_arrow()",
    ]
