"""OLE compound files (the binary Office formats: Word, PowerPoint, Excel, Outlook): how one
starts, and the title in its summary information."""

from __future__ import annotations

import olefile

from libs.encodings import canonical

MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def summary_title(ole: olefile.OleFileIO) -> str:
    """The title in an Office file's summary information, in the code page it names."""
    meta = ole.get_metadata()
    title = meta.title
    if isinstance(title, bytes):
        page = (meta.codepage or 1252) & 0xFFFF
        codec = {65001: "utf-8", 1200: "utf-16-le"}.get(page) or f"cp{page}"
        try:
            title = title.decode(canonical(codec), "replace")
        except LookupError:
            title = title.decode("cp1252", "replace")
    return (title or "").replace("\x00", "").strip()
