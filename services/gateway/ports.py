"""What the gateway talks to: the converter, embedder and index ports, bound for the life of
the app. `http_ports` binds the typed HTTP clients (cluster mode); the one-process mode binds
the service cores instead (`services.entrypoints.inprocess`). Callers cannot tell them apart.
With `INDEX_READ_URLS` the index port is a `ReplicaRouter` over the writer and its readers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

from libs.clients import ConverterClient, EmbedderClient, IndexClient
from libs.http import RetryPolicy
from libs.ports import ConverterPort, EmbedderPort, IndexPort
from services.gateway.replicas import ReplicaRouter
from services.gateway.settings import GatewaySettings


@dataclass
class Ports:
    converter: ConverterPort
    embedder: EmbedderPort
    index: IndexPort
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


PortsFactory = Callable[[GatewaySettings], AbstractAsyncContextManager[Ports]]


@asynccontextmanager
async def http_ports(settings: GatewaySettings) -> AsyncIterator[Ports]:
    policy = RetryPolicy(attempts=settings.retry_attempts, max_seconds=settings.retry_max_s)
    converter = ConverterClient(
        settings.converter_url, timeout_s=settings.convert_timeout_s + 10, policy=policy
    )
    embedder = EmbedderClient(
        settings.embedder_url,
        timeout_s=settings.http_timeout_s,
        per_text_s=settings.embed_timeout_per_text_s,
        policy=policy,
    )
    index = IndexClient(settings.index_url, timeout_s=settings.http_timeout_s, policy=policy)
    # One try per reader: the next replica, then the writer, is the retry.
    once = RetryPolicy(attempts=1, max_seconds=settings.index_read_timeout_s)
    readers = [
        IndexClient(url, timeout_s=settings.index_read_timeout_s, policy=once)
        for url in settings.index_read_urls
    ]
    port: IndexPort = index
    if readers:
        port = ReplicaRouter(
            index,
            readers,
            window_s=settings.index_read_consistency_s + settings.index_read_margin_s,
            cooldown_s=settings.index_read_cooldown_s,
        )
    try:
        yield Ports(converter, embedder, port)
    finally:
        for client in (converter, embedder, index, *readers):
            await client.aclose()
