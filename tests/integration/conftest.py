"""Fixtures several integration modules share: an index core on a fresh store (`core`; a
module that needs another kind of core, as the embedder's tests do, declares its own), the
five walrus documents of the search-feature tests on it (`library`), and a local OAuth
authorization server (`issuer`, one a module)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from services.index.core import IndexCore
from tests.index_helpers import settings_for
from tests.jwt_issuer import LocalIssuer
from tests.oauth_gateway import serving_issuer
from tests.search_helpers import add_walrus_library


@pytest.fixture
async def core(tmp_path: Path) -> AsyncIterator[IndexCore]:
    async with IndexCore(settings_for(tmp_path)) as opened:
        yield opened


@pytest.fixture
async def library(core: IndexCore) -> IndexCore:
    return await add_walrus_library(core)


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIssuer]:
    with serving_issuer() as local:
        yield local
