"""Shared pieces of the index tests: the stand-in model, deterministic unit vectors, and the
one builder of `UpsertRequest`s every index test module uses."""

from __future__ import annotations

from typing import Any

import numpy as np

from libs.contracts import Chunk, NewDocument, UpsertRequest
from libs.vectors import Matrix, encode

DIM = 384
MODEL = "test/minilm"


def unit_vectors(n: int, seed: int) -> Matrix:
    vectors = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    normalised: Matrix = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return normalised


def upsert_request(
    source: str,
    texts: list[str],
    *,
    library: str = "default",
    seed: int = 0,
    vectors: Matrix | None = None,
    title: str | None = None,
    file_type: str = "md",
    last_modified: str = "2025-06-01T09:00:00+00:00",
    metadata: dict[str, Any] | None = None,
    markdown: str | None = None,
    pages: list[int] | None = None,
    headings: list[str] | None = None,
    token_counts: list[int] | None = None,
    model: str = MODEL,
    dim: int | None = None,
) -> UpsertRequest:
    """A document of one chunk per text, as the gateway would send it.

    Vectors are `unit_vectors(len(texts), seed)` unless given; the title is "Title of
    <source>", the Markdown the texts joined by blank lines, and each chunk's heading path
    ["Top", "Part <i>"] unless given. Token counts default to 0, which the index counts itself.
    """
    if vectors is None:
        vectors = unit_vectors(len(texts), seed)
    return UpsertRequest(
        document=NewDocument(
            source=source,
            library=library,
            title=title if title is not None else f"Title of {source}",
            file_type=file_type,
            content_hash=f"hash-{seed}",
            last_modified=last_modified,
            metadata=metadata or {},
            markdown=markdown if markdown is not None else "\n\n".join(texts),
        ),
        chunks=[
            Chunk(
                chunk_index=i,
                text=text,
                page=pages[i] if pages else 0,
                headings=list(headings) if headings is not None else ["Top", f"Part {i}"],
                token_count=token_counts[i] if token_counts else 0,
            )
            for i, text in enumerate(texts)
        ],
        model=model,
        dim=dim if dim is not None else int(vectors.shape[1]),
        vectors_b64=encode(vectors),
    )
