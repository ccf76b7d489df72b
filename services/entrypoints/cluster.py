"""`make up` / `make down` / `make status`: the four services as background processes on
127.0.0.1, logs and pid files under ./var, no Docker needed.

`up` starts what is not already running, waits until every `/readyz` answers 200 and prints
the MCP URLs; `down` stops them (SIGTERM, then SIGKILL after a grace period).
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

from libs.settings import CommonSettings

SERVICES = ("converter", "embedder", "index", "gateway")


def _port(settings: CommonSettings, name: str) -> int:
    return int(getattr(settings, f"{name}_port"))


def _url(settings: CommonSettings, name: str) -> str:
    host = settings.bind_host if settings.bind_host not in ("0.0.0.0", "::") else "127.0.0.1"
    return f"http://{host}:{_port(settings, name)}"


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


def up(settings: CommonSettings, wait_s: float) -> int:
    (settings.var_dir / "run").mkdir(parents=True, exist_ok=True)
    (settings.var_dir / "log").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["CONVERTER_URL"] = env.get("CONVERTER_URL", _url(settings, "converter"))
    env["EMBEDDER_URL"] = env.get("EMBEDDER_URL", _url(settings, "embedder"))
    env["INDEX_URL"] = env.get("INDEX_URL", _url(settings, "index"))
    for name in SERVICES:
        if _running_pid(settings, name):
            print(f"{name}: already running")
            continue
        log_path = settings.var_dir / "log" / f"{name}.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "services.entrypoints.serve", name],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        _pid_file(settings, name).write_text(str(process.pid))
        print(f"{name}: started (pid {process.pid}, port {_port(settings, name)}, log {log_path})")

    deadline = time.monotonic() + wait_s
    pending = list(SERVICES)
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
    for name in reversed(SERVICES):
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


def status(settings: CommonSettings) -> int:
    code = 0
    for name in SERVICES:
        pid = _running_pid(settings, name)
        ready, detail = _ready(settings, name)
        state = "ready" if ready else ("running, not ready" if pid else "stopped")
        print(f"{name:10s} {state:20s} pid={pid or '-':<8} {_url(settings, name)} ({detail})")
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

    def pid(self, service: str) -> int | None:
        try:
            return int((self.var_dir / "run" / f"{service}.pid").read_text().strip())
        except (OSError, ValueError):
            return None


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports: each socket is held until all are chosen (one at a time,
    a port just released can be handed out again, and two services would share it)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def local_env(var_dir: Path, **extra: str) -> dict[str, str]:
    """Environment for a private cluster: free loopback ports, its own var dir and store."""
    ports = dict(zip(SERVICES, _free_ports(len(SERVICES)), strict=True))
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
    settings = CommonSettings()
    if args.command == "up":
        return up(settings, args.wait)
    if args.command == "down":
        return down(settings)
    return status(settings)


if __name__ == "__main__":
    sys.exit(main())
