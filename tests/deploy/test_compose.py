"""docker-compose.yml and .env.example: valid for docker-compose 1.29.2, the exposure and
dependency rules the deployment relies on, and one consistent list of variables.

`docker-compose config` is the real parser and schema check (no Docker engine needed); the
rest reads its rendered output, so what is asserted is what compose would run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from libs.settings import CommonSettings
from services.converter.settings import ConverterSettings
from services.embedder.settings import EmbedderSettings
from services.gateway.settings import GatewaySettings
from services.index.settings import IndexSettings
from tests.conftest import REPO, shown_defaults
from tests.deploy.conftest import compose_config, compose_project, image_env, run

COMPOSE_FILE = REPO / "docker-compose.yml"
ENV_EXAMPLE = REPO / ".env.example"
SERVICES = ("converter", "embedder", "index", "gateway")
SETTINGS = (CommonSettings, ConverterSettings, EmbedderSettings, IndexSettings, GatewaySettings)


@pytest.fixture(scope="module")
def rendered(docker_compose: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return compose_config(docker_compose, compose_project(tmp_path_factory.mktemp("compose")))


def _env_example() -> dict[str, tuple[str, bool]]:
    """NAME -> (value, active) for `NAME=value` and `# NAME=value` lines of .env.example; an
    active line wins over examples in comments."""
    entries: dict[str, tuple[str, bool]] = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        match = re.match(r"^(#\s*)?([A-Z][A-Z0-9_]*)=(\S*)", line)
        if match and not entries.get(match[2], ("", False))[1]:
            entries[match[2]] = (match[3], match[1] is None)
    return entries


def test_config_is_valid_with_and_without_the_monitoring_profile(
    docker_compose: str, tmp_path: Path
) -> None:
    project = compose_project(tmp_path)
    plain = compose_config(docker_compose, project)
    monitoring = compose_config(docker_compose, project, "--profile", "monitoring")
    assert set(SERVICES) <= set(plain["services"])
    assert "prometheus" in monitoring["services"]
    # Prometheus is opt-in: only the monitoring profile starts it.
    assert monitoring["services"]["prometheus"]["profiles"] == ["monitoring"]
    for name in SERVICES:
        assert "profiles" not in plain["services"][name]


def test_env_example_is_valid_and_changes_nothing(
    docker_compose: str, rendered: dict[str, Any], tmp_path: Path
) -> None:
    """Copying .env.example to .env must give exactly the defaults: the file documents them."""
    with_env = compose_config(docker_compose, compose_project(tmp_path, ENV_EXAMPLE.read_text()))
    for name in SERVICES:
        assert (
            with_env["services"][name]["environment"] == (rendered["services"][name]["environment"])
        ), name
        assert with_env["services"][name].get("ports") == rendered["services"][name].get("ports")


def test_env_example_documents_every_setting() -> None:
    documented = _env_example()
    fields = {name.upper() for cls in SETTINGS for name in cls.model_fields}
    missing = sorted(fields - set(documented))
    assert not missing, f".env.example lacks {missing}: document each with its default"


def test_env_example_gives_the_code_defaults() -> None:
    """With test_compose_defaults_match_env_example below, compose's defaults are the code's
    too: .env.example once said INDEX_CACHE_MB=256, as compose did, while the code said 512."""
    documented = _env_example()
    # Where the containers differ from a local run on purpose: the named volume's path.
    container_values = {"LANCEDB_URI": "/data/lancedb"}
    wrong = []
    for name, default in shown_defaults(SETTINGS).items():
        value, active = documented.get(name, ("", False))
        expected = container_values.get(name, default)
        if active and value != expected:
            wrong.append(f".env.example {name}={value} (code: {expected})")
    assert wrong == []


def test_compose_defaults_match_env_example() -> None:
    documented = _env_example()
    lines = COMPOSE_FILE.read_text().splitlines()
    text = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    # `$${...}` is compose's escape for a literal `$` (a shell variable), not a substitution.
    substitutions = re.findall(r"(?<!\$)\$\{([A-Z][A-Z0-9_]*)(?::-([^}]*))?\}", text)
    assert substitutions
    for name, default in substitutions:
        assert name in documented, f"${{{name}}} in docker-compose.yml is not in .env.example"
        value, active = documented[name]
        assert active, f"{name} is passed by docker-compose.yml but commented in .env.example"
        assert value == default, f"{name}: compose default {default!r}, .env.example {value!r}"


def test_only_the_gateway_and_prometheus_are_published_and_only_on_loopback(
    docker_compose: str, tmp_path: Path
) -> None:
    monitoring = compose_config(
        docker_compose, compose_project(tmp_path), "--profile", "monitoring"
    )
    services = monitoring["services"]
    published = {name: s["ports"] for name, s in services.items() if "ports" in s}
    assert set(published) == {"gateway", "prometheus"}
    for ports in published.values():
        for port in ports:
            spec = port if isinstance(port, str) else port.get("host_ip", "")
            assert str(spec).startswith("127.0.0.1"), f"published beyond loopback: {port}"


def test_networks_give_no_egress_to_the_internal_services(rendered: dict[str, Any]) -> None:
    assert rendered["networks"]["backend"]["internal"] is True
    for name in ("converter", "embedder", "index"):
        assert set(rendered["services"][name]["networks"]) == {"backend"}, name
    assert set(rendered["services"]["gateway"]["networks"]) == {"backend", "edge"}


def test_services_find_each_other_by_name(rendered: dict[str, Any]) -> None:
    for name in SERVICES:
        env = rendered["services"][name]["environment"]
        assert env["CONVERTER_URL"] == "http://converter:8001"
        assert env["EMBEDDER_URL"] == "http://embedder:8002"
        assert env["INDEX_URL"] == "http://index:8003"


def test_gateway_exposure_is_explicit(rendered: dict[str, Any]) -> None:
    """The container binds 0.0.0.0 (Dockerfile); compose lifts the gateway's refusal only
    because it publishes on loopback, and passes AUTH_TOKEN through for when it is set."""
    env = rendered["services"]["gateway"]["environment"]
    assert env["ALLOW_UNAUTHENTICATED_REMOTE"] == "true"
    assert "AUTH_TOKEN" in env
    assert "ALLOWED_HOSTS" in env


def test_index_keeps_lancedb_on_a_named_volume(rendered: dict[str, Any]) -> None:
    index = rendered["services"]["index"]
    assert index["environment"]["LANCEDB_URI"] == "/data/lancedb"
    assert any(str(v).startswith("lancedb:/data") for v in index["volumes"]), index["volumes"]
    assert "lancedb" in rendered["volumes"]


def test_healthchecks_and_start_order(rendered: dict[str, Any]) -> None:
    for name in SERVICES:
        check = rendered["services"][name]["healthcheck"]["test"]
        assert check == ["CMD", "python", "/usr/local/bin/mvdb-healthcheck"], name
    depends = rendered["services"]["gateway"]["depends_on"]
    assert {name: d["condition"] for name, d in depends.items()} == {
        "converter": "service_healthy",
        "embedder": "service_healthy",
        "index": "service_healthy",
    }


def test_each_service_builds_its_own_dockerfile_target(rendered: dict[str, Any]) -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    for name in SERVICES:
        build = rendered["services"][name]["build"]
        assert build["target"] == name
        assert re.search(rf"^FROM \S+ AS {name}$", dockerfile, re.MULTILINE), name


def test_prometheus_config_is_mounted_from_the_repo() -> None:
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    volumes = compose["services"]["prometheus"]["volumes"]
    source = next(v.split(":")[0] for v in volumes if v.endswith("prometheus.yml:ro"))
    assert (REPO / source).is_file()


@pytest.mark.parametrize(
    ("tokens", "written"),
    [("", ""), ("only-one", "only-one"), ("first,second", "first")],
)
def test_prometheus_entrypoint_writes_the_first_read_only_token(
    tmp_path: Path, tokens: str, written: str
) -> None:
    """The shell part of the Prometheus service's command, run by a real POSIX shell (the
    image's busybox sh understands the same parameter expansion)."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    (command,) = compose["services"]["prometheus"]["command"]
    script = command.replace("$$", "$").split("&&")[0]  # compose's `$$` is a literal `$`
    token_file = tmp_path / "gateway-token"
    script = script.replace("/prometheus/gateway-token", str(token_file))
    result = run(["/bin/sh", "-c", script], env={"READ_ONLY_TOKEN": tokens})
    assert result.returncode == 0, result.stderr
    assert token_file.read_text() == written


