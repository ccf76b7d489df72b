"""File formats: the one table of what this build ingests, and of what it knows but cannot
convert, with why and what to do instead.

`CONVERTIBLE_EXTENSIONS` is what converts here; `server_info`, `/upload` and `ingest_file`
answer from it, and the converter routes exactly these (a test checks). Folder scans take
`SCANNED_EXTENSIONS`: the same less source code, which is converted only when named.
The tool spec also lists images and audio: this build has no OCR engine and no speech-to-text,
so those are refused with the reason from `UNAVAILABLE` (and skipped, reported as ignored, by
folder scans).
"""

from __future__ import annotations

import bz2
import gzip
import lzma
from collections.abc import Callable
from pathlib import PurePath
from typing import IO, Any

from libs.errors import UnsupportedFormatError

SPEC_EXTENSIONS = (
    ".pdf", ".docx", ".doc", ".pptx", ".ppt", ".xlsx", ".xls", ".html", ".htm", ".txt",
    ".md", ".csv", ".json", ".xml", ".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp",
    ".mp3", ".wav", ".ogg", ".m4a", ".zip",
)  # fmt: skip
# Plain text and Markdown under the names documentation and configuration use.
TEXT_EXTENSIONS = (
    ".markdown", ".mdx", ".text", ".rst", ".adoc", ".asciidoc", ".yaml", ".yml", ".toml",
)  # fmt: skip
# OpenDocument (LibreOffice) text, spreadsheets and presentations, packaged and flat, and Rich
# Text Format.
OFFICE_EXTENSIONS = (".odt", ".ods", ".odp", ".fodt", ".fods", ".fodp", ".rtf")
# Office Open XML's macro-enabled, template and slide-show files: the same containers as
# the formats they vary, read as those (their file type stays their own).
OFFICE_VARIANTS = {
    ".docm": ".docx", ".dotx": ".docx", ".dotm": ".docx",
    ".xlsm": ".xlsx", ".xltx": ".xlsx", ".xltm": ".xlsx",
    ".pptm": ".pptx", ".ppsx": ".pptx", ".ppsm": ".pptx", ".potx": ".pptx", ".potm": ".pptx",
}  # fmt: skip
# LaTeX, Org mode, subtitles and transcripts, and web pages saved as one file: text formats
# the converter reads itself.
MARKUP_EXTENSIONS = (".tex", ".ltx", ".org", ".vtt", ".srt", ".mhtml", ".mht")
# Tar archives, plain and compressed, and compressed files (`report.tar.gz`, `notes.txt.gz`):
# their files converted as a ZIP archive's are.
COMPRESSED_EXTENSIONS = (".gz", ".bz2", ".xz")
ARCHIVE_EXTENSIONS = (".tar", ".tgz", ".tbz2", ".txz", *COMPRESSED_EXTENSIONS)
# Every archive type. One inside a tar archive or a compressed file is not opened.
ARCHIVES = frozenset({".zip", *ARCHIVE_EXTENSIONS})
EXTRA_EXTENSIONS = (
    ".epub", ".ipynb", ".tsv", ".msg", ".eml", *OFFICE_EXTENSIONS, *OFFICE_VARIANTS,
    *TEXT_EXTENSIONS, *MARKUP_EXTENSIONS, *ARCHIVE_EXTENSIONS,
)  # fmt: skip

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
}
KNOWN_EXTENSIONS = frozenset(SPEC_EXTENSIONS + EXTRA_EXTENSIONS)

