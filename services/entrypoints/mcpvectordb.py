"""`mcpvectordb`: run the MCP server.

    mcpvectordb --transport stdio          one process, no other services (Claude Desktop)
    mcpvectordb --transport sse            the gateway, talking to the other services
    mcpvectordb --transport sse --standalone   the gateway with every core in-process

SSE and streamable HTTP are both served by the HTTP gateway (`/sse` and `/mcp`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

import uvicorn

from libs.errors import MvdbError
from libs.telemetry import configure_logging
from services.entrypoints.lancelog import quiet_lance_log
from services.gateway.settings import GatewaySettings


async def _run_stdio(settings: GatewaySettings) -> None:
    from mcp.server.stdio import stdio_server

    from services.entrypoints.inprocess import inprocess_ports
    from services.gateway.library import Library
    from services.gateway.stdio_lines import serve_lines
    from services.gateway.tools import LibraryServer

    async with inprocess_ports(settings) as ports:
        library = Library(settings, ports, transport="stdio")
        server = LibraryServer(lambda: library).server
        await library.start()
        try:
            options = server.create_initialization_options()
            async with stdio_server() as (read, write):
                await serve_lines(lambda r, w: server.run(r, w, options), read, write)
        finally:
            await library.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mcpvectordb", description=__doc__.split("\n")[0])
    parser.add_argument("--transport", choices=("stdio", "sse", "http"), default="stdio")
    parser.add_argument("--host", default=None, help="bind address (HTTP transports)")
    parser.add_argument("--port", type=int, default=None, help="port (HTTP transports)")
    parser.add_argument(
        "--standalone", action="store_true", help="run every core in this process (HTTP)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    settings = GatewaySettings(transport=args.transport)
    configure_logging("gateway", settings.log_level)
    if args.transport == "stdio" or args.standalone:
        quiet_lance_log()  # the index runs in this process
    if args.transport == "stdio":
        asyncio.run(_run_stdio(settings))
        return 0

    from services.gateway.app import check_exposure, create_app

    host = args.host or settings.bind_host
    port = args.port or settings.gateway_port
    try:
        check_exposure(settings, host)
    except MvdbError as exc:
        print(f"mcpvectordb: {exc.message}", file=sys.stderr)
        return 2
    ports = None
    if args.standalone:
        from services.entrypoints.inprocess import inprocess_ports

        ports = inprocess_ports
    settings = settings.model_copy(update={"bind_host": host})
    app = create_app(settings, ports)
    uvicorn.run(app, host=host, port=port, log_config=None, access_log=False, proxy_headers=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
