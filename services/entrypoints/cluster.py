"""`make up` / `make down` / `make status`: the four services as background processes on
127.0.0.1, logs and pid files under ./var, no Docker needed.

`up` starts what is not already running (nothing, when another program holds a port one of
them needs), waits until every `/readyz` answers 200 and prints the MCP URLs; `down` stops
them (SIGTERM, then SIGKILL after a grace period).

With `INDEX_READERS=N` (default 0), `up` also starts N index readers (`INDEX_ROLE=reader`) on
ports `INDEX_PORT+1` ... `INDEX_PORT+N` over the same `LANCEDB_URI`, runs the index as their
writer (`INDEX_ROLE=writer`) and gives the gateway their URLs (`INDEX_READ_URLS`). `status`
and `down` find the readers by their pid files (`index-reader-1.pid`, ...), whatever N is now.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import Field

from libs.settings import CommonSettings

SERVICES = ("converter", "embedder", "index", "gateway")
READER = "index-reader-"


class ClusterSettings(CommonSettings):
    index_readers: int = Field(default=0, ge=0, le=32)


def _port(settings: CommonSettings, name: str) -> int:
    if name.startswith(READER):
        return settings.index_port + int(name.removeprefix(READER))
    return int(getattr(settings, f"{name}_port"))


def _url(settings: CommonSettings, name: str) -> str:
    host = settings.bind_host if settings.bind_host not in ("0.0.0.0", "::") else "127.0.0.1"
    return f"http://{host}:{_port(settings, name)}"


def _readers(settings: ClusterSettings) -> list[str]:
    return [f"{READER}{i}" for i in range(1, settings.index_readers + 1)]


def _started_readers(settings: CommonSettings) -> list[str]:
    """The readers that have a pid file, started by an `up` with any INDEX_READERS."""
    found = (settings.var_dir / "run").glob(f"{READER}*.pid")
    names = [path.stem for path in found if path.stem.removeprefix(READER).isdigit()]
    return sorted(names, key=lambda name: int(name.removeprefix(READER)))


def _service_env(settings: ClusterSettings, name: str, env: dict[str, str]) -> dict[str, str]:
    """A process's environment: a reader listens on its own port in the reader role, the
    index writes for the readers, the gateway reads from them."""
    readers = _readers(settings)
    if not readers:
        return env
    if name.startswith(READER):
        return {**env, "INDEX_ROLE": "reader", "INDEX_PORT": str(_port(settings, name))}
    if name == "index":
        return {**env, "INDEX_ROLE": "writer"}
    if name == "gateway":
        return {**env, "INDEX_READ_URLS": ",".join(_url(settings, r) for r in readers)}
    return env


def _pid_file(settings: CommonSettings, name: str) -> Path:
    return settings.var_dir / "run" / f"{name}.pid"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A crashed service that nobody reaped (no init in a container) still answers kill(0);
    it must count as stopped, or `up` would not restart it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def _running_pid(settings: CommonSettings, name: str) -> int | None:
    path = _pid_file(settings, name)
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def _ready(settings: CommonSettings, name: str) -> tuple[bool, str]:
    try:
        response = httpx.get(_url(settings, name) + "/readyz", timeout=2.0, trust_env=False)
    except httpx.HTTPError as exc:
        return False, type(exc).__name__
    return response.status_code == 200, f"HTTP {response.status_code}"


def _port_taken(host: str, port: int) -> str | None:
    """Why `port` cannot be listened on at `host` (another program holds it), else None.
    Bound as uvicorn binds (SO_REUSEADDR), so a port a stopped service left in TIME_WAIT is
    free."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _ports_taken(settings: ClusterSettings, names: list[str]) -> list[str]:
    """One line for each service of `names` to start whose port another program holds."""
    taken = []
    for name in names:
        port = _port(settings, name)
        why = _port_taken(settings.bind_host, port)
        if why is not None:
            variable = "INDEX_PORT" if name.startswith(READER) else f"{name.upper()}_PORT"
            taken.append(
                f"{name}: port {port} on {settings.bind_host} is held by another program "
                f"({why}); {variable} sets it"
            )
    return taken


