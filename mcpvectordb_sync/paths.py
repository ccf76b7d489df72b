"""How a local file is named in the library, and how it is opened on Windows.

A source is the file's path relative to the synced folder, its parts joined by `/` (never
`\\`), under `--prefix` when given, in Unicode NFC (macOS reports names decomposed, Windows
composed: the same folder synced from either names its documents alike). These functions take
`PurePath`s, so their Windows behaviour is tested on any platform with `PureWindowsPath`.
"""

from __future__ import annotations

import unicodedata
from pathlib import PurePath, PureWindowsPath

SUPPORTED_EXTENSIONS = frozenset(
    {".pdf", ".docx", ".doc", ".pptx", ".ppt", ".xlsx", ".xls", ".html", ".htm", ".txt", ".md",
     ".csv", ".json", ".xml", ".zip", ".epub", ".ipynb", ".tsv", ".markdown", ".mdx", ".text",
     ".rst", ".adoc", ".asciidoc", ".yaml", ".yml", ".toml", ".msg", ".eml", ".odt", ".ods",
     ".odp", ".fodt", ".fods", ".fodp", ".rtf", ".docm", ".dotx", ".dotm", ".xlsm", ".xltx",
     ".xltm", ".pptm", ".ppsx", ".ppsm", ".potx", ".potm", ".tex", ".ltx", ".org", ".vtt",
     ".srt", ".mhtml", ".mht", ".tar", ".tgz", ".tbz2", ".txz", ".gz", ".bz2", ".xz"}
)  # fmt: skip
# A compressed file is sent when what it holds is (notes.txt.gz, site.tar.gz; not syslog.2.gz).
COMPRESSED_EXTENSIONS = frozenset({".gz", ".bz2", ".xz"})
_ARCHIVES = frozenset({".zip", ".tar", ".tgz", ".tbz2", ".txz", *COMPRESSED_EXTENSIONS})
# What the gateway converts and a scan takes (libs.formats.SCANNED_EXTENSIONS), and source
# code, which it converts but a scan takes only when an `--include` glob names it
# (libs.formats.CODE_EXTENSIONS; a test keeps both equal).
CODE_EXTENSIONS = frozenset(
    {".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx", ".java",
     ".kt", ".kts", ".scala", ".groovy", ".go", ".rs", ".c", ".h", ".cc", ".cpp", ".cxx",
     ".hpp", ".hh", ".cs", ".fs", ".swift", ".m", ".mm", ".rb", ".php", ".pl", ".pm", ".lua",
     ".r", ".jl", ".dart", ".ex", ".exs", ".erl", ".hs", ".clj", ".elm", ".vue", ".svelte",
     ".sh", ".bash", ".zsh", ".fish", ".ps1", ".psm1", ".bat", ".cmd", ".sql", ".proto",
     ".graphql", ".gql", ".tf", ".hcl", ".css", ".scss", ".less"}
)  # fmt: skip

# Files without an extension are taken when their first SNIFF_BYTES read as text, build
# files and scripts only with an --include glob, and so are compressed ones that hold such a
# file (changelog.gz; libs.formats.unnamed_text and unnamed_inside; a test keeps the two
# alike: this client runs standalone, without the server's packages).
SNIFF_BYTES = 4096
BUILD_FILE_NAMES = frozenset(
    {"Makefile", "makefile", "GNUmakefile", "Dockerfile", "Containerfile", "Jenkinsfile",
     "Vagrantfile", "Gemfile", "Rakefile", "Procfile", "Brewfile", "Podfile", "Justfile",
     "justfile", "Caddyfile", "Snakefile", "BUILD", "WORKSPACE", "CODEOWNERS"}
)  # fmt: skip
_CONTROLS = bytes(c for c in range(32) if c not in (9, 10, 11, 12, 13, 27))

MAX_PATH = 260  # the classic Windows limit a path must stay under without the \\?\ prefix


def is_supported(name: str) -> bool:
    suffix = PurePath(name).suffix.lower()
    if suffix in COMPRESSED_EXTENSIONS:
        inner = PurePath(name).stem
        kind = PurePath(inner).suffix.lower()  # an archive inside is not opened
        return kind == ".tar" or (kind not in _ARCHIVES and is_supported(inner))
    return suffix in SUPPORTED_EXTENSIONS


def is_code(name: str) -> bool:
    return PurePath(name).suffix.lower() in CODE_EXTENSIONS


def is_unnamed_text(name: str, head: bytes, *, code: bool) -> bool:
    """Whether the file `name`, without an extension, is sent, from its first bytes: some,
    no NUL, at most 1 % control characters, and with `code` False neither a build file nor a
    script (a `#!` line)."""
    if PurePath(name).suffix or name.startswith(".") or not head or b"\x00" in head:
        return False
    if sum(head.count(c) for c in (bytes([b]) for b in _CONTROLS)) * 100 > len(head):
        return False
    return code or (name not in BUILD_FILE_NAMES and not head.startswith(b"#!"))


def unnamed_inside(name: str) -> str | None:
    """The name a compressed file holds when it has no extension (`changelog` of
    `changelog.gz`), else None: sent when what it holds is text (libs.formats.unnamed_inside)."""
    if PurePath(name).suffix.lower() not in COMPRESSED_EXTENSIONS:
        return None
    inner = PurePath(name).stem
    return None if PurePath(inner).suffix or inner.startswith(".") else inner


def clean_prefix(prefix: str) -> str:
    """`--prefix` as a source prefix: `/`-separated, no leading or trailing separators."""
    parts = [p for p in prefix.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError("--prefix may not contain '..'")
    return unicodedata.normalize("NFC", "/".join(parts))


def source_of(relative: PurePath, prefix: str = "") -> str:
    """The source of a file at `relative` (a path below the synced folder)."""
    if relative.is_absolute() or relative.anchor:
        raise ValueError(f"{relative} is not a path relative to the synced folder")
    parts = [p for p in relative.parts if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"{relative} is not a file below the synced folder")
    name = unicodedata.normalize("NFC", "/".join(parts))
    return f"{prefix}/{name}" if prefix else name


def long_path(path: str, windows: bool) -> str:
    """`path` in the form Windows opens whatever its length: `\\\\?\\C:\\...` for a drive path,
    `\\\\?\\UNC\\server\\share\\...` for a UNC path (both absolute). Unchanged elsewhere, or when
    short enough, or when already prefixed."""
    if not windows or len(path) < MAX_PATH or path.startswith("\\\\?\\"):
        return path
    pure = PureWindowsPath(path)
    text = str(pure)
    if text.startswith("\\\\"):
        return "\\\\?\\UNC\\" + text[2:]
    if pure.drive and pure.root:
        return "\\\\?\\" + text
    return path


def casefold_duplicates(sources: list[str]) -> list[list[str]]:
    """Groups of sources that differ only by letter case (one file on Windows, two here)."""
    groups: dict[str, list[str]] = {}
    for source in sources:
        groups.setdefault(source.casefold(), []).append(source)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)