# Source code: read as it is, definitions as the chunks' headings (`services.converter.code`).
# Converted when named (an upload, ingest_file, ingest_url, a sync or ingest_repo `include`
# pattern); folder scans, ingest_repo's default patterns and the sync client's scan leave them
# out, so a folder or repository ingest picks the same files as before (not node_modules).
CODE_EXTENSIONS = (
    ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx", ".java",
    ".kt", ".kts", ".scala", ".groovy", ".go", ".rs", ".c", ".h", ".cc", ".cpp", ".cxx",
    ".hpp", ".hh", ".cs", ".fs", ".swift", ".m", ".mm", ".rb", ".php", ".pl", ".pm", ".lua",
    ".r", ".jl", ".dart", ".ex", ".exs", ".erl", ".hs", ".clj", ".elm", ".vue", ".svelte",
    ".sh", ".bash", ".zsh", ".fish", ".ps1", ".psm1", ".bat", ".cmd", ".sql", ".proto",
    ".graphql", ".gql", ".tf", ".hcl", ".css", ".scss", ".less",
)  # fmt: skip
# What this release's converter and chunker make of a file: raised in a release whose
# converter or chunker gives other Markdown or chunks for the same bytes. Each document
# records the revision it was made with (0: made before 0.8.5, which did not record it). One
# made before its file type last changed (`CHANGED_AT`) is stale: when its bytes come again
# (an upload, a sync pass, a folder or repository ingest, ingest_url, ingest_content) it is
# converted again instead of skipped as unchanged, and the manifest (`GET /sources`) says
# `stale` so that a sync client sends it again. Documents of the other types stay current.
# 1: 0.8.5, every type (legacy encodings, separators, ZIP members, table headers, e-mail,
# front matter titles: docs/mcp-tool-spec.md, 0.8.4). 2: 0.8.6, RTF and OpenDocument (hidden
# text and tracked deletions left out) and ZIP archives (their .doc and .ppt members read).
# 3: 0.8.7, text files read as they are, and delimited tables: pasted images' base64 left
# out, UTF-8 with a few bad bytes kept UTF-8, Excel's lists in the legacy code page (ZIP
# archives, whose members these can be, with them), and source code (C functions,
# JavaScript methods and constructors as definitions; `classify` no `class`). 4: 0.8.8,
# source code (a definition ends at the next statement indented no more than it), and Excel
# workbooks, read by the converter itself (no `NaN` for empty cells), and web pages and
# e-mail with an HTML body (menus, site header and footer left out; ZIP archives, whose
# members these can be, with them). Where the chunks come out the same, the new version
# takes the stored vectors (`services.gateway.embedding`): no embedding. 5: 0.8.9, web pages
# and e-mail with an HTML body (menus a control opens left out), and ZIP archives (LaTeX,
# Org, subtitle and saved web page members read, where they were skipped). 6: 0.8.10, LaTeX
# (the macros a file defines expanded), and ZIP archives, whose members LaTeX files can be.
# 7: 0.8.11, PDF (bookmarks as headings; contents, running lines left out), Word and
# PowerPoint files (Office Open XML: Word's hidden text and table of contents left out, its
# notes as Markdown footnotes; the title they were saved with read), a .doc or .ppt that is
# really one of them, EPUB (its table of contents left out), web pages and e-mail with an
# HTML body (a heading's link to itself left out), and ZIP archives. 8: 0.8.12, workbooks
# (Excel and OpenDocument: hidden sheets left out; Excel's numbers in their cells' number
# formats), and archives, ZIP and tar (which revision 7 missed: a tar archive's PDF or Word
# members changed with it). 9: 0.8.23, every type read through the text encoding detector
# (a short note in a Western code page read as Big5 or another script's code page: "F鄣re"
# for "Fähre"), and legacy Office names over plain text or a saved web page, and archives.
CONVERTER_REVISION = 9
_REVISION_3 = (".md", ".txt", ".csv", ".tsv", *TEXT_EXTENSIONS)
_REVISION_4 = (".xlsx", ".xls", *CODE_EXTENSIONS)
_REVISION_5 = (".html", ".htm", ".eml")
_REVISION_6 = (".tex", ".ltx", ".zip")
_REVISION_7 = (
    ".pdf", ".docx", ".pptx", ".doc", ".ppt", ".epub", ".html", ".htm", ".eml", ".mhtml",
    ".mht", ".zip",
    *(v for v, read_as in OFFICE_VARIANTS.items() if read_as in (".docx", ".pptx")),
)  # fmt: skip
_REVISION_8 = (
    ".xlsx", ".xls", ".ods", ".fods", ".zip", *ARCHIVE_EXTENSIONS,
    *(v for v, read_as in OFFICE_VARIANTS.items() if read_as == ".xlsx"),
)  # fmt: skip
_REVISION_9 = (
    ".md", ".txt", ".csv", ".tsv", ".html", ".htm", ".json", ".xml", ".ipynb", ".tex", ".ltx",
    ".org", ".vtt", ".srt", ".doc", ".xls", ".zip", *TEXT_EXTENSIONS, *CODE_EXTENSIONS,
    *ARCHIVE_EXTENSIONS,
)  # fmt: skip
CHANGED_AT: dict[str, int] = {
    "rtf": 2, "odt": 2, "ods": 2, "odp": 2,
    **{e.lstrip("."): 3 for e in _REVISION_3}, **{e.lstrip("."): 4 for e in _REVISION_4},
    **{e.lstrip("."): 5 for e in _REVISION_5}, **{e.lstrip("."): 6 for e in _REVISION_6},
    **{e.lstrip("."): 7 for e in _REVISION_7}, **{e.lstrip("."): 8 for e in _REVISION_8},
    **{e.lstrip("."): 9 for e in _REVISION_9},
}  # fmt: skip
# What folder scans pick: every convertible format but source code.
SCANNED_EXTENSIONS = KNOWN_EXTENSIONS - frozenset(UNAVAILABLE)
CONVERTIBLE_EXTENSIONS = SCANNED_EXTENSIONS | frozenset(CODE_EXTENSIONS)
# A file named without an extension (README, LICENSE, NOTES, a Unix user's notes) is read as
# plain text. Folder scans and the sync client take one whose first `SNIFF_BYTES` read as
# text (`unnamed_text`), except build files and scripts (a `#!` line), which are source code
# and taken only when an `include` pattern names them, as code is. So is one compressed
# (`changelog.gz`) whose decompressed first bytes read as text (`unnamed_inside`).
SNIFF_BYTES = 4096
BUILD_FILE_NAMES = frozenset(
    {"Makefile", "makefile", "GNUmakefile", "Dockerfile", "Containerfile", "Jenkinsfile",
     "Vagrantfile", "Gemfile", "Rakefile", "Procfile", "Brewfile", "Podfile", "Justfile",
     "justfile", "Caddyfile", "Snakefile", "BUILD", "WORKSPACE", "CODEOWNERS"}
)  # fmt: skip


