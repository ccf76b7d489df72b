"""A folder ingest (`POST /ingest_folder`) running in a thread of its own, so that a test can
kill and restart a service while it runs, then read what the ingest's caller was answered.
The crash tests of the local cluster and of the containers share it."""

from __future__ import annotations

import threading
from typing import Any

import httpx


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