def up(settings: ClusterSettings, wait_s: float) -> int:
    (settings.var_dir / "run").mkdir(parents=True, exist_ok=True)
    (settings.var_dir / "log").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["CONVERTER_URL"] = env.get("CONVERTER_URL", _url(settings, "converter"))
    env["EMBEDDER_URL"] = env.get("EMBEDDER_URL", _url(settings, "embedder"))
    env["INDEX_URL"] = env.get("INDEX_URL", _url(settings, "index"))
    # The readers start before the gateway, which reads from them as soon as it is ready.
    names = [*SERVICES[:3], *_readers(settings), SERVICES[3]]
    taken = _ports_taken(settings, [name for name in names if not _running_pid(settings, name)])
    if taken:
        # Before anything starts: a service that cannot listen would exit after loading, and
        # leave the others running.
        print("\n".join(taken), file=sys.stderr)
        print(
            "Another program listens there (another `make up` from another folder, or an "
            "older copy): stop it, or give these services free ports, e.g. "
            "`GATEWAY_PORT=8100 CONVERTER_PORT=8101 EMBEDDER_PORT=8102 INDEX_PORT=8103 make up`.",
            file=sys.stderr,
        )
        return 1
    for name in names:
        if _running_pid(settings, name):
            print(f"{name}: already running")
            if name in ("index", "gateway") and _readers(settings):
                print(
                    f"  ({name} keeps the settings it was started with: if that was without "
                    "INDEX_READERS, run `make down` first for it to use the readers)"
                )
            continue
        log_path = settings.var_dir / "log" / f"{name}.log"
        with log_path.open("ab") as log:
            service = "index" if name.startswith(READER) else name
            process = subprocess.Popen(
                [sys.executable, "-m", "services.entrypoints.serve", service],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=_service_env(settings, name, env),
                start_new_session=True,
            )
        _pid_file(settings, name).write_text(str(process.pid))
        print(f"{name}: started (pid {process.pid}, port {_port(settings, name)}, log {log_path})")

    deadline = time.monotonic() + wait_s
    pending = list(names)
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            if _running_pid(settings, name) is None:
                log_path = settings.var_dir / "log" / f"{name}.log"
                print(f"{name}: exited during start-up; last log lines:", file=sys.stderr)
                lines = log_path.read_text(errors="replace").splitlines()[-15:]
                print("\n".join(lines), file=sys.stderr)
                return 1
            if _ready(settings, name)[0]:
                pending.remove(name)
                print(f"{name}: ready")
        time.sleep(0.3)
    if pending:
        print(
            f"not ready after {wait_s:.0f}s: {', '.join(pending)} (see var/log/)", file=sys.stderr
        )
        return 1
    gateway = _url(settings, "gateway")
    print()
    print(f"MCP SSE endpoint:             {gateway}/sse")
    print(f"MCP streamable HTTP endpoint: {gateway}/mcp")
    print(f"Upload:                       curl -F file=@report.pdf {gateway}/upload")
    return 0


def down(settings: CommonSettings, grace_s: float = 10.0) -> int:
    for name in ["gateway", *reversed(_started_readers(settings)), *reversed(SERVICES[:3])]:
        pid = _running_pid(settings, name)
        if pid is None:
            _pid_file(settings, name).unlink(missing_ok=True)
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while _alive(pid) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.1)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        _pid_file(settings, name).unlink(missing_ok=True)
        print(f"{name}: stopped")
    return 0


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def status(settings: ClusterSettings) -> int:
    code = 0
    readers = sorted(
        {*_readers(settings), *_started_readers(settings)},
        key=lambda name: int(name.removeprefix(READER)),
    )
    for name in [*SERVICES[:3], *readers, SERVICES[3]]:
        pid = _running_pid(settings, name)
        ready, detail = _ready(settings, name)
        state = "ready" if ready else ("running, not ready" if pid else "stopped")
        print(f"{name:16s} {state:20s} pid={pid or '-':<8} {_url(settings, name)} ({detail})")
        code = code or (0 if ready else 1)
    return code


