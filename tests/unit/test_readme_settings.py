"""README's configuration table names every setting the services read, with its default;
`.env.example` and docker-compose's `${NAME:-default}` give the same defaults."""

from __future__ import annotations

import re

from pydantic_settings import BaseSettings

from services.converter.settings import ConverterSettings
from services.embedder.settings import EmbedderSettings
from services.gateway.settings import GatewaySettings
from services.index.settings import IndexSettings
from tests.conftest import REPO

SETTINGS: tuple[type[BaseSettings], ...] = (
    GatewaySettings,
    ConverterSettings,
    EmbedderSettings,
    IndexSettings,
)
# Where the containers differ from a local run on purpose: the named volume's path.
CONTAINER_VALUES = {"LANCEDB_URI": "/data/lancedb"}


def scalar_defaults() -> dict[str, str]:
    """Every setting with a plain default, as its environment variable would spell it."""
    shown: dict[str, str] = {}
    for cls in SETTINGS:
        for name, field in cls.model_fields.items():
            value = field.default
            if isinstance(value, bool):
                shown[name.upper()] = "true" if value else "false"
            elif isinstance(value, float) and value.is_integer():
                shown[name.upper()] = str(int(value))
            elif isinstance(value, int | float | str):
                shown[name.upper()] = str(value)
    return shown


def test_every_setting_is_in_the_readme_table() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    missing = sorted(
        name.upper()
        for cls in SETTINGS
        for name in cls.model_fields
        if f"| `{name.upper()}` |" not in readme
    )
    assert missing == []


def test_the_readme_env_example_and_compose_give_the_code_defaults() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| `([A-Z0-9_]+)` \| `([^`|]*)` \|", readme, re.M))
    example = (REPO / ".env.example").read_text(encoding="utf-8")
    env = dict(re.findall(r"^([A-Z0-9_]+)=(.*)$", example, re.M))
    compose = (REPO / "docker-compose.yml").read_text(encoding="utf-8")
    fallbacks = dict(re.findall(r"\$\{([A-Z0-9_]+):-([^}]*)\}", compose))
    wrong = []
    for name, default in scalar_defaults().items():
        if name in table and table[name] != default:
            wrong.append(f"README {name}={table[name]} (code: {default})")
        expected = CONTAINER_VALUES.get(name, default)
        for where, values in ((".env.example", env), ("docker-compose.yml", fallbacks)):
            if name in values and values[name] != expected:
                wrong.append(f"{where} {name}={values[name]} (code: {expected})")
    assert wrong == []
