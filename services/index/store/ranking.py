"""The search legs and what turns their candidates into a result list: reciprocal rank
fusion, the cap per document and the token budget.

Each leg reads, per candidate, its row id and score (plus the columns asked for): enough to
fuse, rank and cap per document. The columns a hit shows are read afterwards for the picked
rows only, by row id (`search.materialize`), so a search reads the text of top_k chunks
rather than of every candidate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from lancedb.query import (
    AsyncFTSQuery,
    AsyncVectorQuery,
    BooleanQuery,
    FullTextOperator,
    MatchQuery,
    Occur,
)
from lancedb.table import AsyncTable

from libs.contracts import SearchHit, SearchResult
from libs.tasks import to_the_end
from libs.vectors import Matrix
from services.index.store import cjk
from services.index.store.schema import CJK_TERMS

Row = dict[str, Any]
Ranked = list[tuple[Row, float]]

# The key a candidate's cosine similarity to the query is kept under (a row read with its
# `vector` column loses that column to it).
SIMILARITY = "_similarity"


def _match(text: str, column: str) -> MatchQuery:
    return MatchQuery(
        text,
        column,
        boost=1.0,
        fuzziness=0,
        max_expansions=50,
        operator=FullTextOperator.OR,
        prefix_length=0,
        document_granularity=None,
    )


async def fts_leg(
    table: AsyncTable, text: str, where: str | None, depth: int, columns: list[str]
) -> list[Row]:
    # A MatchQuery is tokenised like the indexed text and never parsed as query syntax,
    # so operators, quotes or field names in the user's words are just words. Chinese,
    # Japanese and Korean text is also looked up as character pairs in `cjk_terms` (`cjk`).
    match: MatchQuery | BooleanQuery = _match(text, "content")
    if cjk.has_cjk(text):
        pairs = _match(cjk.query_terms(text), CJK_TERMS)
        match = BooleanQuery([(Occur.SHOULD, match), (Occur.SHOULD, pairs)])
    query = table.query().nearest_to_text(match)
    return await _candidates(query, where, depth, columns, "_score", float)


async def vector_leg(
    table: AsyncTable,
    vector: Matrix,
    where: str | None,
    depth: int,
    columns: list[str],
    nprobes: int,
    refine_factor: int,
) -> list[Row]:
    query = table.query().nearest_to(vector[0]).column("vector").distance_type("cosine")
    if nprobes:  # approximate search over the IVF index
        query = query.nprobes(nprobes).maximum_nprobes(nprobes).refine_factor(refine_factor)
    return await _candidates(query, where, depth, columns, "_distance", lambda d: 1.0 - d)


async def _candidates(
    query: AsyncFTSQuery | AsyncVectorQuery,
    where: str | None,
    depth: int,
    columns: list[str],
    score_column: str,
    score: Callable[[float], float],
) -> list[Row]:
    """A leg's best `depth` rows, each with its row id, `columns` and `_leg_score` (higher is
    better), `where` applied before the search (prefilter)."""
    if where:
        query = query.where(where)
    found = await to_the_end(
        query.select([*columns, score_column]).with_row_id().limit(depth).to_arrow()
    )
    rows: list[Row] = found.to_pylist()
    for row in rows:
        row["_leg_score"] = score(float(row.pop(score_column)))
    return rows


def fuse(legs: list[list[Row]], k: int) -> Ranked:
    """Reciprocal rank fusion: each leg adds 1 / (k + rank) for every row it found;
    every candidate, best first (ties by row id, so one version always gives one order)."""
    scores: dict[int, float] = {}
    rows: dict[int, Row] = {}
    for leg in legs:
        for rank, row in enumerate(leg, start=1):
            row_id = row["_rowid"]
            scores[row_id] = scores.get(row_id, 0.0) + 1.0 / (k + rank)
            rows.setdefault(row_id, row)
    best = sorted(scores, key=lambda r: (-scores[r], r))
    return [(rows[r], scores[r]) for r in best]


def leg_ranking(legs: list[list[Row]]) -> Ranked:
    """A single leg's candidates with their own scores (bm25 and vector modes)."""
    return [(row, row["_leg_score"]) for leg in legs for row in leg]


def attach_similarity(
    rows: list[Row], query: Matrix, known: dict[int, float] | None = None
) -> None:
    """Give each row its cosine similarity to the 1 x dim `query`, from its `vector`
    column (dropped from the row) or from `known` by row id. Both vectors are normalised
    by the model, so the cosine is their dot product; it is computed on re-normalised
    copies anyway, so a vector stored by another model's pipeline cannot leave [-1, 1]."""
    known = known or {}
    todo = [row for row in rows if row["_rowid"] not in known]
    for row in rows:
        if row["_rowid"] in known:
            row[SIMILARITY] = known[row["_rowid"]]
            row.pop("vector", None)
    if not todo:
        return
    matrix = np.asarray([row.pop("vector") for row in todo], dtype=np.float32)
    q = query[0] / max(float(np.linalg.norm(query[0])), 1e-12)
    norms = np.maximum(np.linalg.norm(matrix, axis=1), 1e-12)
    for row, value in zip(todo, (matrix @ q) / norms, strict=True):
        row[SIMILARITY] = float(value)


def above_floor(ranked: Ranked, query: Matrix, floor: float) -> Ranked:
    """The candidates whose cosine similarity to `query` is at least `floor`, in order.
    Each candidate was read with its `vector` column."""
    attach_similarity([row for row, _ in ranked if SIMILARITY not in row], query)
    return [(row, score) for row, score in ranked if row[SIMILARITY] >= floor]


def cap_per_document(ranked: Ranked, top_k: int, per_document: int | None) -> Ranked:
    """The first `top_k` of `ranked`, skipping a document's chunks past `per_document`."""
    if per_document is None:
        return ranked[:top_k]
    taken: dict[str, int] = {}
    picked = []
    for row, score in ranked:
        doc_id = row["doc_id"]
        if taken.get(doc_id, 0) < per_document:
            taken[doc_id] = taken.get(doc_id, 0) + 1
            picked.append((row, score))
            if len(picked) == top_k:
                break
    return picked


def within_budget(hits: list[SearchHit], max_tokens: int | None) -> SearchResult:
    """The leading hits whose token counts add up to at most `max_tokens` (all without it)."""
    total = 0
    for kept, hit in enumerate(hits):
        if max_tokens is not None and total + hit.token_count > max_tokens:
            return SearchResult(results=hits[:kept], truncated=True, total_tokens=total)
        total += hit.token_count
    return SearchResult(results=hits, truncated=False, total_tokens=total)