def extension_of(filename: str) -> str:
    return PurePath(filename).suffix.lower()


def is_known(filename: str) -> bool:
    """A format the spec lists: convertible here, or refused with a reason."""
    return extension_of(filename) in KNOWN_EXTENSIONS


def is_convertible(filename: str) -> bool:
    return extension_of(filename) in CONVERTIBLE_EXTENSIONS


def is_scanned(filename: str) -> bool:
    """A file a folder scan picks: convertible, and not source code. A compressed file
    (`.gz`, `.bz2`, `.xz`) only when what it holds is (`notes.txt.gz`, `site.tar.gz`): a
    folder's rotated logs (`syslog.2.gz`), compressed data and archives are left out."""
    ext = extension_of(filename)
    if ext in COMPRESSED_EXTENSIONS:
        stem = PurePath(filename).stem
        inner = extension_of(stem)  # an archive inside is not opened
        return inner == ".tar" or (inner not in ARCHIVES and is_scanned(stem))
    return ext in SCANNED_EXTENSIONS


def is_office_lock(name: str) -> bool:
    """Office's owner file beside a document open in Word, Excel or PowerPoint
    (`~$report.docx`: a few bytes naming who has it open, not a document). Scans leave it
    out, as the sync client does."""
    return name.startswith("~$")


