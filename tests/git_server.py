"""A real git server on loopback for the tests: `git http-backend` (smart HTTP) behind a
small threaded CGI bridge, serving the bare repositories below one folder, plus helpers that
make commits with the git command line."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"git {args}: {done.stderr}"
    return done.stdout.strip()


class WorkingCopy:
    """A working copy whose `push` publishes to a bare repository the server serves."""

    def __init__(self, path: Path, bare: Path) -> None:
        self.path, self.bare = path, bare
        path.mkdir(parents=True)
        git(path, "init", "--quiet", "--initial-branch=main")
        git(bare.parent, "init", "--quiet", "--bare", "--initial-branch=main", bare.name)
        git(path, "remote", "add", "origin", str(bare))

    def write(self, files: dict[str, str | bytes]) -> None:
        for name, content in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content, encoding="utf-8")

    def remove(self, *names: str) -> None:
        for name in names:
            (self.path / name).unlink()

    def commit(self, message: str, *, tag: str | None = None) -> str:
        git(self.path, "add", "--all")
        git(self.path, "commit", "--quiet", "-m", message)
        if tag:
            git(self.path, "tag", tag)
        git(self.path, "push", "--quiet", "--tags", "origin", "main")
        return git(self.path, "rev-parse", "HEAD")


def _handler(root: Path) -> type[BaseHTTPRequestHandler]:
    backend = shutil.which("git") or "git"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._cgi()

        def do_POST(self) -> None:
            self._cgi()

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _cgi(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": parts.path,
                "QUERY_STRING": parts.query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(length),
                "REMOTE_ADDR": self.client_address[0],
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
            }
            done = subprocess.run(
                [backend, "http-backend"], input=body, env=env, capture_output=True, check=False
            )
            head, _, payload = done.stdout.partition(b"\r\n\r\n")
            status = 200
            headers = []
            for line in head.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.strip().split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@contextmanager
def git_http_server(root: Path) -> Iterator[int]:
    """Serve the bare repositories below `root` at http://127.0.0.1:<port>/<name>."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(root))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
