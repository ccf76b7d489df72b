"""`mcpvectordb-ingest`: bulk-ingest a folder.

Without `--url` it runs the whole pipeline in this process and writes to the same
`LANCEDB_URI` as the server. With `--url` (or `MCPVECTORDB_URL`) it asks a running gateway to
ingest a folder on the gateway's host as a background job (`POST /ingest_folder` with
`background`) and follows it (`GET /jobs/{id}`) to the end. Ctrl-C stops following and leaves
the job running (its id is printed; `--cancel` cancels it instead).

Exit codes: 0 all files ingested (or none found), 1 a file failed, the job failed or was
cancelled, or a fatal error, 2 invalid arguments. The summary goes to stdout, errors to
stderr, and a progress bar to stderr when it is a terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import dataclass

import httpx

from libs.contracts import FolderIngestResult, IngestFolderInput, Job, JobAccepted
from libs.errors import MvdbError, from_payload
from libs.telemetry import configure_logging
from services.gateway.settings import GatewaySettings

POLL_S = 1.0


class Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.shown = False

    async def report(self, done: float, total: float | None, message: str | None) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / max(total or 1, 1))
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {int(done)}/{int(total or 0)} "
            f"{(message or '')[:40]:<40}"
        )
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.enabled and self.shown:
            sys.stderr.write("\n")


@dataclass
class Summary:
    """What the command prints at the end, from a folder result or a finished job."""

    folder: str
    library: str
    total_files: int
    indexed: int
    replaced: int
    skipped: int
    failed: int
    deleted: int
    errors: list[tuple[str, str]]
    ignored: int = 0
    status: str = "succeeded"


async def _run_local(req: IngestFolderInput, progress: Progress) -> Summary:
    from services.entrypoints.inprocess import inprocess_ports
    from services.gateway.library import Call, Library

    settings = GatewaySettings(transport="cli")
    local = req.model_copy(update={"folder": os.path.abspath(os.path.expanduser(req.folder))})
    async with inprocess_ports(settings) as ports:
        library = Library(settings, ports)
        result = await library.ingest_folder(local, Call("cli", progress.report))
    assert isinstance(result, FolderIngestResult)  # not a background request
    return Summary(
        result.folder,
        result.library,
        result.total_files,
        result.indexed,
        result.replaced,
        result.skipped,
        result.failed,
        result.deleted,
        [(e.file, e.error) for e in result.errors],
        len(result.ignored_files),
    )


async def _answer(response: httpx.Response, url: str) -> dict[str, object]:
    try:
        payload = response.json()
    except ValueError:
        payload = None  # e.g. an HTML error page from a proxy in front of the gateway
    if response.status_code >= 400:
        raise from_payload(payload, fallback=f"gateway answered HTTP {response.status_code}")
    if not isinstance(payload, dict):
        raise MvdbError(f"{url} did not answer like an mcpvectordb gateway; check the --url")
    return payload


async def _run_remote(
    req: IngestFolderInput, url: str, token: str | None, progress: Progress, cancel: bool
) -> Summary:
    base = url.rstrip("/")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=10.0)) as client:
        try:
            body = req.model_copy(update={"background": True}).model_dump(mode="json")
            started = await client.post(f"{base}/ingest_folder", json=body, headers=headers)
            accepted = JobAccepted.model_validate(await _answer(started, url))
            if accepted.existing:
                print(f"joining the job already running: {accepted.job_id}", file=sys.stderr)
            try:
                while True:
                    answer = await client.get(f"{base}/jobs/{accepted.job_id}", headers=headers)
                    job = Job.model_validate(await _answer(answer, url))
                    await progress.report(job.processed, job.total_files, job.status)
                    if job.status not in ("queued", "running"):
                        break
                    await asyncio.sleep(POLL_S)
            except asyncio.CancelledError:
                progress.close()
                if cancel:
                    await client.post(f"{base}/jobs/{accepted.job_id}/cancel", headers=headers)
                    print(f"cancelled job {accepted.job_id}", file=sys.stderr)
                else:
                    print(
                        f"stopped following; job {accepted.job_id} goes on "
                        f"(GET {base}/jobs/{accepted.job_id})",
                        file=sys.stderr,
                    )
                raise
        except httpx.HTTPError as exc:
            raise MvdbError(f"cannot reach the gateway at {url}: {type(exc).__name__}") from exc
    if job.status == "failed":
        raise MvdbError(f"job {job.job_id} failed: {job.error}")
    return Summary(
        job.folder,
        job.library,
        job.total_files,
        job.indexed,
        job.replaced,
        job.skipped,
        job.failed,
        job.deleted,
        [(e.file, e.error) for e in job.errors],
        status=job.status,
    )


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="mcpvectordb-ingest", description="Bulk-ingest a folder of documents."
    )
    parser.add_argument("folder", help="folder to ingest")
    parser.add_argument("--library", default="default", help="library to index into")
    parser.add_argument(
        "--no-recursive", dest="recursive", action="store_false", help="skip subfolders"
    )
    parser.add_argument(
        "--max-concurrency", type=int, default=4, help="files processed at once (1-64)"
    )
    parser.add_argument(
        "--prune",
        action="store_true",
        help="delete the library's documents whose files below the folder were deleted",
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("MCPVECTORDB_URL"),
        help="gateway URL: ingest a folder on the server host, as a background job",
    )
    parser.add_argument("--token", default=os.environ.get("MCPVECTORDB_TOKEN"))
    parser.add_argument(
        "--cancel", action="store_true", help="with --url: Ctrl-C cancels the job too"
    )
    args = parser.parse_args(argv)
    try:
        args.request = IngestFolderInput(
            folder=args.folder,
            library=args.library,
            recursive=args.recursive,
            max_concurrency=args.max_concurrency,
            prune=args.prune,
        )
    except ValueError as exc:
        parser.error(str(exc))
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    configure_logging("ingest-cli", os.environ.get("LOG_LEVEL", "WARNING"))
    progress = Progress(enabled=sys.stderr.isatty())
    try:
        if args.url:
            run = _run_remote(args.request, args.url, args.token, progress, args.cancel)
            summary = asyncio.run(run)
        else:
            summary = asyncio.run(_run_local(args.request, progress))
    except MvdbError as exc:
        progress.close()
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        progress.close()
        print("interrupted", file=sys.stderr)
        return 1
    progress.close()
    for file, error in summary.errors:
        print(f"failed: {file}: {error}", file=sys.stderr)
    print(
        f"{summary.folder} -> library '{summary.library}': {summary.total_files} files, "
        f"{summary.indexed} indexed, {summary.replaced} replaced, {summary.skipped} skipped, "
        f"{summary.failed} failed"
        + (f", {summary.deleted} deleted" if summary.deleted else "")
        + (f", {summary.ignored} ignored (format not convertible here)" if summary.ignored else "")
        + (f" (job {summary.status})" if summary.status != "succeeded" else "")
    )
    return 1 if summary.failed or summary.status != "succeeded" else 0


if __name__ == "__main__":
    sys.exit(main())
