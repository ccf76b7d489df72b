"""`Library`: the gateway's application service, the one place each use case lives.

Ingest (files, text, URLs, folders, uploads), search, list, get, delete, server info and
readiness: the MCP tools (`services.gateway.tools`), the HTTP routes (`services.gateway.api`),
the CLI (`mcpvectordb-ingest`) and the benchmarks all call these methods and do nothing else.
Each method takes the validated contract model of its input (`libs.contracts`), returns the
contract model of its result, and raises `libs.errors` exceptions; turning those into an MCP
result or an HTTP answer is the adapters' one job. What differs per call and not per input
(the transport the caller came in on) travels in a `Call`.
"""

from __future__ import annotations

import asyncio
import os
import platform
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from libs import SERVER_NAME, SERVER_VERSION
from libs.contracts import (
    DeleteResult,
    DeleteSourceInput,
    DocIdInput,
    DocumentRef,
    DocumentRefPage,
    DocumentUriInput,
    FolderIngestResult,
    GetDocumentInput,
    GetDocumentResult,
    IndexSearchRequest,
    IngestContentInput,
    IngestFileInput,
    IngestFolderInput,
    IngestRepoInput,
    IngestResult,
    IngestUrlInput,
    Job,
    JobAccepted,
    JobIdInput,
    JobList,
    ListDocumentsInput,
    ListDocumentsResult,
    ListJobsInput,
    ListLibrariesResult,
    ListSourcesInput,
    NoInput,
    PathCheck,
    RepoIngestResult,
    ResourcePageInput,
    SearchInput,
    SearchMode,
    SearchResult,
    ServerInfoInput,
    ServerInfoResult,
    SourceList,
    UploadInput,
    decode_cursor,
    document_uri,
    encode_cursor,
    parse_document_uri,
)
from libs.errors import InvalidInputError, MvdbError, NotFoundError, PathNotAllowedError
from libs.formats import CONVERTIBLE_EXTENSIONS, check_convertible
from libs.service_app import ReadyCheck
from libs.tasks import abandon
from libs.vectors import encode
from services.gateway.folders import FolderHooks, FolderIngest
from services.gateway.jobs import Jobs
from services.gateway.pipeline import Pipeline
from services.gateway.ports import Ports
from services.gateway.repos import CloneLimits, repo_url
from services.gateway.reposync import RepoIngest
from services.gateway.settings import GatewaySettings
from services.gateway.sources import scan_folder_root

_STDIO_NOTE = (
    "In stdio mode the server runs on the same machine as the MCP client and reads files "
    "with the client user's permissions."
)
_HTTP_NOTE = (
    "In HTTP mode the server reads files on the server host, not on your machine: use "
    "ingest_content or POST /upload for files that only exist on the client."
)

Progress = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass(frozen=True)
class Call:
    """What an adapter knows about one call beyond its input: the transport it came in on
    (`stdio`, `sse`, `streamable-http`, `http`, `cli`...), and where progress goes (a folder
    reports each finished file: progress = files done, total = files found)."""

    transport: str
    progress: Progress | None = None


def progress_hooks(call: Call | None) -> FolderHooks:
    """The hooks that report a run of files to the caller: progress = files done, total =
    files found, a message naming each file (its name, or its path within a repository)."""
    report = call.progress if call is not None else None
    if report is None:
        return FolderHooks()
    total = 0
    done = 0

    async def scanned(found: int) -> None:
        nonlocal total
        total = found
        await report(0, total, f"{found} files to ingest")

    async def file_done(path: Path, outcome: IngestResult | MvdbError) -> None:
        nonlocal done
        done += 1
        status = outcome.status if isinstance(outcome, IngestResult) else "failed"
        await report(done, total, f"{path.name if path.is_absolute() else path}: {status}")

    return FolderHooks(scanned, file_done)


def model_cache_dir(var_dir: Path) -> str:
    return str((var_dir / "models").resolve())


def upload_name(filename: str) -> str:
    """Reduce a client-side path (Windows or POSIX) to its base name and check the type."""
    name = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if not name or name in (".", ".."):
        raise InvalidInputError(
            f"the uploaded file has no usable file name ({filename!r}): send it with its "
            "name, as curl -F file=@report.pdf does; its type is read from the name"
        )
    check_convertible(name)
    return name


