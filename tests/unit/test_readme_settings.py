"""README's configuration table names every setting the services read, with the code's
default (.env.example's values are held to the code in tests/deploy/test_compose.py)."""

from __future__ import annotations

import re

from pydantic_settings import BaseSettings

from services.converter.settings import ConverterSettings
from services.embedder.settings import EmbedderSettings
from services.gateway.settings import GatewaySettings
from services.index.settings import IndexSettings
from tests.conftest import REPO, shown_defaults

SETTINGS: tuple[type[BaseSettings], ...] = (
    GatewaySettings,
    ConverterSettings,
    EmbedderSettings,
    IndexSettings,
)


def test_every_setting_is_in_the_readme_table() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    missing = sorted(
        name.upper()
        for cls in SETTINGS
        for name in cls.model_fields
        if f"| `{name.upper()}` |" not in readme
    )
    assert missing == []


def test_the_readme_table_gives_the_code_defaults() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| `([A-Z0-9_]+)` \| `([^`|]*)` \|", readme, re.M))
    wrong = [
        f"README {name}={table[name]} (code: {default})"
        for name, default in shown_defaults(SETTINGS).items()
        if name in table and table[name] != default
    ]
    assert wrong == []
