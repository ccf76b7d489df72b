"""Keyword search in Chinese, Japanese and Korean (`services.index.store.cjk`) on a real
LanceDB: words inside unspaced text are found, other languages rank as before, the terms
are the same before and after a fold into the index, and a store from 0.8.6 gets its CJK
rows' terms on the writer's open (the rest get "" without being read)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import lancedb
import pyarrow as pa
import pytest

from services.index.core import IndexCore
from services.index.settings import IndexSettings
from services.index.store import IndexStore
from services.index.store.cjk import index_terms, query_terms
from tests.index_helpers import bm25, upsert_request, write_old_store

pytestmark = pytest.mark.integration

TEXTS = {
    "zh.md": "人工智能正在改变世界。熊猫是中国的国宝，生活在四川的竹林里。",
    "ja.md": "今日は晴れです。富士山がよく見えます。東京から電車で二時間。",
    "ko.md": "서울에서 부산까지 기차로 세 시간 걸립니다. 한국의 수도는 서울입니다.",
    "en.md": "Giant pandas live in the bamboo forests of Sichuan province.",
    "mixed.md": "The Lanczos 法 method: 固有値 problems in Python.",
}


@pytest.fixture
async def core(tmp_path: Path) -> AsyncIterator[IndexCore]:
    async with IndexCore(IndexSettings(lancedb_uri=str(tmp_path / "lancedb"))) as opened:
        for n, (source, text) in enumerate(TEXTS.items()):
            await opened.upsert(upsert_request(source, [text], seed=n))
        yield opened


def test_terms_are_characters_and_pairs_and_queries_pairs() -> None:
    assert index_terms("熊猫是 panda") == "熊 猫 是 熊猫 猫是"
    assert index_terms("no CJK here") == ""
    assert query_terms("大熊猫") == "大熊 熊猫"
    assert query_terms("猫 and 犬") == "猫 犬"  # a one-character run is its own term
    assert query_terms("서울 가자") == "서울 가자"


@pytest.mark.parametrize(
    ("query", "source"),
    [
        ("熊猫", "zh.md"),
        ("四川 竹林", "zh.md"),
        ("富士山", "ja.md"),
        ("東京", "ja.md"),
        ("서울", "ko.md"),
        ("固有値", "mixed.md"),
        ("bamboo pandas", "en.md"),
    ],
)
async def test_words_inside_unspaced_text_are_found(
    core: IndexCore, query: str, source: str
) -> None:
    for _ in range(2):  # as written, then folded into the indexes
        hits = (await core.search(bm25(query, top_k=5))).results
        assert hits and hits[0].source == source, (query, [h.source for h in hits])
        await core.optimize()


async def test_a_query_mixing_scripts_asks_both_indexes(core: IndexCore) -> None:
    hits = (await core.search(bm25("Lanczos 熊猫", top_k=5))).results
    assert {h.source for h in hits} == {"mixed.md", "zh.md"}
    # Text in no CJK script finds nothing through the pairs: English ranks as before.
    assert [h.source for h in (await core.search(bm25("Sichuan", top_k=5))).results] == ["en.md"]
    assert (await core.search(bm25("猫犬", top_k=5))).results == []


async def test_a_store_from_0_8_6_gets_the_terms_of_its_cjk_rows_on_open(tmp_path: Path) -> None:
    uri = str(tmp_path / "lancedb")
    write_old_store(uri)
    old = lancedb.connect(uri).open_table("chunks")
    row = old.search().limit(1).to_arrow().to_pylist()[0]
    row.update(chunk_id="old-doc:2", chunk_index=2, content="熊猫是中国的国宝")
    old.add(pa.Table.from_pylist([row], schema=old.schema))
    store = IndexStore(IndexSettings(lancedb_uri=uri))
    try:
        chunks = store.state.chunks
        assert chunks is not None
        terms = chunks.search().select(["content", "cjk_terms"]).limit(None).to_arrow()
        assert {r["content"]: r["cjk_terms"] for r in terms.to_pylist()} == {
            "walrus from before": "",
            "second walrus": "",
            "熊猫是中国的国宝": index_terms("熊猫是中国的国宝"),
        }
        hits = (await store.search(bm25("熊猫", top_k=5))).results
        assert [(h.doc_id, h.chunk_index) for h in hits] == [("old-doc", 2)]
    finally:
        store.close()
