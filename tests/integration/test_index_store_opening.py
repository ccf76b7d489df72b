"""An index whose object store does not answer yet (its server starting, its name not
resolving, a network on its way up: what a pod meets beside the store's own): LanceDB then
retries for minutes, so `/readyz` must not wait with it. It answers within
`core.READY_WAIT_S`, under the Kubernetes probes' timeouts, saying the store is still opening,
and once the server answers the same process opens the store and is ready.

The store's endpoint is first a socket that takes connections and never answers, then, on the
same port, a real S3-compatible server (ministack on 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import httpx
import pytest

from services.index.core import READY_WAIT_S, IndexCore
from services.index.settings import IndexSettings
from tests.object_store import ACCESS_KEY_ID, SECRET_ACCESS_KEY, S3Server, s3_server

pytestmark = pytest.mark.integration


async def test_readiness_answers_while_the_store_does_not_and_the_store_opens_later(
    tmp_path: Path,
) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # connections complete in the kernel; nothing ever answers them
    port = silent.getsockname()[1]
    options = S3Server(f"http://127.0.0.1:{port}").options()
    settings = IndexSettings(
        lancedb_uri="s3://opening/store", lancedb_storage_options=json.dumps(options)
    )
    core = IndexCore(settings)
    try:
        for _ in range(2):  # the second call finds the first open still going
            started = time.monotonic()
            ready, detail = await core.ready()
            took = time.monotonic() - started
            assert not ready and "still opening" in detail, detail
            assert "opening/store" in detail
            assert SECRET_ACCESS_KEY not in detail and ACCESS_KEY_ID not in detail
            assert took < READY_WAIT_S + 1.5, f"/readyz waited {took:.1f} s"

        silent.close()
        with s3_server(tmp_path, port=port) as server:
            httpx.put(f"{server.endpoint}/opening", timeout=10).raise_for_status()
            deadline = time.monotonic() + 120
            while not (answer := await core.ready())[0]:
                assert time.monotonic() < deadline, f"the store never opened: {answer[1]}"
                await asyncio.sleep(0.5)
            assert "role all" in answer[1], answer
            info = await core.info()
            assert info.uri == "s3://opening/store"
    finally:
        silent.close()
        await core.aclose()
