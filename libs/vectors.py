"""Compact vector transport: float32 matrices as base64 text inside JSON bodies."""

from __future__ import annotations

import base64
import hashlib

import numpy as np
import numpy.typing as npt

from libs.errors import InvalidInputError

Matrix = npt.NDArray[np.float32]


def encode(vectors: Matrix) -> str:
    return base64.b64encode(np.ascontiguousarray(vectors, dtype="<f4").tobytes()).decode("ascii")


def decode(data: str, dim: int, count: int | None = None) -> Matrix:
    raw = base64.b64decode(data.encode("ascii"), validate=True)
    if dim <= 0 or len(raw) % (4 * dim):
        raise InvalidInputError(
            f"vector payload of {len(raw)} bytes is not a multiple of dim {dim}"
        )
    matrix = np.frombuffer(raw, dtype="<f4").reshape(-1, dim).astype(np.float32)
    if count is not None and matrix.shape[0] != count:
        raise InvalidInputError(f"expected {count} vectors, got {matrix.shape[0]}")
    return matrix


def text_digest(text: str) -> bytes:
    """The SHA-256 of a text's UTF-8 bytes: what a text's vector is kept and looked up by
    (the gateway's vector cache, the vectors the index hands back for a stored document)."""
    return hashlib.sha256(text.encode("utf-8")).digest()
