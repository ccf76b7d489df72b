"""Container HEALTHCHECK: GET /readyz on this container's own port.

Readiness, not liveness: a container is healthy only when its service can do its job (the
converter has a worker with its tokenizer, the embedder its model, the index its store, the
gateway all three), so `docker compose ps` shows a container that cannot work as unhealthy
and `depends_on: condition: service_healthy` waits for it. `mvdb-healthcheck /healthz` asks
the liveness route instead. (Kubernetes probes the routes itself: liveness /healthz,
readiness /readyz.)

The slim Python image has no curl or wget, so the check uses the standard library. Which
service this is comes from MVDB_SERVICE (set per Dockerfile target); its port from the same
`<SERVICE>_PORT` variable the service itself reads, so a changed port is checked correctly.
Exit 0 = healthy, 1 = not (Docker's contract).
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

DEFAULT_PORTS = {"gateway": 8000, "converter": 8001, "embedder": 8002, "index": 8003}
PATHS = ("/readyz", "/healthz")
# Below the 12 s that the HEALTHCHECK gives the whole command: the gateway's /readyz asks its
# three dependencies in turn (3 s each at most).
TIMEOUT_S = 10


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else "/readyz"
    if path not in PATHS:
        print(f"usage: mvdb-healthcheck [{'|'.join(PATHS)}]")
        return 1
    service = os.environ.get("MVDB_SERVICE", "")
    if service not in DEFAULT_PORTS:
        print(f"MVDB_SERVICE must be one of {sorted(DEFAULT_PORTS)}, not {service!r}")
        return 1
    port = int(os.environ.get(f"{service.upper()}_PORT", DEFAULT_PORTS[service]))
    # No proxy: an HTTP_PROXY set for the container must not capture a loopback probe.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}{path}", timeout=TIMEOUT_S) as response:
            healthy = response.status == 200
    except urllib.error.HTTPError as exc:
        # The body says what is not ready (e.g. {"checks": {"workers": "..."}}): docker
        # inspect shows it in the health log.
        print(f"{service}: {path} on port {port} answered {exc.code}: {exc.read(500)!r}")
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"{service}: {path} on port {port} failed: {exc}")
        return 1
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
