"""Embedder-specific errors, subclasses of the shared tree in `libs.errors` (they keep its
`error_code` and HTTP status across hops).

    InvalidInputError (400 invalid_input)
    └── TooManyTexts        more texts in one request than EMBED_MAX_TEXTS
    UpstreamError (503 service_unavailable)
    └── EmbeddingFailed     the ONNX model raised while embedding a batch
"""

from __future__ import annotations

from libs.errors import InvalidInputError, UpstreamError


class TooManyTexts(InvalidInputError):
    def __init__(self, count: int, limit: int) -> None:
        super().__init__(
            f"{count} texts in one request; send at most {limit} (EMBED_MAX_TEXTS), "
            "in several requests if needed"
        )


class EmbeddingFailed(UpstreamError):
    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"the embedding model failed: {type(exc).__name__}: {exc}")
