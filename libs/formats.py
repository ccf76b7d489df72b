"""File formats: what the spec lists as supported, and what this build can convert.

Images need an OCR engine and audio a speech-to-text engine, neither of which ships here;
legacy .doc/.ppt have no markitdown converter. The converter rejects those with a message
naming what is missing; folder scans skip them (reported as ignored) instead of failing.
"""

from __future__ import annotations

from pathlib import PurePath

SPEC_EXTENSIONS = (
    ".pdf", ".docx", ".doc", ".pptx", ".ppt", ".xlsx", ".xls", ".html", ".htm", ".txt",
    ".md", ".csv", ".json", ".xml", ".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp",
    ".mp3", ".wav", ".ogg", ".m4a", ".zip",
)  # fmt: skip
EXTRA_EXTENSIONS = (".epub", ".ipynb")
IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp"})
AUDIO_EXTENSIONS = frozenset({".mp3", ".wav", ".ogg", ".m4a"})
LEGACY_OFFICE = frozenset({".doc", ".ppt"})
SUPPORTED_EXTENSIONS = frozenset(SPEC_EXTENSIONS + EXTRA_EXTENSIONS)
CONVERTIBLE_EXTENSIONS = SUPPORTED_EXTENSIONS - IMAGE_EXTENSIONS - AUDIO_EXTENSIONS - LEGACY_OFFICE


def extension_of(filename: str) -> str:
    return PurePath(filename).suffix.lower()


def is_supported(filename: str) -> bool:
    return extension_of(filename) in SUPPORTED_EXTENSIONS


def is_convertible(filename: str) -> bool:
    return extension_of(filename) in CONVERTIBLE_EXTENSIONS
