"""The ingest pipeline against hand-written fakes: dedup, replace, concurrency, folders."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from libs.contracts import EmbedKind, FolderIngestResult, IngestFolderInput, StoredVectors
from libs.errors import (
    ConversionError,
    InvalidInputError,
    TooLargeError,
    UnsupportedFormatError,
    UpstreamError,
)
from libs.formats import CONVERTER_REVISION
from libs.vectors import Matrix
from services.gateway.folders import FolderIngest
from services.gateway.library import upload_name
from services.gateway.pipeline import Pipeline
from services.gateway.settings import GatewaySettings
from tests.fakes import FakeConverter, FakeEmbedder, FakeIndex


@pytest.fixture
def parts() -> tuple[FakeConverter, FakeEmbedder, FakeIndex]:
    return FakeConverter(), FakeEmbedder(), FakeIndex()


async def folder(pipeline: Pipeline, path: str, **options: Any) -> FolderIngestResult:
    request = IngestFolderInput(folder=path, library="lib", **options)
    return await FolderIngest(pipeline).run(request)


@pytest.fixture
def pipeline(parts: tuple[FakeConverter, FakeEmbedder, FakeIndex]) -> Pipeline:
    converter, embedder, index = parts
    return Pipeline(GatewaySettings(_env_file=None), converter, embedder, index)


async def test_same_content_is_skipped_without_conversion(
    pipeline: Pipeline, parts: tuple[FakeConverter, FakeEmbedder, FakeIndex]
) -> None:
    converter, embedder, _ = parts
    first = await pipeline.ingest_content("alpha\n\nbeta", "note", "default", None)
    assert first.status == "indexed" and first.chunk_count == 2
    calls, texts = converter.calls, embedder.texts
    again = await pipeline.ingest_content("alpha\n\nbeta", "note", "default", None)
    assert again.status == "skipped"
    assert again.doc_id == first.doc_id
    assert (converter.calls, embedder.texts) == (calls, texts)


async def test_same_content_made_by_an_older_converter_is_converted_again(
    pipeline: Pipeline, parts: tuple[FakeConverter, FakeEmbedder, FakeIndex]
) -> None:
    converter, _, index = parts
    first = await pipeline.ingest_bytes(b"alpha\n\nbeta", "a.md", "a.md", "default", None)
    assert index.conversions[first.doc_id] == CONVERTER_REVISION
    # As an earlier release left it: the same bytes, made before the revision was recorded.
    index.conversions[first.doc_id] = 0
    calls = converter.calls
    again = await pipeline.ingest_bytes(b"alpha\n\nbeta", "a.md", "a.md", "default", None)
    assert again.status == "replaced" and again.doc_id != first.doc_id
    assert converter.calls == calls + 1 and len(index.docs) == 1
    assert index.conversions[again.doc_id] == CONVERTER_REVISION
    # Made by this release now: the next time it is skipped, and so is a newer revision's.
    third = await pipeline.ingest_bytes(b"alpha\n\nbeta", "a.md", "a.md", "default", None)
    assert third.status == "skipped" and third.doc_id == again.doc_id
    index.conversions[again.doc_id] = CONVERTER_REVISION + 1
    fourth = await pipeline.ingest_bytes(b"alpha\n\nbeta", "a.md", "a.md", "default", None)
    assert fourth.status == "skipped" and converter.calls == calls + 1


async def test_changed_content_replaces(pipeline: Pipeline, parts) -> None:  # type: ignore[no-untyped-def]
    _, _, index = parts
    first = await pipeline.ingest_content("one", "note", "default", None)
    second = await pipeline.ingest_content("two\n\nthree", "note", "default", None)
    assert second.status == "replaced"
    assert second.doc_id != first.doc_id
    assert len(index.docs) == 1 and second.chunk_count == 2


async def test_same_source_in_other_library_is_separate(pipeline: Pipeline, parts) -> None:  # type: ignore[no-untyped-def]
    _, _, index = parts
    await pipeline.ingest_content("one", "note", "a", None)
    result = await pipeline.ingest_content("one", "note", "b", None)
    assert result.status == "indexed"
    assert len(index.docs) == 2


async def test_concurrent_ingests_of_one_source_end_with_one_document(
    pipeline: Pipeline, parts: tuple[FakeConverter, FakeEmbedder, FakeIndex]
) -> None:
    _, _, index = parts
    index.write_delay = 0.01
    results = await asyncio.gather(
        *(pipeline.ingest_content(f"version {i}", "same", "default", None) for i in range(6))
    )
    assert len(index.docs) == 1
    assert [r.status for r in results].count("indexed") == 1


async def test_failed_reingest_keeps_old_version(
    pipeline: Pipeline, parts: tuple[FakeConverter, FakeEmbedder, FakeIndex]
) -> None:
    converter, _, index = parts
    first = await pipeline.ingest_bytes(b"old text", "a.txt", "a.txt", "default", None)
    converter.fail_next = True
    with pytest.raises(ConversionError):
        await pipeline.ingest_bytes(b"new text", "a.txt", "a.txt", "default", None)
    assert list(index.docs) == [first.doc_id]


async def test_folder_ingest_reports_each_file(pipeline: Pipeline, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("first file")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("# B\n\nsecond file")
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8")
    (tmp_path / ".hidden.txt").write_text("not me")
    (tmp_path / "data.bin").write_bytes(b"\x00")
    result = await folder(pipeline, str(tmp_path), metadata={"k": "v"})
    assert result.total_files == 2 and result.indexed == 2 and result.failed == 0
    assert result.ignored_files == [str(tmp_path / "photo.jpg")]
    flat = await folder(pipeline, str(tmp_path), recursive=False)
    assert flat.total_files == 1 and flat.skipped == 1


async def test_a_folder_run_skips_unchanged_files_by_the_manifest(
    pipeline: Pipeline,
    parts: tuple[FakeConverter, FakeEmbedder, FakeIndex],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run reads the library's manifest under the folder once: an unchanged file costs
    no look-up of its own; a changed one, or one made by an older converter, is converted."""
    converter, _, index = parts
    for n in range(5):
        (tmp_path / f"n{n}.md").write_text(f"# Note {n}\n\nbody {n}")
    first = await folder(pipeline, str(tmp_path))
    assert first.indexed == 5
    lookups: list[str] = []
    looked_up = index.lookup

    async def counted(library: str, source: str) -> Any:
        lookups.append(source)
        return await looked_up(library, source)

    monkeypatch.setattr(index, "lookup", counted)
    again = await folder(pipeline, str(tmp_path))
    assert again.skipped == 5 and lookups == []
    (tmp_path / "n1.md").write_text("# Note 1\n\nedited")
    stale = next(d for d, (i, _, _) in index.docs.items() if i.source.endswith("n2.md"))
    index.conversions[stale] = 0  # as a release before 0.8.5 made it
    calls = converter.calls
    third = await folder(pipeline, str(tmp_path))
    assert (third.replaced, third.skipped) == (2, 3) and converter.calls == calls + 2
    assert {Path(s).name for s in lookups} == {"n1.md", "n2.md"}  # the fake's upsert too


