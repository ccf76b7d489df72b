"""The building blocks of every contract: the two base models and each field type that more
than one message shares, with its bounds and its description, declared once.

A tool's input schema, the HTTP routes' bodies and the inter-service requests are all made of
these, so a bound (top_k 1-100, library names up to 128 characters...) is enforced, published
in the MCP input schema and documented by the same line.
"""

from __future__ import annotations

import functools
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from libs.filters import parse_filter

DEFAULT_LIBRARY = "default"
MAX_LIBRARY_CHARS = 128
MAX_SOURCE_CHARS = 2048
MAX_URL_CHARS = 8192
MAX_PATH_CHARS = 4096
MAX_QUERY_CHARS = 10_000
MAX_DOC_ID_CHARS = 64
MAX_TOP_K = 100
MAX_LIST_LIMIT = 1000
MAX_CONTEXT_CHUNKS = 20
MAX_TOKENS_LIMIT = 100_000
MAX_PER_DOCUMENT = 100
MAX_CONCURRENCY = 64

IngestStatus = Literal["indexed", "replaced", "skipped"]
EmbedKind = Literal["document", "query"]
SearchMode = Literal["hybrid", "bm25", "vector"]


class Model(BaseModel):
    """An input: unknown fields are refused, so a misspelt option is an error, not ignored."""

    model_config = ConfigDict(extra="forbid")


class ToolInput(Model):
    """A tool's (or an HTTP endpoint's) input from a caller: besides unknown fields, values of
    the wrong type are refused rather than coerced ("5" is not a top_k, "no" not a bool); a
    number without a fraction is an integer, as in the JSON Schema the tools publish."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, data: Any) -> Any:
        """A number without a fraction is an integer, as in JSON Schema: `5.0` is a top_k
        (clients whose numbers are all floating point send it so); `5.5` and `"5"` are not."""
        if not isinstance(data, dict):
            return data
        names = _integer_fields(cls)
        return {
            key: int(value)
            if key in names and isinstance(value, float) and value.is_integer()
            else value
            for key, value in data.items()
        }


@functools.cache
def _integer_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields of `model` that take an integer (optional or not), by name and alias."""
    names: set[str] = set()
    for name, field in model.model_fields.items():
        annotation = field.annotation
        union = get_origin(annotation) in (Union, types.UnionType)
        if int in (get_args(annotation) if union else (annotation,)):
            names.update({name, field.alias or name})
    return frozenset(names)


class Sparse(BaseModel):
    """An output whose optional fields are left out when they have no value, rather than sent
    as null."""

    model_config = ConfigDict(extra="ignore")

    @model_serializer(mode="wrap")
    def _without_nulls(self, handler: SerializerFunctionWrapHandler) -> Any:
        dumped = handler(self)
        if not isinstance(dumped, dict):
            return dumped
        return {key: value for key, value in dumped.items() if value is not None}


class Out(BaseModel):
    """An output: extra fields are tolerated so a newer service can talk to an older caller."""

    model_config = ConfigDict(extra="ignore")


# ------------------------------------------------------------------------- validators


def _library(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("library must not be empty; omit it to use 'default'")
    if any(ord(ch) < 32 for ch in value):
        raise ValueError("library names may not contain control characters")
    return value


def _optional_library(value: str | None) -> str | None:
    return None if value is None else _library(value)


def _not_blank(what: str, hint: str) -> AfterValidator:
    def check(value: str) -> str:
        if not value.strip():
            raise ValueError(f"{what} is only whitespace; {hint}")
        return value

    return AfterValidator(check)


def _filter(value: dict[str, Any] | None) -> dict[str, Any] | None:
    # Refused before the query is embedded; the index checks again with the same rules.
    parse_filter(value)
    return value


# ----------------------------------------------------------------------- field types

FILTER_HELP = (
    "Conditions, AND-ed. A field is file_type, page, last_modified, source, title, library, "
    "doc_id, chunk_index or metadata.<key>; a plain value means equality, or an object of "
    "operators $eq $ne $gt $gte $lt $lte $in $contains, e.g. "
    '{"file_type": "pdf", "page": {"$gte": 3}, "metadata.author": {"$in": ["Alice", "Bob"]}}'
)

LibraryName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_LIBRARY_CHARS,
        description=f"Library (collection) to index into (1-{MAX_LIBRARY_CHARS} characters)",
    ),
    AfterValidator(_library),
]
LibraryFilter = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=MAX_LIBRARY_CHARS,
        description="Restrict to this library; null = all",
    ),
    AfterValidator(_optional_library),
]
Metadata = Annotated[
    dict[str, Any] | None, Field(description="Arbitrary key-value metadata to attach")
]
FilePath = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_PATH_CHARS,
        description="Absolute or relative path to the file",
    ),
]
FolderPath = Annotated[
    str,
    Field(min_length=1, max_length=MAX_PATH_CHARS, description="Path to the folder to ingest"),
]
Content = Annotated[
    str,
    Field(min_length=1, description="Full text or Markdown to index"),
    _not_blank("content", "pass the text to index"),
]


