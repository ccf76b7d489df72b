"""The index service's errors: subclasses of the shared tree that carry their own wording.

    libs.errors.NotFoundError        404 not_found
    ├── DocumentNotFound
    ├── ChunkNotFound
    └── JobNotFound
    libs.errors.ReadOnlyReplicaError 405 read_only_replica
    └── ReadOnlyReplica
    libs.errors.ModelMismatchError   409 model_mismatch
    └── StoreModelMismatch
    libs.errors.ConcurrentWriterError 409 concurrent_writer
    └── ConcurrentWriter
    libs.errors.StoreError           500 store_error
    └── WriteFailed

They keep their parents' `error_code`, so a caller across HTTP gets the parent class back
from `libs.errors.from_payload` with the same message.
"""

from __future__ import annotations

from libs.errors import (
    ConcurrentWriterError,
    ModelMismatchError,
    NotFoundError,
    ReadOnlyReplicaError,
    StoreError,
)


class DocumentNotFound(NotFoundError):
    def __init__(self, doc_id: str) -> None:
        super().__init__(
            f"no document with doc_id {doc_id!r} in the index; "
            "list_documents shows the doc_ids that exist"
        )
        self.doc_id = doc_id


class ChunkNotFound(NotFoundError):
    def __init__(self, doc_id: str, chunk_index: int, first: int, last: int) -> None:
        valid = f"chunk_index {first}..{last}" if last >= first else "no chunks"
        super().__init__(
            f"document {doc_id!r} has no chunk with chunk_index {chunk_index}; it has {valid}"
        )
        self.doc_id = doc_id
        self.chunk_index = chunk_index


class JobNotFound(NotFoundError):
    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"no job with job_id {job_id!r}; list_jobs shows the jobs that exist (finished jobs "
            "are kept for JOB_RETENTION_DAYS)"
        )
        self.job_id = job_id


class ReadOnlyReplica(ReadOnlyReplicaError):
    def __init__(self, what: str) -> None:
        super().__init__(
            f"this index service is a read-only replica (INDEX_ROLE=reader) and does not "
            f"{what}; send writes to the index writer (the gateway's INDEX_URL, a process with "
            "INDEX_ROLE=writer or all), which readers follow within INDEX_READ_CONSISTENCY_S"
        )
        self.what = what


class StoreModelMismatch(ModelMismatchError):
    def __init__(
        self, store_model: str, store_dim: int, got_model: str | None, got_dim: int
    ) -> None:
        got = f"model {got_model!r} ({got_dim}-d)" if got_model else f"{got_dim}-d vectors"
        super().__init__(
            f"this index was built with embedding model {store_model!r} ({store_dim}-d) "
            f"but the request carries {got}; vectors of different models cannot be mixed. "
            f"Set EMBEDDING_MODEL back to {store_model!r}, or re-index into a new store by "
            "pointing LANCEDB_URI at a new path"
        )


class ConcurrentWriter(ConcurrentWriterError):
    def __init__(self, uri: str, detail: str) -> None:
        super().__init__(
            f"another process is writing to this store (LANCEDB_URI {uri}): {detail}. Only one "
            "index may have INDEX_ROLE=writer or all per store; run the others as "
            "INDEX_ROLE=reader. This process refuses every write until it is restarted (reads "
            "keep working); a write it had begun is completed by the writer's recovery on its "
            "next start"
        )
        self.uri = uri


class WriteFailed(StoreError):
    """A LanceDB write did not go through; what was live before stays live."""