# ----------------------------------------------------------- for tests and benchmarks


@dataclass(frozen=True)
class LocalCluster:
    """A cluster started by `running`: its URLs, environment and var directory."""

    gateway: str
    converter: str
    embedder: str
    index: str
    env: dict[str, str]
    var_dir: Path
    readers: tuple[str, ...] = ()

    def pid(self, service: str) -> int | None:
        try:
            return int((self.var_dir / "run" / f"{service}.pid").read_text().strip())
        except (OSError, ValueError):
            return None


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports: each socket is held until all are chosen (one at a time,
    a port just released can be handed out again, and two services would share it)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def free_port() -> int:
    """A free loopback port (for one server a test or benchmark starts)."""
    return free_ports(1)[0]


def _free_run(count: int, tries: int = 50) -> int:
    """The first of `count` consecutive free loopback ports (an index and its readers)."""
    for _ in range(tries):
        with contextlib.ExitStack() as held:
            first = held.enter_context(socket.socket())
            first.bind(("127.0.0.1", 0))
            base = int(first.getsockname()[1])
            if base + count > 65535:
                continue
            try:
                for port in range(base + 1, base + count):
                    held.enter_context(socket.socket()).bind(("127.0.0.1", port))
            except OSError:
                continue
            return base
    raise RuntimeError(f"found no {count} consecutive free loopback ports")


def local_env(var_dir: Path, *, readers: int = 0, **extra: str) -> dict[str, str]:
    """Environment for a private cluster: free loopback ports, its own var dir and store;
    `readers` index readers on the ports after the index's."""
    others = [name for name in SERVICES if name != "index"]
    while True:
        index = _free_run(1 + readers)
        ports = dict(zip(others, free_ports(len(others)), strict=True))
        if not any(index <= port <= index + readers for port in ports.values()):
            break
    ports["index"] = index
    env = dict(os.environ)
    env.update(
        {
            "VAR_DIR": str(var_dir),
            "LANCEDB_URI": str(var_dir / "lancedb"),
            "BIND_HOST": "127.0.0.1",
            "HF_HUB_OFFLINE": "1",
            **{f"{name.upper()}_PORT": str(port) for name, port in ports.items()},
            **{
                f"{name.upper()}_URL": f"http://127.0.0.1:{port}"
                for name, port in ports.items()
                if name != "gateway"
            },
            "INDEX_READERS": str(readers),
        }
    )
    env.update(extra)
    return env


@contextlib.contextmanager
def running(env: dict[str, str], wait_s: float = 240) -> Iterator[LocalCluster]:
    """Start the four services with `env` (see `local_env`), yield, then stop them."""
    var_dir = Path(env["VAR_DIR"])
    repo = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "services.entrypoints.cluster"]
    try:
        started = subprocess.run(
            [*command, "up", "--wait", str(wait_s)],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=wait_s + 60,
        )
        if started.returncode != 0:
            logs = "\n".join(
                f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                for p in sorted((var_dir / "log").glob("*.log"))
            )
            raise RuntimeError(
                f"cluster did not start:\n{started.stdout}\n{started.stderr}\n{logs}"
            )
        yield LocalCluster(
            gateway=f"http://127.0.0.1:{env['GATEWAY_PORT']}",
            converter=env["CONVERTER_URL"],
            embedder=env["EMBEDDER_URL"],
            index=env["INDEX_URL"],
            env=env,
            var_dir=var_dir,
            readers=tuple(
                f"http://127.0.0.1:{int(env['INDEX_PORT']) + i}"
                for i in range(1, int(env.get("INDEX_READERS", "0")) + 1)
            ),
        )
    finally:
        subprocess.run(
            [*command, "down"], cwd=repo, env=env, capture_output=True, timeout=120, check=False
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.entrypoints.cluster")
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument("--wait", type=float, default=180.0, help="seconds to wait for ready")
    args = parser.parse_args(argv)
    settings = ClusterSettings()
    if args.command == "up":
        return up(settings, args.wait)
    if args.command == "down":
        return down(settings)
    return status(settings)


if __name__ == "__main__":
    sys.exit(main())
