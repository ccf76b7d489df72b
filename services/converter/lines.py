"""Character offsets to line numbers in one text: the positions a chunk reports."""

from __future__ import annotations

from bisect import bisect_right


class LineIndex:
    """The 1-based line of any character offset in `text`, by binary search over where
    each line starts (one pass to build, O(log lines) a look-up)."""

    def __init__(self, text: str) -> None:
        self._starts = [0]
        position = text.find("\n")
        while position != -1:
            self._starts.append(position + 1)
            position = text.find("\n", position + 1)

    def line_of(self, offset: int) -> int:
        return bisect_right(self._starts, offset)