def _source(value: str) -> str:
    if not value.strip() or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError(
            "source must be a path-like name without control characters that is not only "
            "whitespace, e.g. 'Projects/Q3/report.pdf'"
        )
    return value


Source = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_SOURCE_CHARS,
        description="Label for the origin (filename, URL...), used for dedup",
    ),
    AfterValidator(_source),
]
Url = Annotated[
    str,
    Field(min_length=1, max_length=MAX_URL_CHARS, description="HTTP or HTTPS URL to fetch"),
]
Recursive = Annotated[bool, Field(description="Scan subdirectories")]
MAX_PATTERNS = 100
MAX_PATTERN_CHARS = 256
Pattern = Annotated[str, Field(min_length=1, max_length=MAX_PATTERN_CHARS)]
MaxConcurrency = Annotated[
    int,
    Field(
        ge=1,
        le=MAX_CONCURRENCY,
        description=f"Max files processed simultaneously (1-{MAX_CONCURRENCY})",
    ),
]
Query = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="Natural language search query",
    ),
    _not_blank("query", "pass the words to search for"),
]
TopK = Annotated[
    int, Field(ge=1, le=MAX_TOP_K, description=f"Max results to return (1-{MAX_TOP_K})")
]
Filter = Annotated[dict[str, Any] | None, Field(description=FILTER_HELP), AfterValidator(_filter)]
MaxTokens = Annotated[
    int | None,
    Field(
        ge=1,
        le=MAX_TOKENS_LIMIT,
        description=(
            f"Token budget (1-{MAX_TOKENS_LIMIT}): return the best results, in order, while "
            "their content fits; the result says truncated and total_tokens"
        ),
    ),
]
MaxPerDocument = Annotated[
    int | None,
    Field(
        ge=1,
        le=MAX_PER_DOCUMENT,
        description=f"At most this many chunks from any one document (1-{MAX_PER_DOCUMENT})",
    ),
]
MinScore = Annotated[
    float | None,
    Field(
        ge=0.0,
        le=1.0,
        description=(
            "Similarity floor (0-1): drop results whose cosine similarity to the query is "
            "below it, in every mode; each result reports its similarity. With the bundled "
            "MiniLM model 0.35-0.4 keeps related results, 0.9 finds near-duplicates"
        ),
    ),
]
Limit = Annotated[
    int,
    Field(ge=1, le=MAX_LIST_LIMIT, description=f"Max documents to return (1-{MAX_LIST_LIMIT})"),
]
Offset = Annotated[int, Field(ge=0, description="Pagination offset (0 or more)")]
DocId = Annotated[
    str,
    Field(min_length=1, max_length=MAX_DOC_ID_CHARS, description="The document's doc_id (UUID)"),
]
ChunkIndex = Annotated[
    int | None,
    Field(
        ge=0,
        description="Return only the window around this chunk (a search hit's chunk_index)",
    ),
]
ContextChunks = Annotated[
    int,
    Field(
        ge=0,
        le=MAX_CONTEXT_CHUNKS,
        description=f"Chunks on each side of chunk_index (0-{MAX_CONTEXT_CHUNKS})",
    ),
]
CheckPath = Annotated[
    str | None,
    Field(max_length=MAX_PATH_CHARS, description="File path to test for readability"),
]
