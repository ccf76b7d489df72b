"""The one compose project every test of the container tier drives (`stack.open_stack`),
built and started before the first of them and taken down after the last."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.deploy.containers.stack import Stack, open_stack


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from open_stack(tmp_path_factory)
