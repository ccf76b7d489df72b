"""`ingest_repo`: a git repository's documentation as a source (issue 16). Its input (also
the body of `POST /ingest_repo`) and its result, a folder result plus what the repository
sync saw: the commit before and after and the ref it followed."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from libs.contracts.fields import (
    DEFAULT_LIBRARY,
    MAX_PATTERNS,
    MAX_URL_CHARS,
    LibraryName,
    Metadata,
    Pattern,
    ToolInput,
)
from libs.contracts.tools import FolderIngestResult

MAX_REPO_FILES = 20_000


class IngestRepoInput(ToolInput):
    url: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_URL_CHARS,
            description="Repository URL (http/https), or owner/repo for a GitHub repository",
        ),
    ]
    ref: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=255,
            pattern=r"^[A-Za-z0-9_][A-Za-z0-9._/-]*$",
            description="Branch, tag or full 40-hex commit id to ingest; null = the default branch",
        ),
    ] = None
    library: LibraryName = DEFAULT_LIBRARY
    metadata: Metadata = None
    include: Annotated[
        list[Pattern] | None,
        Field(
            max_length=MAX_PATTERNS,
            description="Glob patterns of files to ingest (e.g. 'docs/**', '*.md'); null = "
            "documentation and text files and every format the converter reads",
        ),
    ] = None
    exclude: Annotated[
        list[Pattern] | None,
        Field(
            max_length=MAX_PATTERNS,
            description="Glob patterns to leave out, added to the defaults (.git/, "
            "node_modules/, vendored and generated folders, lock files); a pattern ending "
            "in / is a folder",
        ),
    ] = None
    max_files: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_REPO_FILES,
            description=f"Refuse a repository with more matching files (1-{MAX_REPO_FILES})",
        ),
    ] = 2000
    background: Annotated[
        bool,
        Field(description="Run as a background job: answer at once with its job_id"),
    ] = False
    prune: Annotated[
        bool,
        Field(description="Delete the documents of this repository whose file is gone"),
    ] = True


class RepoIngestResult(FolderIngestResult):
    """`folder` is the repository URL; sources are `<url>#<path>`."""

    repo: str
    ref: str
    commit: str
    commit_before: str | None = None
