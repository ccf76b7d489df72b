"""What the crash tests of the local cluster, of the cluster on S3 and of the containers share:
a folder ingest (`POST /ingest_folder`) running in a thread of its own while a service is
killed and restarted (`IngestInBackground`), and the look at the whole store afterwards,
through MCP (`store_is_consistent`)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import httpx

from tests.mcp_client import sse_tools


class IngestInBackground:
    """Starts at once. `outcome` then holds `response` (the gateway's answer) or `error` (the
    transport error the caller saw)."""

    def __init__(self, gateway: str, request: dict[str, Any], timeout_s: float = 600) -> None:
        self.request = request
        self.outcome: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._post, args=(gateway, timeout_s), daemon=True)
        self._thread.start()

    def _post(self, gateway: str, timeout_s: float) -> None:
        try:
            self.outcome["response"] = httpx.post(
                gateway + "/ingest_folder", json=self.request, timeout=timeout_s
            )
        except httpx.HTTPError as exc:
            self.outcome["error"] = exc

    def running(self) -> bool:
        return self._thread.is_alive()

    def finish(self, timeout_s: float = 600) -> None:
        """Wait for the answer; fail if none came within `timeout_s`."""
        self._thread.join(timeout=timeout_s)
        assert not self._thread.is_alive(), "the ingest did not finish after the restart"


async def store_is_consistent(
    gateway: str,
    index_info: Callable[[], dict[str, Any]],
    library: str,
    sample: int,
    acknowledged_by_library: dict[str, set[str]],
) -> None:
    """Every library's listing agrees with its counts and holds one version of each source;
    no document a caller was told is stored is gone; the index's totals (`index_info`, its
    /info) agree with the libraries' (no chunk rows without a document, or the reverse); and
    `sample` documents of `library`, looked at closely, are whole and found chunk by chunk."""
    async with sse_tools(gateway + "/sse") as tools:
        libraries = {
            lib["library"]: lib for lib in (await tools.call("list_libraries"))["libraries"]
        }
        stored: dict[str, set[str]] = {}
        for name, lib in libraries.items():
            listed = await tools.call("list_documents", library=name, limit=1000)
            docs = listed["documents"]
            assert listed["total"] == listed["count"] == len(docs) == lib["document_count"], name
            assert lib["chunk_count"] == sum(d["chunk_count"] for d in docs), name
            assert len({d["source"] for d in docs}) == len(docs), f"two versions live in {name}"
            stored[name] = {d["doc_id"] for d in docs}
        for name, acknowledged in acknowledged_by_library.items():
            lost = acknowledged - stored.get(name, set())
            assert not lost, f"acknowledged documents of {name} are gone: {lost}"

        info = index_info()
        total_chunks = sum(lib["chunk_count"] for lib in libraries.values())
        assert info["chunks"] == total_chunks, "chunk rows without a document, or the reverse"
        assert info["documents"] == sum(lib["document_count"] for lib in libraries.values())

        docs = (await tools.call("list_documents", library=library, limit=1000))["documents"]
        for doc in random.Random(library).sample(docs, min(sample, len(docs))):
            full = await tools.call("get_document", doc_id=doc["doc_id"])
            assert full["chunk_count"] == doc["chunk_count"] and full["content"].strip()
            found = await tools.call(
                "search", query=full["content"][:300], top_k=100, filter={"doc_id": doc["doc_id"]}
            )
            hits = found["results"]
            assert len(hits) == doc["chunk_count"], (doc["source"], len(hits))
            assert {h["doc_id"] for h in hits} == {doc["doc_id"]}
            assert len({h["chunk_index"] for h in hits}) == doc["chunk_count"]
