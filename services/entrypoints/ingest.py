"""`mcpvectordb-ingest`: bulk-ingest a folder.

Without `--url` it runs the whole pipeline in this process and writes to the same
`LANCEDB_URI` as the server. With `--url` (or `MCPVECTORDB_URL`) it asks a running gateway
to ingest a folder on the gateway's host (`POST /ingest_folder`).

Exit codes: 0 all files ingested (or none found), 1 a file failed or a fatal error,
2 invalid arguments. The summary goes to stdout, errors to stderr, and a progress bar to
stderr when it is a terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import httpx

from libs.contracts import FolderIngestResult, IngestFolderInput, IngestResult
from libs.errors import MvdbError, from_payload
from libs.telemetry import configure_logging
from services.gateway.settings import GatewaySettings


class Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.total = 0
        self.done = 0

    def advance(self, path: Path, outcome: IngestResult | MvdbError) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        mark = "!" if isinstance(outcome, MvdbError) else " "
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}{mark} "
            f"{path.name[:40]:<40}"
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.done:
            sys.stderr.write("\n")


async def _run_local(req: IngestFolderInput, progress: Progress) -> FolderIngestResult:
    from services.entrypoints.inprocess import inprocess_ports
    from services.gateway.library import Library
    from services.gateway.sources import scan_folder

    settings = GatewaySettings(transport="cli")
    folder = Path(req.folder).expanduser().resolve()
    if folder.is_dir():
        progress.total = len(scan_folder(folder, req.recursive).files)
    async with inprocess_ports(settings) as ports:
        library = Library(settings, ports)
        local = req.model_copy(update={"folder": str(folder)})
        return await library.ingest_folder(local, on_file_done=progress.advance)


async def _run_remote(req: IngestFolderInput, url: str, token: str | None) -> FolderIngestResult:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0)) as client:
        try:
            response = await client.post(
                url.rstrip("/") + "/ingest_folder", json=req.model_dump(), headers=headers
            )
        except httpx.HTTPError as exc:
            raise MvdbError(f"cannot reach the gateway at {url}: {type(exc).__name__}") from exc
    try:
        payload = response.json()
    except ValueError:
        payload = None  # e.g. an HTML error page from a proxy in front of the gateway
    if response.status_code >= 400:
        raise from_payload(payload, fallback=f"gateway answered HTTP {response.status_code}")
    try:
        return FolderIngestResult.model_validate(payload)
    except ValueError as exc:
        raise MvdbError(
            f"{url} did not answer like an mcpvectordb gateway (HTTP {response.status_code}); "
            "check the --url"
        ) from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mcpvectordb-ingest", description="Bulk-ingest a folder of documents."
    )
    parser.add_argument("folder", help="folder to ingest")
    parser.add_argument("--library", default="default", help="library to index into")
    parser.add_argument(
        "--no-recursive", dest="recursive", action="store_false", help="skip subfolders"
    )
    parser.add_argument(
        "--max-concurrency", type=int, default=4, help="files processed at once (>= 1)"
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("MCPVECTORDB_URL"),
        help="gateway URL: ingest a folder on the server host instead of locally",
    )
    parser.add_argument("--token", default=os.environ.get("MCPVECTORDB_TOKEN"))
    args = parser.parse_args(argv)
    if args.max_concurrency < 1:
        parser.error("--max-concurrency must be at least 1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    configure_logging("ingest-cli", os.environ.get("LOG_LEVEL", "WARNING"))
    try:
        req = IngestFolderInput(
            folder=args.folder,
            library=args.library,
            recursive=args.recursive,
            max_concurrency=args.max_concurrency,
        )
    except ValueError as exc:
        parser.error(str(exc))
    progress = Progress(enabled=sys.stderr.isatty() and not args.url)
    try:
        if args.url:
            result = asyncio.run(_run_remote(req, args.url, args.token))
        else:
            result = asyncio.run(_run_local(req, progress))
    except MvdbError as exc:
        progress.close()
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        progress.close()
        print("interrupted", file=sys.stderr)
        return 1
    progress.close()
    for err in result.errors:
        print(f"failed: {err.file}: {err.error}", file=sys.stderr)
    print(
        f"{result.folder} -> library '{result.library}': {result.total_files} files, "
        f"{result.indexed} indexed, {result.replaced} replaced, {result.skipped} skipped, "
        f"{result.failed} failed"
        + (
            f", {len(result.ignored_files)} ignored (format not convertible here)"
            if result.ignored_files
            else ""
        )
    )
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
