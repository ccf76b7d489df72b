"""The `s3` image's entry point: an S3-compatible server (ministack) with its buckets made.

    mvdb-s3server          run ministack (S3 only) and create the buckets in S3_BUCKETS
    mvdb-s3server check    HEALTHCHECK: exit 0 once S3 answers and every bucket exists

LanceDB does not create buckets, and ministack starts with none: the server makes each bucket
of S3_BUCKETS (comma-separated, default `mcpvectordb`) with a plain `PUT /<bucket>` as soon as
it answers, so the index can open `s3://<bucket>/...` on its first try. Objects are kept on the
volume at S3_DATA_DIR (S3_PERSIST=1 in the image), so a restart loses nothing. ministack's own
settings pass through (GATEWAY_PORT, default 4566; BIND_HOST; LOG_LEVEL). Standard library
only: it runs with the image's Python, beside ministack.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from types import FrameType

START_TIMEOUT_S = 60.0


def _base() -> str:
    return f"http://127.0.0.1:{os.environ.get('GATEWAY_PORT', '4566')}"


def _buckets() -> list[str]:
    raw = os.environ.get("S3_BUCKETS", "mcpvectordb")
    return [name.strip() for name in raw.split(",") if name.strip()]


def _request(method: str, path: str) -> int:
    """The HTTP status of one request to the local server (0 when it does not answer)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(_base() + path, method=method)
    try:
        with opener.open(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def check() -> int:
    if _request("GET", "/_ministack/health") != 200:
        print("the S3 server does not answer")
        return 1
    missing = [name for name in _buckets() if _request("HEAD", f"/{name}") != 200]
    if missing:
        print(f"buckets not made yet: {', '.join(missing)}")
        return 1
    return 0


def serve() -> int:
    env = {"SERVICES": "s3", "IOT_MTLS_ENABLED": "0", "SFTP_ENABLED": "0", **os.environ}
    server = subprocess.Popen([sys.executable, "-m", "ministack"], env=env)

    def forward(signum: int, frame: FrameType | None) -> None:
        server.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    deadline = time.monotonic() + START_TIMEOUT_S
    while _request("GET", "/_ministack/health") != 200:
        if server.poll() is not None:
            return server.returncode
        if time.monotonic() > deadline:
            print(f"ministack did not answer within {START_TIMEOUT_S:.0f} s", file=sys.stderr)
            server.terminate()
            return 1
        time.sleep(0.2)
    for name in _buckets():
        # 200: made; 409: it exists already (kept on the volume from an earlier run).
        status = _request("PUT", f"/{name}")
        if status not in (200, 409):
            print(f"could not create the bucket {name!r}: HTTP {status}", file=sys.stderr)
            server.terminate()
            return 1
        print(f"bucket {name!r} ready (HTTP {status})", flush=True)
    return server.wait()


def main(argv: list[str]) -> int:
    if argv[1:] == ["check"]:
        return check()
    if argv[1:]:
        print("usage: mvdb-s3server [check]", file=sys.stderr)
        return 2
    return serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