def test_containers_run_read_only_with_scratch_in_memory(rendered: dict[str, Any]) -> None:
    """Nothing is written into an image at run time: VAR_DIR (= HOME) and /tmp are tmpfs,
    the store is the index's volume. (The container tier runs them this way.)"""
    for name in SERVICES:
        service = rendered["services"][name]
        assert service["read_only"] is True, name
        scratch = {entry.split(":")[0] for entry in service["tmpfs"]}
        assert scratch == {"/tmp", "/app/var"}, name
        var = next(e for e in service["tmpfs"] if e.startswith("/app/var:"))
        assert "uid=10001" in var, "writable by the images' USER"
        assert service["cap_drop"] == ["ALL"], name


def test_the_ingest_folder_is_mounted_where_ingest_roots_points(
    docker_compose: str, tmp_path: Path
) -> None:
    """ingest_folder works out of the box: the host folder (INGEST_HOST_DIR, default ./ingest
    beside the compose file) is the gateway's only readable root, read-only."""
    for env, host_dir in (("", tmp_path / "ingest"), ("INGEST_HOST_DIR=/srv/docs\n", "/srv/docs")):
        gateway = compose_config(docker_compose, compose_project(tmp_path, env))["services"][
            "gateway"
        ]
        roots = gateway["environment"]["INGEST_ROOTS"].split(":")
        mounts = gateway["volumes"]
        assert mounts == [f"{host_dir}:{roots[0]}:ro"], mounts
    for name in ("converter", "embedder", "index"):
        assert (
            "INGEST_ROOTS"
            not in compose_config(docker_compose, compose_project(tmp_path))["services"][name][
                "environment"
            ]
        )


