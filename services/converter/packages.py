"""ZIP packages of XML parts (Word and PowerPoint files, EPUB books): what the converter reads
of them before or after markitdown, read leniently, and the package rewritten.

The steps that use these (`worddocx`, `ooxml`, `epubbook`) improve what markitdown makes of
a file; none of them is the reader of record. So a package or a part they cannot read gives
them nothing (`READ_ERRORS`, `parsed` None) and the file goes on as it came, for markitdown
to convert or refuse with its own message. XML is parsed with defusedxml (no DTDs, no
entities). Packages reach these steps already bounded by `archive.check_archive`.
"""

from __future__ import annotations

import io
import zipfile
from xml.etree.ElementTree import Element

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, fromstring

# What opening a package or reading one of its parts raises when it is damaged or absent.
READ_ERRORS = (KeyError, zipfile.BadZipFile, OSError, ValueError, RuntimeError)


def opened(data: bytes) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BytesIO(data))


def parsed(raw: bytes) -> Element | None:
    """A part's XML, or None when it is not well-formed (or declares entities)."""
    try:
        root: Element = fromstring(raw)
        return root
    except (ParseError, DefusedXmlException):
        return None


def with_members(package: zipfile.ZipFile, replaced: dict[str, bytes]) -> bytes:
    """A copy of `package` with the members named in `replaced` holding their new bytes, in
    the same order, under the same names."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as copy:
        for info in package.infolist():
            body = replaced.get(info.filename)
            copy.writestr(info, package.read(info) if body is None else body, compresslevel=1)
    return out.getvalue()
