"""Wait until every container of a compose project is healthy, that is ready: the images'
health checks ask /readyz. `make compose-up` runs it after `up -d`, like `make up` waits for
the services it starts; the container tests start their cluster the same way.

    python deploy/docker/wait_ready.py [--timeout SECONDS] -- docker-compose -p NAME ...

Everything after `--` is the compose command of the project (compose v1 or `docker compose`);
its `ps -q` names the containers. A container without a health check (Prometheus) counts
once it runs. Exit 0 when all are ready (the MCP endpoints are printed); 1 when one exited,
or when the time is up (the last health check output of each container that is not ready
says why). Standard library only: it runs before any environment exists.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

DOCKER = os.environ.get("DOCKER", "docker")


def _run(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)


def _containers(compose: list[str]) -> list[str]:
    result = _run([*compose, "ps", "-q"])
    if result.returncode != 0:
        raise SystemExit(f"wait_ready: `{' '.join(compose)} ps -q` failed:\n{result.stderr}")
    return result.stdout.split()


def _inspect(ids: list[str]) -> list[dict[str, Any]]:
    result = _run([DOCKER, "inspect", *ids])
    if result.returncode != 0:
        return []  # a container replaced between `ps` and `inspect`: look again
    inspected: list[dict[str, Any]] = json.loads(result.stdout)
    return inspected


def _name(container: dict[str, Any]) -> str:
    labels = container["Config"].get("Labels") or {}
    return str(labels.get("com.docker.compose.service") or container["Name"].lstrip("/"))


def _state(container: dict[str, Any]) -> str:
    """ready, starting, unhealthy or exited."""
    state = container["State"]
    if state["Status"] in ("exited", "dead"):
        return "exited"
    health = state.get("Health")
    if health is None:
        return "ready" if state["Status"] == "running" else "starting"
    return {"healthy": "ready"}.get(health["Status"], health["Status"])


def _last_check(container: dict[str, Any]) -> str:
    log = (container["State"].get("Health") or {}).get("Log") or []
    return str(log[-1]["Output"]).strip()[:500] if log else "no health check has run yet"


def _gateway_url(compose: list[str]) -> str | None:
    result = _run([*compose, "port", "gateway", "8000"])
    address = result.stdout.strip()
    return f"http://{address}" if result.returncode == 0 and address else None


def wait(compose: list[str], timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    reported: dict[str, str] = {}
    containers: list[dict[str, Any]] = []
    while True:
        ids = _containers(compose)
        if not ids:
            print("wait_ready: the project has no containers; run `up -d` first", file=sys.stderr)
            return 1
        containers = _inspect(ids)
        states = {_name(c): _state(c) for c in containers}
        for name, state in sorted(states.items()):
            if reported.get(name) != state:
                print(f"{name}: {state}", flush=True)
                reported[name] = state
        for container in containers:
            if _state(container) == "exited":
                logs = _run([DOCKER, "logs", "--tail", "20", container["Id"]])
                print(
                    f"wait_ready: {_name(container)} exited with status "
                    f"{container['State']['ExitCode']}; last log lines:\n"
                    f"{logs.stdout}{logs.stderr}",
                    file=sys.stderr,
                )
                return 1
        if containers and all(state == "ready" for state in states.values()):
            break
        if time.monotonic() > deadline:
            for container in containers:
                if _state(container) != "ready":
                    print(
                        f"wait_ready: {_name(container)} not ready after {timeout_s:.0f}s: "
                        f"{_last_check(container)}",
                        file=sys.stderr,
                    )
            return 1
        time.sleep(1)
    if url := _gateway_url(compose):
        print()
        print(f"MCP SSE endpoint:             {url}/sse")
        print(f"MCP streamable HTTP endpoint: {url}/mcp")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--" not in args:
        print(__doc__, file=sys.stderr)
        return 2
    split = args.index("--")
    parser = argparse.ArgumentParser(prog="python deploy/docker/wait_ready.py")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds (default 300)")
    options = parser.parse_args(args[:split])
    compose = args[split + 1 :]
    if not compose:
        print("wait_ready: no compose command after `--`", file=sys.stderr)
        return 2
    return wait(compose, options.timeout)


if __name__ == "__main__":
    sys.exit(main())
