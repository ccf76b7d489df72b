"""Source code as documents: the file's lines as they are, its definitions as headings.

A code file's Markdown is its text, decoded and with line ends normalised and nothing else,
so every chunk's `start_line` and `end_line` are the lines of the file itself. Its title is
its file name. The chunker cuts sections at definitions instead of Markdown headings (which a
`# comment` would fake): a line that opens a class, function, method, interface, struct,
enum, trait, impl block, module or namespace, in the spellings of the common languages
(also a C or C++ function, which has no keyword, and a JavaScript method, constructor or
getter), or an SQL `CREATE` of a table, view, function or procedure. Each chunk's heading
path is the definitions it sits in, outermost first, by indentation ("class Chunker" >
"def chunk(...)"). A definition line ends as code does (`{`, `:`, `(`, `=`...), so prose in
a comment is not one. A definition ends at the next statement indented no more than it (not
a closing bracket or `end`, a comment or a decorator): statements after it get the path of
the definitions still open, as a heading of empty text tells the chunker.
"""

from __future__ import annotations

import re

_MODIFIERS = (
    r"(?:(?:export|default|public|private|protected|internal|static|final|abstract|sealed|"
    r"async|override|virtual|extern|inline|unsafe|const|open|data|suspend|partial|"
    r"pub(?:\([\w:]+\))?|@\w+(?:\([^)]*\))?)\s+)*"
)
_KEYWORD = (
    r"(?:class|def|function\*?|func|fun|fn|interface|struct|enum|trait|impl|mod|module|"
    r"namespace|object|protocol|extension|record|union|type)"
)
# Words that open a statement, not a definition, where a name and parentheses follow, and
# the marks a comment line starts with.
_STATEMENT = (
    r"(?!(?:if|elif|for|foreach|while|switch|catch|return|else|new|throw|case|do|await|"
    r"yield|using|lock|sizeof|typeof|delete|with|function|print|assert|raise|except|not|"
    r"lambda|import|from|goto|echo|puts)\b|[*/#])"
)
# A C, C++ or C# function without a keyword: a return type, the name, the parameters, then
# the body's brace or nothing (the brace on the next line); a call or prototype ends in `;`.
_C_FUNCTION = (
    rf"{_STATEMENT}(?:[A-Za-z_][\w*&:<>\[\],]*\s+)+[*&]*[~\w:]+\s*\([^;{{}}]*\)\s*"
    r"(?:const\s*|noexcept\s*|override\s*|->\s*[\w:<>*&]+\s*)*\{?\s*$"
)
# A JavaScript or TypeScript method in a class or an object literal, a constructor, a getter:
# a name and parameters that open a block on the same line.
_METHOD = (
    rf"{_STATEMENT}(?:(?:async|static|get|set|readonly)\s+|\*\s*)*[A-Za-z_$#][\w$]*\s*"
    r"\([^;{}()]*\)\s*(?::\s*[^={};()]+)?\{\s*$"
)
_DEFINITION = re.compile(
    rf"^(?P<indent>[ \t]*){_MODIFIERS}"
    # A keyword, then the name (Go: func (r *T) Name); `classify` is no `class`.
    rf"(?:{_KEYWORD}(?![\w$])\s*(?:<[^>]*>\s*)?(?:\([^)]*\)\s*)?[A-Za-z_$][\w$]*"
    r"|(?:const|let|var)\s+[A-Za-z_$][\w$]*\s*(?::[^=]+)?=\s*(?:async\s+)?"
    r"(?:function\b|\([^)]*\)\s*(?::[^=]+)?=>|[A-Za-z_$][\w$]*\s*=>)"
    r"|(?:(?:public|private|protected|internal|static)\s+)+[\w<>\[\],.?\s]+?\s+\w+\s*\("
    rf"|{_C_FUNCTION}|{_METHOD}"
    r"|(?P<sql>(?i:create\s+(?:or\s+replace\s+)?(?:table|view|function|procedure)\b)))"
)
# What a definition line ends with (a block or a signature going on); prose in a comment
# ("class of errors.") does not.
_OPENERS = ("{", ":", "(", ",", "=", ">", ")")
_INDENT_TAB = 4
# Lines at a definition's indentation that do not end it: a block's bracket (Allman's `{`)
# or `end`, the rest of a signature (`) -> None:`), a comment, a decorator or annotation.
_GOES_ON = re.compile(r"\s*(?:[{}()\[\]]|end\b|#|//|/\*|\*|--|@|<!--)")
_MAX_HEADING = 120


def _definition_text(line: str) -> str:
    """How a definition line reads as a heading: trimmed, without the block opener."""
    text = line.strip().rstrip("{:").rstrip()
    return text if len(text) <= _MAX_HEADING else text[: _MAX_HEADING - 1] + "…"


class DefinitionScanner:
    """Walks a code file's lines like `headings.HeadingScanner` walks Markdown: a definition
    is a heading whose level is one more than the definitions indented less around it."""

    def __init__(self) -> None:
        self._open: list[int] = []  # the indentation of each enclosing definition

    def heading(self, lines: list[str], k: int) -> tuple[int, str] | None:
        """(level, text) for a definition; (level, "") for a statement that ends the open
        definitions from that level on; None for any other line."""
        line = lines[k]
        match = _DEFINITION.match(line)
        if match is None or not (match.group("sql") or line.rstrip().endswith(_OPENERS)):
            return self._end(line)
        indent = len(match.group("indent").expandtabs(_INDENT_TAB))
        while self._open and self._open[-1] >= indent:
            self._open.pop()
        self._open.append(indent)
        return min(len(self._open), 6), _definition_text(line)

    def _end(self, line: str) -> tuple[int, str] | None:
        if not self._open or not line.strip() or _GOES_ON.match(line):
            return None
        expanded = line.expandtabs(_INDENT_TAB)
        indent = len(expanded) - len(expanded.lstrip())
        if indent > self._open[-1]:
            return None
        while self._open and self._open[-1] >= indent:
            self._open.pop()
        return min(len(self._open) + 1, 6), ""
