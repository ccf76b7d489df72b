"""Token-aware, structure-aware chunking of Markdown.

The embedding model sees at most `max_tokens` tokens ([CLS] and [SEP] included) and silently
drops the rest, so every chunk is measured with the model's own tokenizer and none is longer.

1. The text is cut into page spans (PDF pages, slides, sheets) and, inside each, into
   sections at Markdown headings (ATX `#`..`######` and setext underlines, ignoring fenced
   code), or in source code at definitions (`code`). Each section remembers its heading
   path, H1 first.
2. Each section is tokenized once (one batch call for the whole document) and the token
   offsets give every possible cut its strength: paragraph > sentence > line > word >
   pre-token > sub-word.
3. Small neighbouring sections of the same page are packed together; a section too long for
   one chunk is cut greedily at the strongest boundary in the second half of the token
   window, and the next piece starts about `overlap_tokens` earlier, at a line start if the
   overlap holds one (a table row, a list item), else at a word start. A piece that starts
   among a Markdown table's rows repeats the table's header row and rule line before them
   (`libs.tables`; room is left for it in every window), so each chunk of a long table, a CSV or
   a sheet, says what its columns are.
4. Every chunk is measured again with its special tokens; the rare one that re-tokenizes
   longer than its slice is cut again, so the limit holds without exception.

Chunks are slices of the input (after a repeated table header): no text is lost except the
whitespace at a cut, and chunks that hold only markup (table rules, comments) are skipped.
Each remembers where it starts, so it reports its first and last line in the Markdown
(`LineIndex`, 1-based).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import IntEnum

from tokenizers import Encoding, Tokenizer

from libs.contracts import Chunk
from libs.modelfiles import bundled_tokenizer
from libs.tables import tables_in
from services.converter.code import DefinitionScanner
from services.converter.headings import HeadingScanner
from services.converter.lines import LineIndex

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_WORD_CHAR = re.compile(r"[^\W_]")
_SENTENCE_END = frozenset(".!?…")
_CJK_SENTENCE_END = frozenset("。！？")
_CLOSERS = frozenset("\"'”’»)]")


class Cut(IntEnum):
    """How good a place between two tokens is for ending a chunk."""

    SUBWORD = 0
    PRETOKEN = 1
    WORD = 2
    LINE = 3
    SENTENCE = 4
    PARAGRAPH = 5


@dataclass(frozen=True)
class PageSpan:
    """Characters `start:end` of the Markdown belong to `page` (0 = no page)."""

    page: int
    start: int
    end: int


@dataclass(frozen=True)
class _Section:
    span: int
    page: int
    start: int
    end: int
    headings: tuple[str, ...]


def has_text(text: str) -> bool:
    """Whether `text` holds anything but whitespace and markup."""
    return _WORD_CHAR.search(_COMMENT.sub("", text)) is not None


def _common_prefix(paths: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
    prefix = paths[0]
    for path in paths[1:]:
        size = 0
        for a, b in zip(prefix, path, strict=False):
            if a != b:
                break
            size += 1
        prefix = prefix[:size]
    return prefix


@dataclass
class _Piece:
    text: str
    page: int
    headings: tuple[str, ...]
    start: int  # where `text` starts in the Markdown
    header: str = ""  # the table header the chunk repeats before `text` (`libs.tables`)

    def stripped(self, text: str, offset: int) -> _Piece:
        """The piece of `text` (found at `offset` in this piece) without outer whitespace."""
        lead = len(text) - len(text.lstrip())
        start = self.start + offset + lead
        return _Piece(text.strip(), self.page, self.headings, start, self.header)


class Chunker:
    """Cuts Markdown into chunks of at most `max_tokens` model tokens. Thread-compatible:
    one instance per worker process, tokenizer loaded once."""

    def __init__(self, tokenizer: Tokenizer, max_tokens: int, overlap_tokens: int) -> None:
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self.max_tokens = max_tokens
        specials = len(tokenizer.encode("").ids)
        self._budget = max_tokens - specials
        if self._budget < 8:
            raise ValueError(f"chunk_max_tokens={max_tokens} leaves no room for text")
        # Overlap beyond a third of a chunk would mostly repeat text.
        self.overlap_tokens = min(overlap_tokens, self._budget // 3)

    @classmethod
    def bundled(cls, max_tokens: int, overlap_tokens: int) -> Chunker:
        return cls(bundled_tokenizer(), max_tokens, overlap_tokens)

    def count_tokens(self, text: str) -> int:
        """Tokens the model sees for `text`, special tokens included."""
        return len(self._tokenizer.encode(text).ids)

    def chunk(
        self, markdown: str, pages: Sequence[PageSpan] | None = None, *, code: bool = False
    ) -> list[Chunk]:
        """`code`: the text is source code, cut at definitions rather than headings."""
        if pages is None:
            pages = [PageSpan(0, 0, len(markdown))]
        sections = self._sections(
            markdown, pages, DefinitionScanner() if code else HeadingScanner()
        )
        texts = [markdown[s.start : s.end] for s in sections]
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        pieces = self._pack(markdown, sections, encodings)
        return self._finish(pieces, LineIndex(markdown))

    # ------------------------------------------------------------------ sections

    def _sections(
        self, markdown: str, pages: Sequence[PageSpan], scanner: HeadingScanner | DefinitionScanner
    ) -> list[_Section]:
        sections: list[_Section] = []
        stack: list[tuple[int, str]] = []
        for index, span in enumerate(pages):
            lines = markdown[span.start : span.end].split("\n")
            position = span.start
            section_start = span.start
            for k, line in enumerate(lines):
                line_start = position
                position += len(line) + 1
                found = scanner.heading(lines, k)
                if found is None:
                    continue
                # Blank or markup-only text before a heading joins the heading's section
                # instead of making a section (and a heading path) of its own.
                if has_text(markdown[section_start:line_start]):
                    path = tuple(text for _, text in stack)
                    sections.append(_Section(index, span.page, section_start, line_start, path))
                    section_start = line_start
                level, text = found
                while stack and stack[-1][0] >= level:
                    stack.pop()
                if text:  # empty: the end of the code definitions from `level` on
                    stack.append((level, text))
            if span.end > section_start:
                path = tuple(text for _, text in stack)
                sections.append(_Section(index, span.page, section_start, span.end, path))
        return sections

    # ------------------------------------------------------------------- packing

    def _pack(
        self, markdown: str, sections: list[_Section], encodings: list[Encoding]
    ) -> list[_Piece]:
        pieces: list[_Piece] = []
        group: list[_Section] = []
        group_tokens = 0

        def flush() -> None:
            nonlocal group_tokens
            if group:
                text = markdown[group[0].start : group[-1].end]
                headings = _common_prefix([s.headings for s in group])
                pieces.append(_Piece(text, group[0].page, headings, group[0].start))
            group.clear()
            group_tokens = 0

        for section, encoding in zip(sections, encodings, strict=True):
            size = len(encoding.ids)
            if group and (group[-1].span != section.span or group_tokens + size > self._budget):
                # A short lead-in (typically a lone heading) rides along with a long section
                # rather than becoming a chunk of its own.
                if (
                    size > self._budget
                    and group[-1].span == section.span
                    and group_tokens <= self._budget // 4
                ):
                    lead = group[0]
                    lead_headings = _common_prefix([s.headings for s in [*group, section]])
                    group.clear()
                    group_tokens = 0
                    text = markdown[lead.start : section.end]
                    encoding = self._tokenizer.encode(text, add_special_tokens=False)
                    for start, end, header in self._split_section(text, encoding):
                        inside = start >= section.start - lead.start
                        headings = section.headings if inside else lead_headings
                        pieces.append(
                            _Piece(
                                text[start:end], section.page, headings, lead.start + start, header
                            )
                        )
                    continue
                flush()
            if size > self._budget:
                text = markdown[section.start : section.end]
                for start, end, header in self._split_section(text, encoding):
                    pieces.append(
                        _Piece(
                            text[start:end],
                            section.page,
                            section.headings,
                            section.start + start,
                            header,
                        )
                    )
                continue
            group.append(section)
            group_tokens += size
        flush()
        return pieces

    def _finish(self, pieces: list[_Piece], lines: LineIndex) -> list[Chunk]:
        """Measure every chunk with its special tokens; cut again the few that overflow."""
        kept = [p.stripped(p.text, 0) for p in pieces if has_text(p.text)]
        texts = [p.header + p.text for p in kept]
        counts = [len(e.ids) for e in self._tokenizer.encode_batch(texts)]
        measured: list[tuple[_Piece, int]] = []
        for piece, count in zip(kept, counts, strict=True):
            if count > self.max_tokens and piece.header:
                # The rare window the header does not fit beside after all: without it.
                piece = replace(piece, header="")
                count = self.count_tokens(piece.text)
            if count <= self.max_tokens:
                measured.append((piece, count))
            else:
                measured.extend(self._refit(piece, count))
        return [
            Chunk(
                chunk_index=index,
                text=piece.header + piece.text,
                page=piece.page,
                headings=list(piece.headings),
                token_count=count,
                start_line=lines.line_of(piece.start),
                end_line=lines.line_of(piece.start + max(len(piece.text) - 1, 0)),
            )
            for index, (piece, count) in enumerate(measured)
        ]

    def _refit(self, piece: _Piece, count: int) -> list[tuple[_Piece, int]]:
        """A piece whose text re-tokenizes longer than its slice (a cut inside a word can do
        that) is split again with a budget shrunk by the excess, until every part fits."""
        encoding = self._tokenizer.encode(piece.text, add_special_tokens=False)
        budget = max(1, min(self._budget, len(encoding.ids)) - (count - self.max_tokens))
        fitted: list[tuple[_Piece, int]] = []
        for start, end in self._split(piece.text, encoding, budget):
            if not has_text(piece.text[start:end]):
                continue
            part = piece.stripped(piece.text[start:end], start)
            size = self.count_tokens(part.text)
            if size <= self.max_tokens:
                fitted.append((part, size))
            else:
                fitted.extend(self._refit(part, size))
        return fitted

    # ------------------------------------------------------------------ splitting

    def _split_section(self, text: str, encoding: Encoding) -> list[tuple[int, int, str]]:
        """`_split` of a section too long for one chunk, each window with the header of the
        table it starts in (`libs.tables`), room for which is left in every window; a header
        longer than a quarter of the budget is not repeated."""
        repeated = {
            table: size
            for table in tables_in(text)
            if (size := len(self._tokenizer.encode(table.header, add_special_tokens=False).ids))
            <= self._budget // 4
        }
        reserve = max(repeated.values(), default=0)
        return [
            (start, end, next((t.header for t in repeated if t.header_for(start)), ""))
            for start, end in self._split(text, encoding, self._budget - reserve)
        ]

    def _split(self, text: str, encoding: Encoding, budget: int) -> list[tuple[int, int]]:
        """Character spans of consecutive, overlapping windows of at most `budget` tokens."""
        offsets = encoding.offsets
        count = len(offsets)
        if count == 0:
            return [(0, len(text))]
        cuts = self._cut_strengths(text, encoding)
        spans: list[tuple[int, int]] = []
        start = 0
        floor = 0
        while True:
            if count - start <= budget:
                spans.append((offsets[start][0], offsets[count - 1][1]))
                return spans
            end = self._best_cut(cuts, start, floor, budget)
            spans.append((offsets[start][0], offsets[end - 1][1]))
            floor = end
            start = self._overlap_start(cuts, start, end)

    def _best_cut(self, cuts: list[int], start: int, floor: int, budget: int) -> int:
        """Largest cut in (floor, start+budget] of the strongest kind; structural cuts only
        count in the second half of the window, so chunks stay well filled."""
        high = start + budget
        half = max(floor + 1, start + budget // 2)
        best = [0] * (Cut.PARAGRAPH + 1)
        for position in range(high, floor, -1):
            strength = cuts[position]
            for kind in range(strength + 1):
                if not best[kind]:
                    best[kind] = position
            if strength == Cut.PARAGRAPH and position >= half:
                return position
        for kind in (Cut.PARAGRAPH, Cut.SENTENCE, Cut.LINE):
            if best[kind] >= half:
                return best[kind]
        for kind in (Cut.WORD, Cut.PRETOKEN, Cut.SUBWORD):
            if best[kind]:
                return best[kind]
        return high

    def _overlap_start(self, cuts: list[int], start: int, end: int) -> int:
        if self.overlap_tokens == 0:
            return end
        first = max(end - self.overlap_tokens, start + 1)
        # A line start if the overlap holds one (a table row, a list item), else a word's.
        for kind in (Cut.LINE, Cut.WORD, Cut.PRETOKEN):
            for position in range(first, end):
                if cuts[position] >= kind:
                    return position
        return end

    @staticmethod
    def _cut_strengths(text: str, encoding: Encoding) -> list[int]:
        """cuts[i]: how good it is to end a chunk just before token i (i = len: the end)."""
        offsets = encoding.offsets
        words = encoding.word_ids
        count = len(offsets)
        cuts = [int(Cut.SUBWORD)] * (count + 1)
        cuts[0] = cuts[count] = Cut.PARAGRAPH
        for i in range(1, count):
            previous_end = offsets[i - 1][1]
            gap = text[previous_end : offsets[i][0]]
            last = text[previous_end - 1] if previous_end > 0 else ""
            if gap:
                newlines = gap.count("\n")
                strength = Cut.PARAGRAPH if newlines >= 2 else Cut.LINE if newlines else Cut.WORD
                if strength < Cut.SENTENCE and (
                    last in _SENTENCE_END
                    or (
                        last in _CLOSERS
                        and previous_end > 1
                        and text[previous_end - 2] in _SENTENCE_END
                    )
                    or last in _CJK_SENTENCE_END
                ):
                    strength = Cut.SENTENCE
            elif last in _CJK_SENTENCE_END:
                strength = Cut.SENTENCE
            else:
                strength = Cut.PRETOKEN if words[i] != words[i - 1] else Cut.SUBWORD
            cuts[i] = strength
        return cuts
