"""`make up` with a port another program holds: it says which service, which port and which
variable moves it, and starts nothing (a service that cannot listen would exit only after
loading its model, and leave the others running)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from services.entrypoints import cluster
from services.entrypoints.cluster import ClusterSettings, free_ports


def _settings(var_dir: Path, ports: list[int], readers: int = 0) -> ClusterSettings:
    converter, embedder, index, gateway = ports
    return ClusterSettings(
        var_dir=var_dir,
        converter_port=converter,
        embedder_port=embedder,
        index_port=index,
        gateway_port=gateway,
        index_readers=readers,
    )


@pytest.mark.parametrize("held", [1, 3])
def test_a_port_held_by_another_program_stops_up_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], held: int
) -> None:
    ports = free_ports(4)
    with socket.socket() as other:
        other.bind(("127.0.0.1", ports[held]))
        other.listen()
        assert cluster.up(_settings(tmp_path, ports), wait_s=5) == 1
    err = capsys.readouterr().err
    name = cluster.SERVICES[held]
    assert f"{name}: port {ports[held]} on 127.0.0.1 is held by another program" in err
    assert f"{name.upper()}_PORT sets it" in err
    assert not list((tmp_path / "run").glob("*.pid"))  # nothing was started


def test_a_readers_port_is_checked_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = cluster._free_run(3)
    ports = [*free_ports(2), base, free_ports(1)[0]]
    with socket.socket() as other:
        other.bind(("127.0.0.1", base + 2))  # the second reader's
        other.listen()
        assert cluster.up(_settings(tmp_path, ports, readers=2), wait_s=5) == 1
    err = capsys.readouterr().err
    assert f"index-reader-2: port {base + 2} on 127.0.0.1 is held" in err
    assert "INDEX_PORT sets it" in err
    assert not list((tmp_path / "run").glob("*.pid"))


def test_a_port_just_released_is_free(tmp_path: Path) -> None:
    """A port a stopped service left in TIME_WAIT binds, as uvicorn binds (SO_REUSEADDR)."""
    port = free_ports(1)[0]
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            accepted.close()  # the server side closes first: its end waits in TIME_WAIT
            client.recv(1)
    assert cluster._port_taken("127.0.0.1", port) is None
