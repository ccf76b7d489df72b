"""What a pass has to do: the library's manifest (`GET /sources`, every page) set against the
files found, each file's SHA-256 set against the manifest's.

- a file whose SHA-256 equals the manifest's for its source is unchanged, never sent;
- a file without an entry, or with another SHA-256, is uploaded, and so is one whose entry is
  `stale`: made by an older converter than the server's, so the same bytes convert anew;
- with delete, an entry under the prefix without a file is deleted, and only after a complete
  scan: a subfolder that could not be listed may still hold the files.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcpvectordb_sync.scan import LocalFile, Scan
from mcpvectordb_sync.transport import Gateway, SyncError


@dataclass(frozen=True)
class Entry:
    source: str
    doc_id: str
    content_sha256: str
    stale: bool = False  # an older converter made it (gateways before 0.8.5 never say so)


def manifest(gateway: Gateway, library: str, prefix: str) -> dict[str, Entry]:
    """The library's sources under `prefix` ('' = all), every page of them."""
    listing = f"{prefix}/" if prefix else ""
    found: dict[str, Entry] = {}
    cursor: str | None = None
    while True:
        page = gateway.sources(library, listing, cursor)
        rows = page.get("sources")
        if not isinstance(rows, list):
            raise SyncError("the gateway's /sources answer has no 'sources' list; is it 0.6.0+?")
        for row in rows:
            entry = Entry(
                str(row["source"]),
                str(row["doc_id"]),
                str(row["content_sha256"]),
                row.get("stale") is True,
            )
            found[entry.source] = entry
        next_cursor = page.get("next_cursor")
        if not next_cursor:
            return found
        cursor = str(next_cursor)


def deletions(scan: Scan, remote: dict[str, Entry]) -> tuple[list[Entry], str | None]:
    """The entries whose files are gone, or none and why (an incomplete scan)."""
    if not scan.complete:
        why = (
            f"not deleting: {len(scan.unreadable)} path(s) could not be read "
            f"({scan.unreadable[0]}); their documents may still have files"
        )
        return [], why
    present = {f.source for f in scan.files}
    return [e for s, e in sorted(remote.items()) if s not in present], None


def changed(file: LocalFile, digest: str, remote: dict[str, Entry]) -> bool:
    entry = remote.get(file.source)
    return entry is None or entry.content_sha256 != digest or entry.stale