async def test_folder_errors_do_not_stop_the_batch(
    pipeline: Pipeline, parts: tuple[FakeConverter, FakeEmbedder, FakeIndex], tmp_path: Path
) -> None:
    converter, _, _ = parts
    (tmp_path / "a.txt").write_text("one")
    (tmp_path / "b.txt").write_text("two")
    converter.fail_next = True
    result = await folder(pipeline, str(tmp_path), max_concurrency=1)
    assert result.failed == 1 and result.indexed == 1
    assert result.errors[0].error_code == "conversion_failed"


async def test_folder_guards(pipeline: Pipeline, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="max_concurrency"):
        await folder(pipeline, str(tmp_path), max_concurrency=0)
    with pytest.raises(Exception, match="not found"):
        await folder(pipeline, str(tmp_path / "missing"))
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(Exception, match="is a file"):
        await folder(pipeline, str(tmp_path / "f.txt"))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("C:\\Users\\alex\\Documents\\report.pdf", "report.pdf"),
        ("/home/alex/notes.md", "notes.md"),
        ("plain.docx", "plain.docx"),
        ("C:\\src\\LICENSE", "LICENSE"),  # no extension: the converter reads it as text
    ],
)
def test_upload_names_lose_their_client_paths(raw: str, expected: str) -> None:
    assert upload_name(raw) == expected


