"""The title an Office Open XML package (`.docx`, `.pptx` and their variants) was saved with.

markitdown reads the body of Word and PowerPoint files but not their properties; Word 97,
OpenDocument and RTF files give their title from their own metadata (`ole`,
`opendocument`, `rtf`), and this does the same for their successors: `dc:title` in
`docProps/core.xml`, where Word and PowerPoint keep the title of File > Info. XML is parsed
with defusedxml (no DTDs, no entities); a package without a readable title gives "".
"""

from __future__ import annotations

import io
import zipfile

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, fromstring

_CORE = "docProps/core.xml"
_TITLE = "{http://purl.org/dc/elements/1.1/}title"
_MAX_CORE_BYTES = 1 << 20  # a core properties part is a few hundred bytes


def core_title(data: bytes) -> str:
    """The package's title, or "" when it has none or it cannot be read."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            info = package.getinfo(_CORE)
            if info.file_size > _MAX_CORE_BYTES:
                return ""
            root = fromstring(package.read(info))
    except (KeyError, zipfile.BadZipFile, OSError, ValueError, RuntimeError):
        return ""
    except (ParseError, DefusedXmlException):
        return ""
    found = root.find(_TITLE)
    return (found.text or "").strip() if found is not None else ""
