"""Run one service under uvicorn:
`python -m services.entrypoints.serve {converter|embedder|index|gateway}`.

Settings come from the environment; logs are JSON lines on stderr.
"""

from __future__ import annotations

import argparse
import sys

import uvicorn
from fastapi import FastAPI
from pydantic import ValidationError

from libs.errors import MvdbError, invalid_input
from libs.malloc import limit_arenas
from libs.telemetry import configure_logging
from services.entrypoints.lancelog import quiet_lance_log

SERVICES = ("converter", "embedder", "index", "gateway")


def build(service: str) -> tuple[FastAPI, str, int]:
    if service == "converter":
        from services.converter.app import create_app as converter_app
        from services.converter.settings import ConverterSettings

        cs = ConverterSettings()
        configure_logging(service, cs.log_level)
        return converter_app(cs), cs.bind_host, cs.converter_port
    if service == "embedder":
        from services.embedder.app import create_app as embedder_app
        from services.embedder.settings import EmbedderSettings

        es = EmbedderSettings()
        configure_logging(service, es.log_level)
        return embedder_app(es), es.bind_host, es.embedder_port
    if service == "index":
        # Before LanceDB is imported: it starts its threads (`libs.malloc`) and its logger.
        limit_arenas()
        quiet_lance_log()
        from services.index.app import create_app as index_app
        from services.index.settings import IndexSettings

        xs = IndexSettings()
        configure_logging(service, xs.log_level)
        return index_app(xs), xs.bind_host, xs.index_port
    from services.gateway.app import check_exposure
    from services.gateway.app import create_app as gateway_app
    from services.gateway.settings import GatewaySettings

    gs = GatewaySettings()
    configure_logging(service, gs.log_level)
    check_exposure(gs, gs.bind_host)
    return gateway_app(gs), gs.bind_host, gs.gateway_port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.entrypoints.serve")
    parser.add_argument("service", choices=SERVICES)
    args = parser.parse_args(argv)
    try:
        app, host, port = build(args.service)
    except MvdbError as exc:
        print(f"{args.service}: {exc.message}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        # Settings from the environment: each bad one by name, its value not echoed.
        print(f"{args.service}: {invalid_input(exc, 'settings').message}", file=sys.stderr)
        return 2
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        proxy_headers=True,
        timeout_graceful_shutdown=5,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
