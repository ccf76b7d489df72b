"""Subtitles and transcripts (`.vtt` WebVTT, `.srt` SubRip) as Markdown a search finds words
in: the cues' text in paragraphs, each starting with its time, `[00:12:05]`.

Meeting tools export transcripts in these formats (Teams as WebVTT with the speaker in a
voice span, `<v Jane Doe>`; Zoom with the name before the words, `Jane Doe: Hello`), and
video sites their captions. The cue numbers, timings, positions and styling are left out.
Consecutive cues make one paragraph until the speaker changes, the talk pauses (`_PAUSE_S`),
or the paragraph is long enough to end at a sentence (`_PARAGRAPH`), or, without punctuation
(automatic captions), long enough (`_PARAGRAPH_MAX`), so a long talk still has a time every
minute or so. Rolling captions, where each cue repeats the line before it, are written once.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from libs.errors import ConversionError

_TIMING = re.compile(
    r"^\s*(?:(\d+):)?(\d{1,2}):(\d{2})[.,](\d{1,3})\s*-->\s*(?:(\d+):)?(\d{1,2}):(\d{2})[.,](\d{1,3})"
)
_VOICE = re.compile(r"<v(?:\.[^\s>]*)?\s+([^>]+)>")
_TAG = re.compile(r"<[^>]*>")
# A speaker's name before the words: up to four words, the first capitalised.
_NAMED = re.compile(r"^([A-Z][\w.'-]*(?: [\w.'-]+){0,3}): (?=\S)")
_SPACE = re.compile(r"\s+")
# Blocks of a WebVTT file that are not cues.
_NOT_CUES = ("WEBVTT", "NOTE", "STYLE", "REGION")
_PAUSE_S = 4.0
_PARAGRAPH = 600  # characters: a paragraph this long ends at its next sentence end...
_PARAGRAPH_MAX = 1500  # ...or at this length, for captions without punctuation
_SENTENCE_END = (".", "?", "!", "…", "。", "？", "！")


@dataclass
class _Cue:
    start: float
    end: float
    speaker: str
    lines: list[str]


def subtitles_markdown(text: str, name: str) -> tuple[str, str]:
    """The transcript in `text` (a decoded .vtt or .srt file) as Markdown paragraphs, and
    no title (the file's name serves)."""
    cues = _named_speakers(_cues(text))
    if not cues:
        raise ConversionError(
            f"could not convert '{name}': it holds no cues (no 'start --> end' timing lines); "
            "check that it is a WebVTT or SubRip subtitle file"
        )
    paragraphs: list[str] = []
    words: list[str] = []
    start, speaker, last_end, last_line = 0.0, "", 0.0, ""
    for cue in cues:
        lines = [line for line in cue.lines if line != last_line]  # rolling captions
        if not lines:
            continue
        last_line = cue.lines[-1]
        joined = " ".join(words)
        if words and (
            cue.speaker != speaker
            or cue.start - last_end > _PAUSE_S
            or (len(joined) >= _PARAGRAPH and joined.endswith(_SENTENCE_END))
            or len(joined) >= _PARAGRAPH_MAX
        ):
            paragraphs.append(_paragraph(start, speaker, joined))
            words = []
        if not words:
            start, speaker = cue.start, cue.speaker
        words.extend(lines)
        last_end = cue.end
    if words:
        paragraphs.append(_paragraph(start, speaker, " ".join(words)))
    return "\n\n".join(paragraphs), ""


def _paragraph(start: float, speaker: str, text: str) -> str:
    seconds = int(start)
    stamp = f"[{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}]"
    return f"{stamp} **{speaker}:** {text}" if speaker else f"{stamp} {text}"


def _cues(text: str) -> list[_Cue]:
    """The cues in reading order. A cue runs from its timing line to the next one; a line
    before a timing line is that cue's id. Blank lines are not trusted to end a cue (caption
    sites write cues with a line of one space, and files edited by hand blank lines with
    spaces in them), but a NOTE, STYLE or REGION block after one is left out."""
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    cues: list[_Cue] = []
    skipping = after_blank = False
    for k, line in enumerate(lines):
        timing = _TIMING.match(line)
        if timing:
            numbers = timing.groups()
            cues.append(_Cue(_seconds(numbers[:4]), _seconds(numbers[4:]), "", []))
            skipping = after_blank = False
        elif not line.strip():
            after_blank = True
        elif after_blank and line.startswith(_NOT_CUES):
            skipping = True
        elif cues and not skipping and not (k + 1 < len(lines) and _TIMING.match(lines[k + 1])):
            cue = cues[-1]
            voice = _VOICE.search(line)
            if voice:
                cue.speaker = _SPACE.sub(" ", voice.group(1)).strip()
            line = _SPACE.sub(" ", html.unescape(_TAG.sub("", line))).strip()
            if line:
                cue.lines.append(line)
            after_blank = False
    return [cue for cue in cues if cue.lines]


def _named_speakers(cues: list[_Cue]) -> list[_Cue]:
    """Speakers named in the text, as Zoom writes them (`Jane Doe: Hello`), when no cue has a
    voice span and at least half of the cues start so: the name is taken off the line."""
    if any(cue.speaker for cue in cues):
        return cues
    named = [_NAMED.match(cue.lines[0]) for cue in cues]
    if sum(found is not None for found in named) * 2 < len(cues):
        return cues
    for cue, found in zip(cues, named, strict=True):
        if found is not None:
            cue.speaker = found.group(1)
            cue.lines[0] = cue.lines[0][found.end() :]
    return [cue for cue in cues if any(cue.lines)]


def _seconds(parts: tuple[str | None, ...]) -> float:
    hours, minutes, seconds, fraction = parts
    return (
        int(hours or 0) * 3600
        + int(minutes or 0) * 60
        + int(seconds or 0)
        + int((fraction or "0").ljust(3, "0")) / 1000
    )
