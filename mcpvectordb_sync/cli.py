"""`mcpvectordb-sync FOLDER --url URL ...`: keep a library in step with a local folder.

Exit codes, as `mcpvectordb-ingest`: 0 every file in step (or none found), 1 a file failed or
the sync could not run (folder missing, gateway unreachable, token refused), 2 invalid
arguments. The summary goes to stdout (one JSON object with `--json`, one per pass with
`--watch`), errors and warnings to stderr, and a progress bar to stderr when it is a terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TextIO

from mcpvectordb_sync import __version__
from mcpvectordb_sync.engine import Options, Summary, hashes_for, sync_once
from mcpvectordb_sync.hashes import CACHE_ENV, default_cache_dir
from mcpvectordb_sync.paths import clean_prefix
from mcpvectordb_sync.scan import Filters
from mcpvectordb_sync.transport import Gateway, SyncError
from mcpvectordb_sync.watch import watch


class Bar:
    """A one-line progress bar on a terminal; silent otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self.shown = False

    def __call__(self, done: int, total: int, message: str) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / max(total, 1))
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {message[-40:]:<40}"
        )
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.shown = False


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcpvectordb-sync",
        description="Keep a library of an mcpvectordb gateway in step with a local folder: "
        "upload new and changed files, skip unchanged ones, and with --delete remove the "
        "documents whose files were deleted.",
    )
    p.add_argument("folder", help="the local folder to sync (drive, UNC or POSIX path)")
    p.add_argument(
        "--url",
        default=os.environ.get("MCPVECTORDB_URL"),
        help="the gateway's base URL (default: $MCPVECTORDB_URL)",
    )
    p.add_argument("--library", default="default", help="library to keep in sync")
    p.add_argument(
        "--token",
        default=os.environ.get("MCPVECTORDB_TOKEN"),
        help="bearer token with write access (default: $MCPVECTORDB_TOKEN)",
    )
    p.add_argument(
        "--prefix", default="", help="name the documents NAME/<relative path>, and sync only those"
    )
    p.add_argument(
        "--delete",
        action="store_true",
        help="delete documents under the prefix whose files are gone",
    )
    p.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="only files matching GLOB (path or name; repeatable); source code (*.py, *.ts...) "
        "is synced only when a GLOB names it",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip files matching GLOB (path or name; repeatable)",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would be done; change nothing")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--watch", action="store_true", help="keep running and sync changes")
    p.add_argument(
        "--interval",
        type=float,
        default=30.0,
        metavar="S",
        help="with --watch: seconds between passes (default 30)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=2,
        metavar="N",
        help="files uploaded at once (1-16, default 2)",
    )
    p.add_argument(
        "--cache-dir",
        default=str(default_cache_dir()),
        metavar="DIR",
        help="where the files' SHA-256 are kept between runs, so that a file whose size and "
        f"time did not change is not read again (default {default_cache_dir()}; "
        f"${CACHE_ENV} sets it too)",
    )
    p.add_argument(
        "--no-cache", action="store_true", help="keep no hash cache file (hash every file each run)"
    )
    p.add_argument(
        "--checksum",
        action="store_true",
        help="read and hash every file, whatever its size and time say",
    )
    p.add_argument("--version", action="version", version=f"mcpvectordb-sync {__version__}")
    return p


def _options(argv: list[str] | None) -> tuple[argparse.Namespace, Options]:
    p = parser()
    args = p.parse_args(argv)
    if not args.url:
        p.error("--url is required (or set MCPVECTORDB_URL), e.g. --url https://docs.example.org")
    if args.interval <= 0:
        p.error("--interval must be a positive number of seconds")
    if not 1 <= args.concurrency <= 16:
        p.error("--concurrency must be between 1 and 16")
    if not args.library.strip():
        p.error("--library must not be empty")
    try:
        prefix = clean_prefix(args.prefix)
    except ValueError as exc:
        p.error(str(exc))
    options = Options(
        folder=args.folder,
        library=args.library.strip(),
        prefix=prefix,
        delete=args.delete,
        filters=Filters(tuple(args.include), tuple(args.exclude)),
        dry_run=args.dry_run,
        concurrency=args.concurrency,
        cache_dir=None if args.no_cache else args.cache_dir,
        checksum=args.checksum,
    )
    return args, options


def _print(summary: Summary, options: Options, as_json: bool) -> None:
    for warning in summary.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for error in summary.errors:
        print(f"failed: {error['source']}: {error['error']}", file=sys.stderr)
    if as_json:
        print(json.dumps(summary.as_json(), ensure_ascii=False), flush=True)
        return
    would = " (dry run: nothing changed)" if summary.dry_run else ""
    if summary.reconverted:
        print(
            f"note: {summary.reconverted} unchanged file(s) "
            f"{'would be' if summary.dry_run else 'were'} sent again: the server's converter is "
            "newer than the one that made their documents",
            file=sys.stderr,
        )
    print(
        f"{options.folder} -> library '{options.library}': {summary.files} files, "
        f"{summary.uploaded} uploaded, {summary.unchanged} unchanged, {summary.deleted} deleted, "
        f"{summary.failed} failed{would}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    args, options = _options(argv)
    bar = Bar(sys.stderr)
    try:
        gateway = Gateway(args.url, args.token)
    except SyncError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    outcome = {"code": 0}
    hashes = hashes_for(options)  # one for every pass of --watch

    def one_pass() -> None:
        try:
            summary = sync_once(gateway, options, bar, hashes=hashes)
        except SyncError as exc:
            bar.close()
            print(f"error: {exc.message}", file=sys.stderr)
            outcome["code"] = 1
            return
        bar.close()
        _print(summary, options, args.json)
        outcome["code"] = 1 if summary.failed else 0

    try:
        if args.watch:
            watch(
                one_pass, options.folder, options.prefix, options.filters, interval_s=args.interval
            )
        else:
            one_pass()
    except KeyboardInterrupt:
        bar.close()
        print("interrupted; the next run goes on from where this one stopped", file=sys.stderr)
        return 1 if not args.watch else outcome["code"]
    return outcome["code"]


if __name__ == "__main__":
    sys.exit(main())
