"""README's configuration table names every setting the services read."""

from __future__ import annotations

from services.converter.settings import ConverterSettings
from services.embedder.settings import EmbedderSettings
from services.gateway.settings import GatewaySettings
from services.index.settings import IndexSettings
from tests.conftest import REPO


def test_every_setting_is_in_the_readme_table() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    missing = sorted(
        name.upper()
        for cls in (GatewaySettings, ConverterSettings, EmbedderSettings, IndexSettings)
        for name in cls.model_fields
        if f"| `{name.upper()}` |" not in readme
    )
    assert missing == []
