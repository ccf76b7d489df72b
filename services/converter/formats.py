"""Which file types the converter takes, which it knows but cannot convert here, and why.

The file name's extension decides the route; it is checked before a worker process is
involved, so an unsupported upload costs nothing. The tool spec lists images, audio and the
legacy Office formats as ingestable, but this deployment has no OCR engine, no speech-to-text
and no converter for the binary Office formats: those fail with a message that says what is
missing and what to do instead.
"""

from __future__ import annotations

from enum import Enum

from libs.errors import InvalidInputError, UnsupportedFormatError
from libs.formats import CONVERTIBLE_EXTENSIONS


class Route(Enum):
    PDF = "pdf"
    SLIDES = "slides"
    SHEETS = "sheets"
    TEXT = "text"
    DOCUMENT = "document"
    ARCHIVE = "archive"


ROUTES: dict[str, Route] = {
    ".pdf": Route.PDF,
    ".pptx": Route.SLIDES,
    ".xlsx": Route.SHEETS,
    ".xls": Route.SHEETS,
    ".docx": Route.DOCUMENT,
    ".epub": Route.DOCUMENT,
    ".html": Route.TEXT,
    ".htm": Route.TEXT,
    ".txt": Route.TEXT,
    ".md": Route.TEXT,
    ".csv": Route.TEXT,
    ".json": Route.TEXT,
    ".xml": Route.TEXT,
    ".ipynb": Route.TEXT,
    ".zip": Route.ARCHIVE,
}

_OCR = (
    "reading text from images needs OCR, and no OCR engine is installed in the converter; "
    "run the image through an OCR tool and index the text with ingest_content"
)
_SPEECH = (
    "transcribing audio needs a speech-to-text engine, and none is installed in the "
    "converter; transcribe it elsewhere and index the transcript with ingest_content"
)
UNAVAILABLE: dict[str, str] = {
    **{
        ext: f"it is an image: {_OCR}" for ext in (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp")
    },
    **{ext: f"it is audio: {_SPEECH}" for ext in (".mp3", ".wav", ".ogg", ".m4a")},
    ".doc": (
        "legacy Word 97-2003 .doc files have no converter (markitdown reads only .docx); "
        "open it in Word or LibreOffice, save it as .docx and ingest that"
    ),
    ".ppt": (
        "legacy PowerPoint 97-2003 .ppt files have no converter (markitdown reads only "
        ".pptx); open it in PowerPoint or LibreOffice, save it as .pptx and ingest that"
    ),
}


def base_name(filename: str) -> str:
    """The last path component, for Windows and POSIX paths alike."""
    return filename.replace("\\", "/").rsplit("/", 1)[-1].strip()


def extension_of(filename: str) -> str:
    name = base_name(filename)
    stem, dot, ext = name.rpartition(".")
    return f".{ext.lower()}" if dot and stem else ""


def route_for(filename: str) -> Route:
    """The conversion route for `filename`, or an error naming what to do instead."""
    name = base_name(filename)
    if not name:
        raise InvalidInputError("a file name is required to pick the converter (e.g. report.pdf)")
    ext = extension_of(name)
    route = ROUTES.get(ext)
    if route is not None:
        return route
    if ext in UNAVAILABLE:
        raise UnsupportedFormatError(f"cannot convert '{name}': {UNAVAILABLE[ext]}")
    what = f"'{ext}' files" if ext else "files without an extension"
    raise UnsupportedFormatError(
        f"cannot convert '{name}': {what} are not supported. Supported extensions: "
        f"{', '.join(sorted(CONVERTIBLE_EXTENSIONS))}. For other text, index it with "
        "ingest_content."
    )
