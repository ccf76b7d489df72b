"""The query session's graph: the model's own, with its matrix products on 8-bit weights.

A query is a few dozen tokens, and for so few the model's time goes into reading its weights:
the bundled graph stores them as int8, but ONNX Runtime folds them into float32 when it loads
the graph (the `Cast` and `Mul` before each `MatMul` are constants), so every query streams
about 88 MB of float32 through the cache. Here those products become ONNX Runtime's
`MatMulNBits` with 8-bit weights in blocks of `BLOCK` and int8 arithmetic (`accuracy_level`
4): SciFact's queries took 6.7 ms instead of 8.4 (p50, one thread, in process), their vectors
stayed within cosine 0.9995 of the model's own and those of single words within 0.9986, and
SciFact's nDCG@10 moved from 0.6468 to 0.6454 (docs/benchmarks.md). Documents keep the
model's own graph, so nothing stored moves.

The graph is derived once per model file and kept beside the other model files under the var
directory (`query-int8-b32-<digest>.onnx`, written under a temporary name and renamed, so a
crash leaves no half file), in a process of its own; later starts load it. Deriving takes
about 3 s; in the containers, whose VAR_DIR is memory-backed scratch, every start derives it
again (57 MB). A model whose graph cannot be derived (a custom one the quantizer does not
handle) keeps its own graph for queries too, with a warning that says why.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

BITS = 8
BLOCK = 32  # 128 was 15 % faster again, but one-word queries moved to cosine 0.996
ACCURACY_LEVEL = 4  # int8 arithmetic; float32 arithmetic over 8-bit blocks was 4x slower
DERIVE_TIMEOUT_S = 300.0


def query_graph(model_file: Path, cache_dir: Path) -> Path:
    """The query graph derived from `model_file` (built now if not yet under `cache_dir`), or
    `model_file` itself when it cannot be derived."""
    digest = hashlib.sha256(model_file.read_bytes()).hexdigest()[:16]
    target = cache_dir / f"query-int8-b{BLOCK}-{digest}.onnx"
    if target.is_file():
        return target
    started = time.perf_counter()
    # In a process of its own: the quantizer holds the float32 graph several times over (400
    # MB at its peak), memory this process would keep, and it sets up logging on import.
    command = [sys.executable, "-m", __name__, str(model_file), str(target)]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=DERIVE_TIMEOUT_S,
            check=False,
        )
        why = done.stderr.strip().splitlines()[-1:] if done.returncode else []
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = [repr(exc)]
    if why or not target.is_file():
        log.warning(
            "could not derive the 8-bit query graph; queries use the model's own",
            extra={"fields": {"model_file": str(model_file), "why": " ".join(why)}},
        )
        return model_file
    log.info(
        "derived the 8-bit query graph",
        extra={"fields": {"file": str(target), "seconds": round(time.perf_counter() - started, 2)}},
    )
    return target


def derive(model_file: Path, target: Path) -> None:
    """Write the 8-bit graph of `model_file` to `target`, atomically."""
    import onnx
    import onnxruntime as ort

    quantizer_class = _quantizer()
    target.parent.mkdir(parents=True, exist_ok=True)
    # The work file (the float32 graph is 86 MB) goes to the system's temporary directory: in
    # the containers VAR_DIR is a small memory-backed scratch that keeps only the result.
    with tempfile.TemporaryDirectory(prefix="mvdb-query-graph-") as work:
        # ONNX Runtime's basic optimisations fold the constant weights into float32: the
        # products the quantizer can then see as MatMul over a constant.
        folded = Path(work) / "folded.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        quantizer = quantizer_class(
            onnx.load(str(folded)),
            bits=BITS,
            block_size=BLOCK,
            is_symmetric=True,
            accuracy_level=ACCURACY_LEVEL,
        )
        quantizer.process()
        if not any(node.op_type == "MatMulNBits" for node in quantizer.model.model.graph.node):
            raise ValueError("the graph has no matrix product over constant weights")
        partial = target.with_name(target.name + ".partial")
        onnx.save(quantizer.model.model, str(partial))
        os.replace(partial, target)


def _quantizer() -> Any:
    """ONNX Runtime's MatMulNBits quantizer class, its node-by-node log silenced."""
    from onnxruntime.quantization import matmul_nbits_quantizer

    logging.getLogger(matmul_nbits_quantizer.__name__).setLevel(logging.WARNING)
    return matmul_nbits_quantizer.MatMulNBitsQuantizer


if __name__ == "__main__":  # python -m services.embedder.querygraph MODEL_FILE TARGET
    derive(Path(sys.argv[1]), Path(sys.argv[2]))
