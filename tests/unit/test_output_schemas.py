"""Tool output schemas are published without `$ref` (each definition written in place), and
they accept and refuse what the schema with `$defs` does."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from pydantic.json_schema import models_json_schema

from libs.contracts import TOOLS, TOOLS_BY_NAME, ErrorResult, SearchResult
from services.gateway.tools import inline_refs, output_schema
from tests.fakes import search_hit

HIT = search_hit(similarity=None)


def _with_defs() -> dict[str, Any]:
    models = [SearchResult, ErrorResult]
    refs, definitions = models_json_schema([(m, "serialization") for m in models])
    return {"type": "object", "anyOf": [refs[(m, "serialization")] for m in models], **definitions}


def test_every_output_schema_is_self_contained() -> None:
    for tool in TOOLS:
        schema = output_schema(tool)
        assert "$ref" not in json.dumps(schema) and "$defs" not in schema, tool.name
        jsonschema.Draft202012Validator.check_schema(schema)


def test_inlined_schema_judges_results_as_the_original() -> None:
    original = jsonschema.Draft202012Validator(_with_defs())
    inlined = jsonschema.Draft202012Validator(output_schema(TOOLS_BY_NAME["search"]))
    instances = [
        {"results": [HIT, {**HIT, "chunk_index": 1}], "truncated": False},
        {"status": "error", "error": "bad", "error_code": "invalid_input"},
        {"results": [{k: v for k, v in HIT.items() if k != "content"}]},  # a hit without text
        {"results": [{**HIT, "page": "one"}]},  # a page that is not a number
        {"results": "none"},
    ]
    verdicts = [(original.is_valid(i), inlined.is_valid(i)) for i in instances]
    assert verdicts == [(True, True), (True, True), (False, False), (False, False), (False, False)]


def test_a_recursive_definition_keeps_its_refs() -> None:
    schema = {
        "type": "object",
        "anyOf": [{"$ref": "#/$defs/Node"}],
        "$defs": {
            "Node": {"properties": {"children": {"items": {"$ref": "#/$defs/Node"}}}},
        },
    }
    assert inline_refs(schema) == schema
