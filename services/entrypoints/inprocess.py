"""The composition root for one-process mode: the converter, embedder and index cores wired
directly into the gateway's ports, with no HTTP between them. Used by the stdio transport,
`mcpvectordb --standalone` and the CLI when no cluster URL is given."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from services.converter.core import Converter
from services.converter.settings import ConverterSettings
from services.embedder.core import EmbedderCore
from services.embedder.settings import EmbedderSettings
from services.gateway.app import Ports
from services.gateway.settings import GatewaySettings
from services.index.core import IndexCore
from services.index.settings import IndexSettings


@asynccontextmanager
async def inprocess_ports(settings: GatewaySettings) -> AsyncIterator[Ports]:
    """Build every core from the same environment the services would read."""
    async with AsyncExitStack() as stack:
        converter = await stack.enter_async_context(Converter(ConverterSettings()))
        embedder = await stack.enter_async_context(EmbedderCore(EmbedderSettings()))
        index = await stack.enter_async_context(IndexCore(IndexSettings()))
        yield Ports(converter, embedder, index)
