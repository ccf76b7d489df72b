"""The embedding model: loaded once, batched, with per-model query/document prefixes.

fastembed loads the bundled all-MiniLM-L6-v2 from a local directory (no hub access). The
model was trained for 256 tokens, while fastembed's tokenizer would truncate at 512; we set
the model's own limit so a long query is cut where the model expects it.

The ONNX session is opened here rather than by fastembed, for one option fastembed does not
expose: whether ONNX Runtime's worker threads spin-wait for work after each run. Spinning
burns a core between runs (measured in-process: 2.0 cores against 1.77 for the same texts/s),
CPU that the converter, the index and the gateway of a two-core host need during an ingest;
`EMBED_SPIN_THREADS` turns it back on.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from libs.contracts import EmbedKind, ModelInfo
from libs.errors import InvalidInputError
from libs.modelfiles import ModelFilesError, assemble_bundled_model
from libs.settings import DEFAULT_MODEL
from libs.vectors import Matrix
from services.embedder.querygraph import query_graph

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    dim: int
    max_tokens: int
    query_prefix: str = ""
    document_prefix: str = ""
    bundled: bool = False


KNOWN_MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(DEFAULT_MODEL, 384, 256, bundled=True),
        ModelSpec(
            "nomic-ai/nomic-embed-text-v1.5",
            768,
            512,
            query_prefix="search_query: ",
            document_prefix="search_document: ",
        ),
    )
}
ALIASES = {
    "all-MiniLM-L6-v2": DEFAULT_MODEL,
    "nomic-embed-text-v1.5": "nomic-ai/nomic-embed-text-v1.5",
}


def resolve_spec(name: str) -> ModelSpec:
    canonical = ALIASES.get(name, name)
    spec = KNOWN_MODELS.get(canonical)
    if spec is None:
        known = ", ".join(sorted(KNOWN_MODELS))
        raise ModelFilesError(f"unknown EMBEDDING_MODEL '{name}'; known models: {known}")
    return spec


class Embedder:
    """Synchronous model wrapper over one ONNX session, which runs at most `calls` model
    calls at once (ONNX Runtime's sessions take concurrent runs), each on `threads` threads:
    two one-thread calls side by side kept two cores busier than one two-thread call, whose
    threads wait for each other between the model's layers (docs/benchmarks.md). With
    `int8_graph` the session runs the 8-bit graph derived from the model's own
    (`querygraph`), as the query session does by default."""

    def __init__(
        self,
        model: str,
        *,
        model_dir: Path | None,
        cache_dir: Path,
        batch_size: int = 32,
        threads: int | None = None,
        spin_threads: bool = False,
        calls: int = 1,
        int8_graph: bool = False,
    ) -> None:
        from fastembed import TextEmbedding
        from fastembed.text.onnx_embedding import OnnxTextEmbedding

        self.spec = resolve_spec(model)
        self.batch_size = batch_size
        if model_dir is None:
            if not self.spec.bundled:
                raise ModelFilesError(
                    f"{self.spec.name} is not bundled; download it and set EMBEDDING_MODEL_PATH "
                    "to its directory (model.onnx plus tokenizer files)"
                )
            model_dir = assemble_bundled_model(cache_dir / "bundled-minilm")
        started = time.perf_counter()
        # lazy_load: fastembed reads the model's description and tokenizer; the session is
        # ours (`_session`), so fastembed's thread settings would be unused.
        self._model = TextEmbedding(
            model_name=self.spec.name, specific_model_path=str(model_dir), lazy_load=True
        )
        inner = self._model.model
        if not isinstance(inner, OnnxTextEmbedding):
            raise ModelFilesError(f"{self.spec.name} is not an ONNX text embedding model")
        inner._ensure_tokenizer()
        model_file = model_dir / inner.model_description.model_file
        if int8_graph:
            model_file = query_graph(model_file, cache_dir)
        inner.model = _session(model_file, threads, spin_threads)
        assert inner.tokenizer is not None
        inner.tokenizer.enable_truncation(max_length=self.spec.max_tokens)
        self._slots = threading.BoundedSemaphore(calls)
        log.info(
            "embedding model loaded",
            extra={
                "fields": {
                    "model": self.spec.name,
                    "dim": self.spec.dim,
                    "graph": model_file.name,
                    "seconds": round(time.perf_counter() - started, 3),
                }
            },
        )

    def info(self) -> ModelInfo:
        return ModelInfo(name=self.spec.name, dim=self.spec.dim, max_tokens=self.spec.max_tokens)

    def embed(self, texts: list[str], kind: EmbedKind) -> Matrix:
        if not texts:
            return np.zeros((0, self.spec.dim), dtype=np.float32)
        if any(not isinstance(t, str) for t in texts):
            raise InvalidInputError("every text to embed must be a string")
        prefix = self.spec.query_prefix if kind == "query" else self.spec.document_prefix
        prepared = [prefix + t for t in texts]
        # Similar lengths batched together waste less time on padding.
        order = sorted(range(len(prepared)), key=lambda i: len(prepared[i]))
        with self._slots:
            vectors = list(
                self._model.embed([prepared[i] for i in order], batch_size=self.batch_size)
            )
        out = np.empty((len(prepared), self.spec.dim), dtype=np.float32)
        for position, index in enumerate(order):
            out[index] = vectors[position]
        return out


def _session(model_file: Path, threads: int | None, spin: bool) -> ort.InferenceSession:
    """The CPU session fastembed would open (every graph optimisation, `threads` for both
    thread pools), with thread spinning as asked."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
    flag = "1" if spin else "0"
    options.add_session_config_entry("session.intra_op.allow_spinning", flag)
    options.add_session_config_entry("session.inter_op.allow_spinning", flag)
    return ort.InferenceSession(
        str(model_file), providers=["CPUExecutionProvider"], sess_options=options
    )
