"""Shared pieces of the index tests: the stand-in model and deterministic unit vectors."""

from __future__ import annotations

import numpy as np

from libs.vectors import Matrix

DIM = 384
MODEL = "test/minilm"


def unit_vectors(n: int, seed: int) -> Matrix:
    vectors = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    normalised: Matrix = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return normalised
