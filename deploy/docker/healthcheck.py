"""Container HEALTHCHECK: GET /healthz on this container's own port.

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


def main() -> int:
    service = os.environ.get("MVDB_SERVICE", "")
    if service not in DEFAULT_PORTS:
        print(f"MVDB_SERVICE must be one of {sorted(DEFAULT_PORTS)}, not {service!r}")
        return 1
    port = int(os.environ.get(f"{service.upper()}_PORT", DEFAULT_PORTS[service]))
    # No proxy: an HTTP_PROXY set for the container must not capture a loopback probe.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/healthz", timeout=3) as response:
            healthy = response.status == 200
    except (urllib.error.URLError, OSError) as exc:
        print(f"{service}: /healthz on port {port} failed: {exc}")
        return 1
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
