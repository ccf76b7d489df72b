"""Which search indexes the index loads into Lance's cache at start and after each fold
(`ann.prewarm`): smallest first, as long as those loaded fit in `PREWARM_SHARE` of the cache."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from services.index.settings import IndexSettings
from services.index.store import ann

MB = 1024 * 1024


class Table:
    """The two calls of a LanceDB table that prewarming makes."""

    def __init__(self, **sizes_mb: float) -> None:
        kinds = {"content_idx": ("FTS", ["content"]), "vector_idx": ("IvfRq", ["vector"])}
        kinds |= {"cjk_terms_idx": ("FTS", ["cjk_terms"]), "doc_id_idx": ("BTree", ["doc_id"])}
        self.indices = [
            SimpleNamespace(
                name=name,
                index_type=kinds[name][0],
                columns=kinds[name][1],
                size_bytes=int(size * MB),
            )
            for name, size in sizes_mb.items()
        ]
        self.loaded: list[str] = []

    def list_indices(self) -> list[Any]:
        return self.indices

    def prewarm_index(self, name: str) -> None:
        self.loaded.append(name)


def settings(cache_mb: int) -> IndexSettings:
    return IndexSettings(_env_file=None, index_cache_mb=cache_mb)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("cache_mb", "loaded"),
    [
        # A million chunks with the default cache: both search indexes, smallest first.
        (512, ["cjk_terms_idx", "content_idx", "vector_idx"]),
        # Two million: the vector index would pass three quarters of the cache.
        (256, ["cjk_terms_idx", "content_idx"]),
        (64, ["cjk_terms_idx"]),
    ],
)
def test_the_smallest_search_indexes_that_fit_are_loaded(cache_mb: int, loaded: list[str]) -> None:
    table = Table(vector_idx=218, content_idx=87, cjk_terms_idx=0.001, doc_id_idx=5)
    ann.prewarm(settings(cache_mb), table)  # type: ignore[arg-type]
    assert table.loaded == loaded


def test_a_b_tree_is_never_prewarmed_and_a_failure_is_only_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = Table(doc_id_idx=1)
    ann.prewarm(settings(512), table)  # type: ignore[arg-type]
    assert table.loaded == []

    def broken(name: str) -> None:
        raise OSError("the object store is unreachable")

    failing = Table(content_idx=1)
    failing.prewarm_index = broken  # type: ignore[method-assign]
    ann.prewarm(settings(512), failing)  # type: ignore[arg-type]
    assert "could not prewarm the search indexes" in caplog.text