def test_images_build_on_the_configured_python_base(rendered: dict[str, Any]) -> None:
    for name in SERVICES:
        assert rendered["services"][name]["build"]["args"] == {"PYTHON_IMAGE": "python:3.11-slim"}


S3_ENV = REPO / "deploy" / "docker" / "s3.env"


def test_the_s3_profile_runs_the_store_in_a_bucket_with_a_writer_and_readers(
    docker_compose: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deploy/docker/s3.env (what docs/deploy.md runs) turns on the `s3` profile: an
    S3-compatible server built from the Dockerfile's `s3` target, private to the backend
    network, the index as the writer of a bucket it serves, readers of the same bucket, and
    the gateway reading from them."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "s3").mkdir()
    plain = compose_config(docker_compose, compose_project(tmp_path / "plain"))
    for name in ("s3", "index-reader"):
        assert plain["services"][name]["profiles"] == ["s3"], "opt-in only"
    assert plain["services"]["index"]["environment"]["INDEX_ROLE"] == "all"
    assert plain["services"]["gateway"]["environment"]["INDEX_READ_URLS"] == ""

    config = compose_config(docker_compose, compose_project(tmp_path / "s3", S3_ENV.read_text()))
    services = config["services"]
    server = services["s3"]
    assert server["build"]["target"] == "s3" and server["image"] == "mcpvectordb/s3:local"
    assert re.search(r"^FROM \S+ AS s3$", (REPO / "Dockerfile").read_text(), re.MULTILINE)
    assert set(server["networks"]) == {"backend"} and "ports" not in server
    assert server["read_only"] is True and server["cap_drop"] == ["ALL"]
    assert any(str(v).startswith("s3data:/data") for v in server["volumes"])
    assert server["healthcheck"]["test"][-1] == "check"

    writer = services["index"]["environment"]
    reader = services["index-reader"]["environment"]
    assert writer["INDEX_ROLE"] == "writer" and reader["INDEX_ROLE"] == "reader"
    for key in ("LANCEDB_URI", "LANCEDB_STORAGE_OPTIONS", "INDEX_READ_CONSISTENCY_S"):
        assert writer[key] == reader[key], key
    assert services["index-reader"]["image"] == services["index"]["image"]
    assert set(services["index-reader"]["networks"]) == {"backend"}
    gateway = services["gateway"]["environment"]
    assert gateway["INDEX_READ_URLS"] == "http://index-reader:8003"
    assert gateway["INDEX_READ_CONSISTENCY_S"] == writer["INDEX_READ_CONSISTENCY_S"]

    for key in list(os.environ):
        if key.upper() in {n.upper() for cls in SETTINGS for n in cls.model_fields}:
            monkeypatch.delenv(key)
    for key, value in reader.items():
        monkeypatch.setenv(key, str(value))
    index = IndexSettings()
    bucket = index.lancedb_uri.removeprefix("s3://").split("/")[0]
    assert index.lancedb_uri.startswith("s3://")
    assert bucket in server["environment"]["S3_BUCKETS"].split(",")
    endpoint = urlsplit(index.lancedb_storage_options["endpoint"])
    assert endpoint.hostname == "s3"
    assert endpoint.port == int(image_env("s3")["GATEWAY_PORT"])
    assert index.lancedb_storage_options["allow_http"] == "true"
