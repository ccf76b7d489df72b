"""The title an Office Open XML package (`.docx`, `.pptx` and their variants) was saved with.

markitdown reads the body of Word and PowerPoint files but not their properties; Word 97,
OpenDocument and RTF files give their title from their own metadata (`ole`,
`opendocument`, `rtf`), and this does the same for their successors: `dc:title` in
`docProps/core.xml`, where Word and PowerPoint keep the title of File > Info. A package
without a readable title gives "" (`packages`).
"""

from __future__ import annotations

from services.converter.packages import READ_ERRORS, opened, parsed

_CORE = "docProps/core.xml"
_TITLE = "{http://purl.org/dc/elements/1.1/}title"


def core_title(data: bytes) -> str:
    """The package's title, or "" when it has none or it cannot be read."""
    try:
        with opened(data) as package:
            root = parsed(package.read(_CORE))
    except READ_ERRORS:
        return ""
    found = root.find(_TITLE) if root is not None else None
    return (found.text or "").strip() if found is not None else ""