def test_upload_names_must_be_supported() -> None:
    with pytest.raises(UnsupportedFormatError, match="supported"):
        upload_name("C:\\tmp\\random.bin")
    for nameless in ("C:\\tmp\\", "", " ", ".."):
        with pytest.raises(InvalidInputError, match=r"no usable file name .*-F file=@report\.pdf"):
            upload_name(nameless)


class _FailingOnce(FakeEmbedder):
    """Fails the `fail_on`-th document batch once, as an embedder that stopped answering."""

    def __init__(self, fail_on: int) -> None:
        super().__init__()
        self.fail_on = fail_on
        self.batches = 0

    async def embed(self, texts: list[str], kind: EmbedKind) -> Matrix:
        if kind == "document":
            self.batches += 1
            if self.batches == self.fail_on:
                raise UpstreamError("the embedder service is up but did not answer in time")
        return await super().embed(texts, kind)


async def test_batches_embedded_before_a_failure_are_not_embedded_again() -> None:
    converter, embedder, index = FakeConverter(), _FailingOnce(fail_on=2), FakeIndex()
    settings = GatewaySettings(_env_file=None, embed_batch_texts=4)  # type: ignore[call-arg]
    pipeline = Pipeline(settings, converter, embedder, index)
    text = "\n\n".join(f"paragraph number {i}" for i in range(10))  # 10 chunks: 3 batches
    with pytest.raises(UpstreamError):
        await pipeline.ingest_content(text, "long-note", "default", None)
    assert index.docs == {}  # nothing half-written
    assert embedder.texts == 4  # the first batch was embedded before the failure
    result = await pipeline.ingest_content(text, "long-note", "default", None)
    assert result.status == "indexed" and result.chunk_count == 10
    assert embedder.texts == 10  # the retry embedded the other 6 only


async def test_a_new_version_embeds_only_the_texts_it_does_not_share(
    parts: tuple[FakeConverter, FakeEmbedder, FakeIndex],
) -> None:
    converter, embedder, index = parts
    # No in-memory cache: what is spared comes from the stored version alone.
    settings = GatewaySettings(_env_file=None, embed_cache_texts=0)
    pipeline = Pipeline(settings, converter, embedder, index)
    first = await pipeline.ingest_content("alpha\n\nbeta\n\ngamma", "note", "default", None)
    assert embedder.texts == 3
    second = await pipeline.ingest_content(
        "alpha\n\nbeta, edited\n\ngamma", "note", "default", None
    )
    assert second.status == "replaced" and embedder.texts == 4  # the edited chunk alone
    old, new = index.vectors[first.doc_id][2], index.vectors[second.doc_id][2]
    assert (new[0] == old[0]).all() and (new[2] == old[2]).all()
    # The same bytes converted again (made by an older converter) embed nothing new.
    index.conversions[second.doc_id] = 0
    third = await pipeline.ingest_content("alpha\n\nbeta, edited\n\ngamma", "note", "default", None)
    assert third.status == "replaced" and embedder.texts == 4
    # Vectors another model made are not taken, nor are any when the index cannot say.
    _, dim, vectors = index.vectors[third.doc_id]
    index.vectors[third.doc_id] = ("another-model", dim, vectors)
    await pipeline.ingest_content("alpha\n\nbeta\n\ngamma", "note", "default", None)
    assert embedder.texts == 7

    async def unavailable(doc_id: str) -> StoredVectors:
        raise UpstreamError("the index is busy")

    index.stored_vectors = unavailable  # type: ignore[method-assign]
    await pipeline.ingest_content("alpha\n\nbeta", "note", "default", None)
    assert embedder.texts == 9


async def test_a_document_too_large_for_one_index_write_is_refused_before_embedding(
    pipeline: Pipeline, parts: tuple[FakeConverter, FakeEmbedder, FakeIndex]
) -> None:
    _, embedder, index = parts
    index.max_body_bytes = 100_000
    small = await pipeline.ingest_content("alpha\n\nbeta", "small", "default", None)
    assert small.status == "indexed"
    texts = embedder.texts
    big = "\n\n".join(f"paragraph {i} " + "word " * 50 for i in range(400))  # ~110 KB
    with pytest.raises(
        TooLargeError, match=r"400 chunks, a write of about \d+ KiB.*INDEX_MAX_BODY_BYTES, 98 KiB"
    ):
        await pipeline.ingest_content(big, "big", "default", None)
    assert embedder.texts == texts and len(index.docs) == 1  # nothing embedded or written
