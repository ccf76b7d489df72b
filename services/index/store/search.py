"""Hybrid, vector and BM25 search: a coroutine awaited on the caller's loop.

Nothing here blocks the loop but a filter's compilation and the fusion of at most a few
hundred candidates; looking for tables another process created, while the store is still
empty, happens in a worker thread (`tables.tables_async`), and so does the read of the rows
picked (`picks`, Lance's own read by row id). The legs, the fusion and that read see one
table version (`snapshot`), and a hit's document columns come from memory for a doc_id seen
before (`StoreState.hit_documents`).

The query vector may still be on its way (`later`, while the caller embeds the query): the
full-text leg needs only the words, so it starts at once and the vector leg follows when the
vector comes (`services.index.search_stream`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import numpy as np
from anyio import to_thread
from lancedb.table import AsyncTable, Table

from libs.contracts import IndexSearchRequest, SearchResult
from libs.errors import InvalidInputError
from libs.tasks import abandon, to_the_end
from libs.vectors import Matrix, decode
from services.index.errors import StoreModelMismatch
from services.index.filters import compile_filter
from services.index.store import ann, lance, ranking, snapshot
from services.index.store.meta import ModelStamp
from services.index.store.ranking import Ranked, Row
from services.index.store.rows import search_hit
from services.index.store.schema import HIT_CHUNK_COLUMNS, HIT_DOCUMENT_ENTRY, in_list
from services.index.store.state import StoreState
from services.index.store.tables import tables_async

# With max_per_document, a search whose candidates hold too few documents asks each leg for
# this many times more, up to MAX_CANDIDATES, before it returns fewer than top_k results.
DEEPEN_FACTOR = 4
MAX_CANDIDATES = 1000


async def search(
    state: StoreState, request: IndexSearchRequest, later: Awaitable[str] | None = None
) -> SearchResult:
    """`request`'s results; `later`, when the request has no `vector_b64`, gives the query
    vector (base64 float32, as `vector_b64`) once the caller has it."""
    text = request.query.strip()
    mode = request.mode
    if request.vector_b64:
        later = None
    vector_given = request.vector_b64 is not None or later is not None
    if mode in ("hybrid", "vector") and not vector_given:
        raise InvalidInputError(
            f"search mode {mode!r} needs vector_b64 (the embedded query); "
            "use mode 'bm25' for a keyword-only search"
        )
    if mode == "bm25" and not text:
        raise InvalidInputError("search mode 'bm25' needs query text")
    where = compile_filter(request.filter, library=request.library)
    _, chunks = await tables_async(state)
    if chunks is None:
        return SearchResult(results=[])
    floor = request.min_score
    if floor is not None and not vector_given:
        raise InvalidInputError(
            "min_score needs vector_b64 (the embedded query) to compute similarities, in every mode"
        )
    # The query vector: the vector leg's input, and what every hit's similarity is
    # measured against (in bm25 mode too, when the caller embedded the query).
    embedded = query_vector(request.vector_b64, state.stamp) if request.vector_b64 else None
    top_k, per_document = request.top_k, request.max_per_document
    settings = state.settings
    depth_start = max(settings.index_candidates_min, settings.index_candidates_per_result * top_k)
    # The legs read row ids and scores, plus doc_id when results are capped per
    # document; the columns a hit shows are read afterwards for the picked rows alone.
    rank_columns = ["doc_id"] if per_document is not None else []
    if floor is not None:
        # The floor applies before ranking stops, so each candidate's similarity is
        # needed: its stored vector is read along (384 floats a candidate).
        rank_columns.append("vector")

    def words_leg(table: AsyncTable, depth: int) -> Awaitable[list[Row]] | None:
        if mode == "vector" or not text:
            return None
        return ranking.fts_leg(table, text, where, depth, rank_columns)

    async def read(table: AsyncTable, version: int) -> Ranked:
        nonlocal embedded
        early: asyncio.Future[list[Row]] | None = None
        if embedded is None and later is not None:
            # The words are here before the vector: their leg runs while it comes.
            leg = words_leg(table, depth_start)
            early = asyncio.ensure_future(leg) if leg is not None else None
            try:
                embedded = query_vector(await later, state.stamp)
            except BaseException:
                if early is not None:
                    await abandon(early)  # the vector's failure is the search's
                raise
        vector = embedded if mode != "bm25" else None
        probes = await ann.nprobes(state, table, version, where) if vector is not None else 0
        depth = depth_start
        while True:
            legs: list[Awaitable[list[Row]]] = []
            words = early or words_leg(table, depth)
            early = None
            if words is not None:
                legs.append(words)
            if vector is not None:
                legs.append(
                    ranking.vector_leg(
                        table,
                        vector,
                        where,
                        depth,
                        rank_columns,
                        probes,
                        settings.index_vector_refine_factor,
                    )
                )
            # Lance runs the two legs side by side on its own threads.
            ranked_legs = list(await asyncio.gather(*legs))
            # Hybrid fuses the two legs; the other modes run exactly one leg.
            ranked = (
                ranking.fuse(ranked_legs, settings.index_rrf_k)
                if mode == "hybrid"
                else ranking.leg_ranking(ranked_legs)
            )
            if floor is not None and embedded is not None:
                ranked = ranking.above_floor(ranked, embedded, floor)
            picked = ranking.cap_per_document(ranked, top_k, per_document)
            exhausted = all(len(leg) < depth for leg in ranked_legs)
            if len(picked) >= top_k or exhausted or depth >= MAX_CANDIDATES:
                return await materialize(state, chunks, version, picked, embedded)
            depth = min(depth * DEEPEN_FACTOR, MAX_CANDIDATES)

    picked = await snapshot.in_one_version(state, chunks, read)
    hits = [search_hit(row, score) for row, score in picked]
    return ranking.within_budget(hits, request.max_tokens)


async def materialize(
    state: StoreState, chunks: Table, version: int, picked: Ranked, embedded: Matrix | None
) -> Ranked:
    """The picked candidates with every column a hit shows, in the same order, each with
    its `similarity` to `embedded` (when the query was embedded), read from `chunks` at
    `version` (`picks`). Document columns come from the per-doc_id cache; only documents
    not in it are read."""
    if not picked:
        return []
    known = {
        row["_rowid"]: row[ranking.SIMILARITY] for row, _ in picked if ranking.SIMILARITY in row
    }
    unknown = embedded is not None and len(known) < len(picked)
    columns = [*HIT_CHUNK_COLUMNS, "vector"] if unknown else HIT_CHUNK_COLUMNS
    ids = [row["_rowid"] for row, _ in picked]
    rows = await to_thread.run_sync(state.picked_rows.read, chunks, version, ids, columns)
    if embedded is not None:
        ranking.attach_similarity(rows, embedded, known)
    documents = state.hit_documents.get_many({row["doc_id"] for row in rows})
    missing = {row["doc_id"] for row in rows} - documents.keys()
    if missing and state.documents is not None:
        # One row a document: its columns are cheap to read there, where the chunk rows'
        # are not when they repeat one value through a large data file (`filters.ZERO_AS_NULL`).
        found = lance.async_handle(state.documents).query().where(in_list("doc_id", missing))
        fetched = await to_the_end(found.select(HIT_DOCUMENT_ENTRY).to_arrow())
        documents.update(state.hit_documents.remember(fetched.to_pylist()))
    first_of: dict[str, int] = {}
    for row in rows:
        # Not in the documents table as its handle sees it (a write or delete in between):
        # from the chunk rows of this version.
        if row["doc_id"] not in documents:
            first_of.setdefault(row["doc_id"], row["_rowid"])
    if first_of:
        ids = list(first_of.values())
        entries = await to_thread.run_sync(
            state.picked_rows.read, chunks, version, ids, HIT_DOCUMENT_ENTRY
        )
        documents.update(state.hit_documents.remember(entries))
    by_id = {}
    for row in rows:
        document = documents.get(row["doc_id"])
        if document is None:  # the table moved between the two reads: read again
            continue
        row.update(document)
        by_id[row.pop("_rowid")] = row
    return [(by_id[r["_rowid"]], score) for r, score in picked if r["_rowid"] in by_id]


def query_vector(data: str, stamp: ModelStamp | None) -> Matrix:
    """The query vector as a 1 x dim matrix: invalid_input when `data` is not base64 float32
    values or holds NaN, model_mismatch when its width is not the store's."""
    try:
        values = decode(data, 1)  # every float32 in it, whatever the width
    except (ValueError, InvalidInputError) as exc:
        raise InvalidInputError(f"vector_b64 is not base64 float32 data: {exc}") from exc
    width = values.shape[0]
    if not width:
        raise InvalidInputError("vector_b64 holds no float32 values")
    if stamp is not None and width != stamp.dim:
        raise StoreModelMismatch(stamp.model, stamp.dim, None, width)
    if not np.isfinite(values).all():
        raise InvalidInputError("the query vector contains NaN or infinite values")
    return values.reshape(1, width)
