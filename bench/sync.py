"""Folder sync benchmark: `mcpvectordb-sync` over a folder of N small documents against the four
real services on loopback (`make bench-sync`, SYNC_ARGS="--files 1000").

The first pass uploads every file (conversion and embedding dominate it); the measured ones
are the next passes, with nothing changed: their time (scan, hashing, the manifest pages) and
the bytes they send and receive. They run in turns: with the hash cache (a file whose size and
time are as before is not read: `mcpvectordb_sync.hashes`), and with `--checksum` (every file
read and hashed, as before the cache). `--attachment-kb N` makes each document a ZIP of its
memo and an N KB photo (left out by the converter): big files with little text, as a folder
of scanned or illustrated documents is. The files' times are set an hour back, as a folder's
files mostly are. `--cold` drops the page cache before each measured pass, so that reads come
from the disk as on a machine where the folder was not just written. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import zipfile
from dataclasses import replace
from pathlib import Path

from mcpvectordb_sync.engine import Options, Summary, sync_once
from mcpvectordb_sync.transport import Gateway
from services.entrypoints.cluster import local_env, running


def make_folder(root: Path, files: int, attachment_kb: int = 0) -> int:
    total = 0
    hour_ago = time.time() - 3600
    for i in range(files):
        folder = root / f"dept-{i % 10}" / f"year-{2020 + i % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        text = (
            f"# Memo {i}\n\nMemo {i} of department {i % 10}: the budget line {i * 7} was "
            f"reviewed on day {i % 28 + 1}; the follow-up is owned by team {i % 13}.\n"
        )
        if attachment_kb:
            path = folder / f"memo-{i:05d}.zip"
            with zipfile.ZipFile(path, "w") as archive:
                archive.writestr("memo.md", text)
                archive.writestr("photo.jpg", os.urandom(attachment_kb * 1024))
        else:
            path = folder / f"memo-{i:05d}.md"
            path.write_text(text, encoding="utf-8")
        os.utime(path, (hour_ago, hour_ago))
        total += path.stat().st_size
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.sync", description=__doc__)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--attachment-kb", type=int, default=0)
    parser.add_argument(
        "--cold",
        action="store_true",
        help="drop the page cache before each measured pass (Linux, root): files read from disk",
    )
    args = parser.parse_args(argv)

    def measured(options: Options) -> Summary:
        if args.cold:
            os.sync()
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return sync_once(gateway, options)

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        folder = root / "folder"
        size = make_folder(folder, args.files, args.attachment_kb)
        with running(local_env(root / "var", LOG_LEVEL="WARNING")) as cluster:
            gateway = Gateway(cluster.gateway)
            cache = str(root / "hash-cache")
            options = Options(
                str(folder), library="bench", concurrency=args.concurrency, cache_dir=cache
            )
            checksum = replace(options, checksum=True)
            started = time.perf_counter()
            first = sync_once(gateway, options)
            first_s = time.perf_counter() - started
            unchanged, read_all = [], []
            for _ in range(3):
                unchanged.append(measured(options))
                read_all.append(measured(checksum))
    best = min(unchanged, key=lambda s: s.seconds)
    best_read = min(read_all, key=lambda s: s.seconds)
    print(
        json.dumps(
            {
                "files": args.files,
                "folder_bytes": size,
                "first_pass": {
                    "uploaded": first.uploaded,
                    "failed": first.failed,
                    "seconds": round(first_s, 1),
                    "bytes_sent": first.bytes_sent,
                },
                "unchanged_pass": {
                    "uploaded": best.uploaded,
                    "unchanged": best.unchanged,
                    "seconds": [s.seconds for s in unchanged],
                    "bytes_sent": best.bytes_sent,
                    "bytes_received": best.bytes_received,
                    "requests_bytes_per_file": round(best.bytes_sent / args.files, 1),
                    "files_hashed": [s.hashed for s in unchanged],
                },
                "unchanged_pass_checksum": {
                    "seconds": [s.seconds for s in read_all],
                    "files_hashed": [s.hashed for s in read_all],
                },
                "cold": args.cold,
                "ratio_cached_to_checksum_best": round(best.seconds / best_read.seconds, 3),
            },
            indent=2,
        )
    )
    return 0 if first.failed == 0 and best.uploaded == best_read.uploaded == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