# How each compressed name is opened, and what its compression is called in a message.
_DECOMPRESSORS: dict[str, tuple[Callable[[IO[bytes]], Any], str]] = {
    ".gz": (gzip.open, "gzip"), ".tgz": (gzip.open, "gzip"),
    ".bz2": (bz2.open, "bzip2"), ".tbz2": (bz2.open, "bzip2"),
    ".xz": (lzma.open, "xz"), ".txz": (lzma.open, "xz"),
}  # fmt: skip
# What a reader of corrupt or truncated compressed data raises.
DECOMPRESSION_ERRORS = (OSError, EOFError, lzma.LZMAError, ValueError)


def compression_of(name: str) -> str | None:
    """The compression `name`'s extension says (`gzip`, `bzip2`, `xz`), else None."""
    found = _DECOMPRESSORS.get(extension_of(name))
    return found[1] if found else None


def decompressing(raw: IO[bytes], name: str) -> IO[bytes]:
    """A reader of what `raw` holds, decompressed as `name`'s extension says (`compression_
    of` must name one); reading corrupt data raises one of `DECOMPRESSION_ERRORS`."""
    opener, _ = _DECOMPRESSORS[extension_of(name)]
    reader: IO[bytes] = opener(raw)
    return reader


def unnamed_inside(name: str) -> str | None:
    """The name of what a compressed file holds when that name has no extension
    (`changelog` of `changelog.gz`, `NEWS` of `NEWS.bz2`: how Unix documentation ships),
    else None. Scans take such a file when what it holds is text (`unnamed_text` of the
    decompressed first bytes), as they take `changelog` itself."""
    if extension_of(name) not in COMPRESSED_EXTENSIONS:
        return None
    inner = PurePath(name).stem
    return None if extension_of(inner) or inner.startswith(".") else inner


def looks_like_text(head: bytes) -> bool:
    """Whether a file's first bytes read as text in any ASCII-based encoding: some bytes,
    no NUL, and at most 1 % control characters other than tab, line and page breaks and
    escape (binary formats hold many; UTF-16 text, with its zeros, is not taken)."""
    if not head or b"\x00" in head:
        return False
    controls = sum(head.count(bytes([c])) for c in range(32) if c not in (9, 10, 11, 12, 13, 27))
    return controls * 100 <= len(head)


def unnamed_text(name: str, head: bytes, *, code: bool) -> bool:
    """Whether a scan takes the file `name`, which has no extension, from its first bytes
    `head`: text, and with `code` False neither a build file nor a script."""
    if extension_of(name) or name.startswith(".") or not looks_like_text(head):
        return False
    return code or (name not in BUILD_FILE_NAMES and not head.startswith(b"#!"))


def check_convertible(name: str) -> None:
    """Refuse a file this build cannot convert, saying why and what to do instead. A file
    named without an extension (README, LICENSE, Makefile) is read as plain text when it is
    named (an upload, ingest_file); the converter refuses it if its bytes are binary. Folder
    scans take such files by their first bytes (`unnamed_text`)."""
    ext = extension_of(name)
    if ext in CONVERTIBLE_EXTENSIONS or not ext:
        return
    if ext in UNAVAILABLE:
        raise UnsupportedFormatError(f"cannot convert '{name}': {UNAVAILABLE[ext]}")
    raise UnsupportedFormatError(
        f"cannot convert '{name}': '{ext}' files are not supported. Supported extensions: "
        f"{', '.join(sorted(SCANNED_EXTENSIONS))}, and source code "
        f"({', '.join(CODE_EXTENSIONS[:8])}, ...: see server_info). For other text, index it "
        "with ingest_content."
    )


def is_current(conversion: int, file_type: str) -> bool:
    """Whether a document of `file_type` made by converter revision `conversion` converts as
    this release would convert it (see `CONVERTER_REVISION`)."""
    return conversion >= CHANGED_AT.get(file_type.lower().lstrip("."), 1)