class Library:
    """The document library as the gateway offers it; see the module docstring."""

    def __init__(
        self,
        settings: GatewaySettings,
        ports: Ports,
        fetcher: httpx.AsyncClient | None = None,
        *,
        transport: str | None = None,
    ) -> None:
        self.settings = settings
        self.ports = ports
        self.call = Call(transport or settings.transport)
        self._ingest = Pipeline(settings, ports.converter, ports.embedder, ports.index, fetcher)
        self.folders = FolderIngest(self._ingest)
        self.repos = RepoIngest(
            self._ingest, CloneLimits(settings.repo_max_bytes, settings.repo_clone_timeout_s)
        )
        self.jobs = Jobs(
            ports.index,
            self.folders.run,
            concurrency=settings.job_concurrency,
            retention_days=settings.job_retention_days,
            run_repo=self.repos.run,
        )

    # ------------------------------------------------------------------------ ingest

    async def ingest_file(self, req: IngestFileInput, call: Call | None = None) -> IngestResult:
        return await self._ingest.ingest_file(req.path, req.library, req.metadata)

    async def ingest_content(
        self, req: IngestContentInput, call: Call | None = None
    ) -> IngestResult:
        return await self._ingest.ingest_content(req.content, req.source, req.library, req.metadata)

    async def ingest_url(self, req: IngestUrlInput, call: Call | None = None) -> IngestResult:
        return await self._ingest.ingest_url(req.url, req.library, req.metadata)

    async def ingest_folder(
        self, req: IngestFolderInput, call: Call | None = None
    ) -> FolderIngestResult | JobAccepted:
        """The folder now, or with `background` a job (its id at once; `get_job` follows it)."""
        if req.background:
            folder = self.folders.resolve(req.folder)
            await asyncio.to_thread(scan_folder_root, folder)
            return await self.jobs.submit(req, folder)
        return await self.folders.run(req, progress_hooks(call))

    async def ingest_repo(
        self, req: IngestRepoInput, call: Call | None = None
    ) -> RepoIngestResult | JobAccepted:
        """Clone the repository and sync its files into the library, or with `background`
        a job (its id at once, after the URL policy accepted the URL)."""
        if req.background:
            url = repo_url(req.url)
            await self._ingest.urls.check(url)
            return await self.jobs.submit_repo(req, url)
        return await self.repos.run(req, progress_hooks(call))

    async def ingest_upload(self, req: UploadInput, call: Call | None = None) -> IngestResult:
        """The upload's identity is its `source` when given (e.g. 'Projects/Q3/report.pdf'),
        else the file's base name; the base name's extension picks the converter."""
        name = upload_name(req.filename)
        source = name if req.source is None else req.source
        return await self._ingest.ingest_bytes(req.data, name, source, req.library, req.metadata)

    # ------------------------------------------------------------------------- reads

    async def search(
        self, req: SearchInput, call: Call | None = None, *, mode: SearchMode = "hybrid"
    ) -> SearchResult:
        """Ask the index, and embed the query meanwhile (unless `mode` is keyword-only and no
        similarity floor is set): the index starts on the query's words and takes the vector
        when it comes. A failed embedding cancels the search and is the error reported."""
        request = IndexSearchRequest(
            query=req.query,
            top_k=req.top_k,
            library=req.library,
            filter=req.filter,
            mode=mode,
            max_tokens=req.max_tokens,
            max_per_document=req.max_per_document,
            min_score=req.min_score,
        )
        if mode == "bm25" and req.min_score is None:
            return await self.ports.index.search(request)
        vector: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        searching = asyncio.ensure_future(self.ports.index.search(request, vector))
        try:
            vector.set_result(encode(await self.ports.embedder.embed([req.query], "query")))
        except BaseException:
            await abandon(searching)  # the embedding's failure is the one to report
            raise
        return await searching

    async def list_documents(
        self, req: ListDocumentsInput, call: Call | None = None
    ) -> ListDocumentsResult:
        return await self.ports.index.list_documents(req.library, req.limit, req.offset)

    async def list_libraries(
        self, req: NoInput | None = None, call: Call | None = None
    ) -> ListLibrariesResult:
        return await self.ports.index.list_libraries()

    async def get_document(
        self, req: GetDocumentInput, call: Call | None = None
    ) -> GetDocumentResult:
        return await self.ports.index.get(req.doc_id, req.chunk_index, req.context)

    async def delete_document(self, req: DocIdInput, call: Call | None = None) -> DeleteResult:
        return await self.ports.index.delete(req.doc_id)

    async def list_sources(self, req: ListSourcesInput, call: Call | None = None) -> SourceList:
        """A page of the library's manifest: each source with its doc_id and content SHA-256."""
        return await self.ports.index.list_sources(req.library, req.prefix, req.cursor, req.limit)

    async def delete_source(self, req: DeleteSourceInput, call: Call | None = None) -> DeleteResult:
        """Delete the document at (library, source)."""
        found = (await self.ports.index.lookup(req.library, req.source)).document
        if found is None:
            raise NotFoundError(
                f"no document with source {req.source!r} in library {req.library!r}; "
                f"GET /sources?library={req.library} lists the sources it has"
            )
        return await self.ports.index.delete(found.doc_id)

    # ------------------------------------------------------------ documents as resources

    async def list_document_refs(
        self,
        req: ResourcePageInput,
        call: Call | None = None,
        *,
        only: frozenset[str] | None = None,
    ) -> DocumentRefPage:
        """A page of every document of every library (of the libraries `only`, when given), by
        library then source, with its URI."""
        library, after = decode_cursor(req.cursor, 2) if req.cursor else ("", None)
        listed = (await self.ports.index.list_libraries()).libraries
        names = sorted(i.library for i in listed if only is None or i.library in only)
        refs: list[DocumentRef] = []
        for name in (n for n in names if n >= library):
            cursor = encode_cursor(after) if name == library and after is not None else None
            while len(refs) < req.limit:
                page = await self.ports.index.list_sources(name, "", cursor, req.limit - len(refs))
                refs += [
                    DocumentRef(
                        uri=document_uri(name, e.doc_id),
                        library=name,
                        doc_id=e.doc_id,
                        source=e.source,
                        file_type=e.file_type,
                    )
                    for e in page.sources
                ]
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            if len(refs) >= req.limit:
                last = refs[-1]
                return DocumentRefPage(
                    documents=refs, next_cursor=encode_cursor(last.library, last.source)
                )
        return DocumentRefPage(documents=refs)

    async def read_document_uri(
        self, req: DocumentUriInput, call: Call | None = None
    ) -> GetDocumentResult:
        """The document a `mcpvectordb://{library}/{doc_id}` URI names; NotFoundError if none."""
        library, doc_id = parse_document_uri(req.uri)
        missing = NotFoundError(
            f"no document {req.uri}: doc_id {doc_id!r} is not in library {library!r} (deleted "
            "or replaced by a newer version?); resources/list gives the current URIs"
        )
        try:
            document = await self.ports.index.get(doc_id)
        except NotFoundError as exc:
            raise missing from exc
        if document.library != library:
            raise missing
        return document

    async def server_info(self, req: ServerInfoInput, call: Call | None = None) -> ServerInfoResult:
        transport = (call or self.call).transport
        model = await self._ingest.model()
        index = await self.ports.index.info()
        result = ServerInfoResult(
            name=SERVER_NAME,
            version=SERVER_VERSION,
            platform=sys.platform,
            python_version=platform.python_version(),
            cwd=os.getcwd(),
            lancedb_uri=index.uri,
            fastembed_cache_path=model_cache_dir(self.settings.var_dir),
            embedding_model=model.name,
            embedding_dim=model.dim,
            transport=transport,
            note=_STDIO_NOTE if transport == "stdio" else _HTTP_NOTE,
            supported_extensions=sorted(CONVERTIBLE_EXTENSIONS),
        )
        if req.check_path is not None:
            result.path_check = await asyncio.to_thread(self._check_path, req.check_path)
        return result

    def _check_path(self, raw: str) -> PathCheck:
        """Whether the server could read this file (blocking file I/O: run in a thread)."""
        try:
            path = self._ingest.paths.resolve(raw)
        except (InvalidInputError, PathNotAllowedError) as exc:
            return PathCheck(path=raw, readable=False, error=exc.message)
        try:
            if not path.exists():
                return PathCheck(path=str(path), readable=False, error="file does not exist")
            if not path.is_file():
                return PathCheck(path=str(path), readable=False, error="not a regular file")
            with path.open("rb") as handle:
                handle.read(1)
            size = path.stat().st_size
        except OSError as exc:
            return PathCheck(path=str(path), readable=False, error=exc.strerror or str(exc))
        return PathCheck(path=str(path), readable=True, size_bytes=size)

    # ---------------------------------------------------------------------- jobs

    async def get_job(self, req: JobIdInput, call: Call | None = None) -> Job:
        return await self.jobs.get(req.job_id)

    async def list_jobs(self, req: ListJobsInput, call: Call | None = None) -> JobList:
        jobs = await self.jobs.listing(req.status, req.limit)
        return JobList(jobs=jobs, count=len(jobs))

    async def cancel_job(self, req: JobIdInput, call: Call | None = None) -> Job:
        return await self.jobs.cancel(req.job_id)

    # ------------------------------------------------------------------- operations

    async def start(self) -> None:
        """Resume the background jobs a previous run left (call once, in the lifespan)."""
        await self.jobs.start()

    async def aclose(self) -> None:
        await self.jobs.aclose()

    def ready_checks(self) -> dict[str, ReadyCheck]:
        """The gateway is ready when the three services it needs are."""
        return {
            "converter": self.ports.converter.ready,
            "embedder": self.ports.embedder.ready,
            "index": self.ports.index.ready,
        }
