"""A slow embedder never throws an ingest away: the four real services, the embedder stopped
with SIGSTOP in the middle of an ingest (as a machine under heavy load stalls it) and resumed
with SIGCONT; the ingest finishes, its caller heard about the retries, and the gateway log has
them with the call's request id.

The cluster runs with short time limits so that the pause is longer than a batch may take:
each embed attempt gets HTTP_TIMEOUT_S + EMBED_TIMEOUT_PER_TEXT_S per text, and the attempts
that run out of time do not use up RETRY_MAX_S.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.types import LoggingMessageNotificationParams

from services.entrypoints.cluster import LocalCluster, running
from tests.e2e.conftest import cluster_env

pytestmark = pytest.mark.e2e

PAUSE_S = 8.0


@pytest.fixture(scope="module")
def slow_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = cluster_env(
        tmp_path_factory.mktemp("slow-var"),
        HTTP_TIMEOUT_S="3",
        EMBED_TIMEOUT_PER_TEXT_S="0.1",
        EMBED_BATCH_TEXTS="8",
        RETRY_ATTEMPTS="10",
        RETRY_MAX_S="4",  # about one timeout, as HTTP_TIMEOUT_S and RETRY_MAX_S were by default
    )
    with running(env) as started:
        yield started


def _paragraphs(count: int) -> str:
    return "\n\n".join(
        f"## Section {i}\n\nThe harbour log for day {i} records ships, weather and cargo "
        f"in detail, entry {i} of {count}, with notes on tides and the pilots on duty."
        for i in range(count)
    )


async def _ingest(cluster: LocalCluster, heard: list[LoggingMessageNotificationParams]) -> Any:
    async def listen(params: LoggingMessageNotificationParams) -> None:
        heard.append(params)

    async with (
        sse_client(cluster.gateway + "/sse", timeout=30, sse_read_timeout=300) as (read, write),
        ClientSession(read, write, logging_callback=listen) as session,
    ):
        await session.initialize()
        return await session.call_tool(
            "ingest_content",
            {"content": _paragraphs(500), "source": "harbour-log.md", "library": "slow"},
        )


def test_an_ingest_survives_an_embedder_paused_in_the_middle(slow_cluster: LocalCluster) -> None:
    pid = slow_cluster.pid("embedder")
    assert pid is not None
    heard: list[LoggingMessageNotificationParams] = []
    outcome: dict[str, Any] = {}

    def run() -> None:
        outcome["result"] = asyncio.run(_ingest(slow_cluster, heard))

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(1.0)  # the first batches are on their way
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(PAUSE_S)  # longer than any one batch may take: attempts time out
        assert worker.is_alive(), f"the ingest ended during the pause: {outcome}"
    finally:
        os.kill(pid, signal.SIGCONT)
    worker.join(240)
    assert not worker.is_alive(), "the ingest did not finish after the embedder resumed"

    result = outcome["result"]
    payload = result.structured_content
    assert not result.is_error, payload
    assert payload["status"] == "indexed" and payload["chunk_count"] >= 40, payload
    # The caller heard that the embedder was being retried (the default level is warning).
    assert any("embedder" in str(p.data) for p in heard), [p.data for p in heard]

    log = Path(slow_cluster.var_dir / "log" / "gateway.log").read_text(errors="replace")
    retries = [
        json.loads(line)
        for line in log.splitlines()
        if line.startswith("{") and '"retrying call"' in line and '"embedder"' in line
    ]
    assert retries, "no retry of the embedder in the gateway log"
    assert all(entry["request_id"] not in ("", "-") for entry in retries)
