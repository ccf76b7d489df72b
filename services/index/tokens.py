"""Token counts of chunk text, for `search`'s `max_tokens` budget.

Counts come from the bundled embedding model's tokenizer with its special tokens, the same
measure the converter puts in `Chunk.token_count`. The index stores the count per chunk and
only counts here what arrived without one (text indexed by older callers, chunks stored
before the count was kept). The tokenizer (a 470 kB file) loads once, on first use,
in well under a second.
"""

from __future__ import annotations

import threading

from tokenizers import Tokenizer

from libs.modelfiles import bundled_tokenizer_json


class TokenCounter:
    """Thread-safe lazy wrapper around one `tokenizers.Tokenizer`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokenizer: Tokenizer | None = None

    def _loaded(self) -> Tokenizer:
        with self._lock:
            if self._tokenizer is None:
                tokenizer = Tokenizer.from_file(str(bundled_tokenizer_json()))
                # Budgets need the whole text's length, not the model's 512-token window.
                tokenizer.no_truncation()
                tokenizer.no_padding()
                self._tokenizer = tokenizer
            return self._tokenizer

    def count(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        return [len(e.ids) for e in self._loaded().encode_batch(texts)]
