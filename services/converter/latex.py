"""LaTeX sources (`.tex`, `.ltx`) as Markdown: the document's own words under its own
headings, without the typesetting.

What is kept: the body (between `\\begin{document}` and `\\end{document}` when the file has
them), the title and authors, the abstract, sectioning commands as headings (`\\chapter` and
`\\part` level 1, `\\section` 2, down to `\\paragraph` 5), list items, captions, footnotes and
math as written. What goes: comments, the preamble, labels, spacing and page commands, and
the markup around words (`\\emph{word}` reads `word`); links are Markdown links. Citations
and cross-references keep their keys in brackets (`[smith2020]`), which is what a reader
searching a paper by them types. Macros the file defines itself (`\\newcommand`,
`\\renewcommand`, `\\providecommand`, `\\def` with plain parameters) are expanded, so a
paper's `\\newcommand{\\sys}{FooNet}` reads FooNet wherever it writes `\\sys`. This is a
reader for finding text, not a LaTeX engine: `\\input` files (indexed as files of their own)
and tables' layout are not expanded, nor macros from packages.
"""

from __future__ import annotations

import re

_COMMENT = re.compile(r"(?<!\\)%.*")
# `\newcommand{\name}[2][default]{body}` (and re-, provide-, starred, braces optional).
_NEWCOMMAND = re.compile(
    r"\\(?:(?:re)?newcommand|providecommand)\*?\s*(?:\{\s*\\([A-Za-z]+)\s*\}|\\([A-Za-z]+))\s*"
    r"(?:\[(\d)\])?\s*(?:\[([^\]]*)\])?\s*\{"
)
# `\def\name#1#2{body}`: plain parameters only (delimited ones are left alone).
_DEF = re.compile(r"\\[egx]?def\s*\\([A-Za-z]+)\s*((?:#\d)*)\s*\{")
# Expansion stops after this many passes (macros that use macros) or this much growth.
_PASSES = 4
_GROWTH = 4
_BODY = re.compile(r"\\begin\{document\}(.*?)(?:\\end\{document\}|\Z)", re.DOTALL)
_LEVELS = {
    "part": 1,
    "chapter": 1,
    "section": 2,
    "subsection": 3,
    "subsubsection": 4,
    "paragraph": 5,
    "subparagraph": 6,
}
_HEADING = re.compile(r"\\(" + "|".join(_LEVELS) + r")\*?\s*(?:\[[^\]]*\])?\s*\{")
_UNWRAP = re.compile(
    r"\\(?:emph|textbf|textit|texttt|textsc|textsf|textrm|textup|textmd|underline|mbox|"
    r"caption|url|text)\*?\s*(?:\[[^\]]*\])?\{([^{}]*)\}"
)
_HREF = re.compile(r"\\href\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_TILDE = re.compile(r"(?<!\\)~")
_FOOTNOTE = re.compile(r"\\footnote\s*(?:\[[^\]]*\])?\{([^{}]*)\}")
_KEYS = re.compile(
    r"\\(?:cite[a-z]*|[a-z]*ref|ref)\*?\s*(?:\[[^\]]*\]\s*){0,2}\{([^{}]*)\}", re.IGNORECASE
)
_DROP_WITH_ARGUMENT = re.compile(
    r"\\(?:label|vspace|hspace|index|bibliographystyle|bibliography|thispagestyle|pagestyle|"
    r"input|include|includegraphics|setlength|addtolength|setcounter)\*?\s*(?:\[[^\]]*\])?"
    r"(?:\{[^{}]*\}){1,2}"
)
_DROP = re.compile(
    r"\\(?:maketitle|tableofcontents|listoffigures|listoftables|newpage|clearpage|"
    r"centering|noindent|medskip|bigskip|smallskip|hline|toprule|midrule|bottomrule|"
    r"appendix|raggedright|footnotesize|small|large|Large|par|xspace)\b\*?"
)
_ABSTRACT = re.compile(r"\\begin\{abstract\}")
_ITEM = re.compile(r"\s*\\item\s*(?:\[([^\]]*)\])?\s*")
_AND = re.compile(r"\s*\\and\b\s*")
_MATH = re.compile(
    r"\s*\\(begin|end)\{(?:equation|align|gather|multline|displaymath|eqnarray)\*?\}\s*"
)
_ENVIRONMENT = re.compile(r"\\(?:begin|end)\{[^{}]*\}(?:\[[^\]]*\])?(?:\{[^{}]*\})?")
_COMMAND = re.compile(r"\\[A-Za-z]+\*?")
_ESCAPED = re.compile(r"\\([%&#_${}])")
_BLANK_RUN = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_LINE_BREAK = re.compile(r"\\\\(?:\[[^\]]*\])?")


def latex_markdown(text: str, name: str) -> tuple[str, str]:
    """The Markdown of the LaTeX source `text`, and its `\\title` ('' when it has none)."""
    text = "\n".join(_COMMENT.sub("", line).rstrip() for line in text.splitlines())
    text = _expanded(text)
    title = _clean(_argument_of(text, "title"))
    authors = _clean(_AND.sub(", ", _argument_of(text, "author")))
    body = _BODY.search(text)
    text = body.group(1) if body else text
    text = _headings(text)
    text = _MATH.sub(lambda m: "\n\n$$\n" if m.group(1) == "begin" else "\n$$\n\n", text)
    for pattern, replacement in (
        (_ABSTRACT, "\n\n## Abstract\n\n"),
        (_DROP_WITH_ARGUMENT, ""),
        (_HREF, r"[\2](\1)"),
        (_KEYS, r"[\1]"),
    ):
        text = pattern.sub(replacement, text)
    text = _unwrapped(text)
    text = _ITEM.sub(lambda m: f"\n- **{m.group(1)}** " if m.group(1) else "\n- ", text)
    for pattern, replacement in ((_ENVIRONMENT, "\n"), (_DROP, ""), (_LINE_BREAK, "\n")):
        text = pattern.sub(replacement, text)
    text = _ESCAPED.sub(r"\1", text.replace("``", '"').replace("''", '"'))
    text = _TILDE.sub(" ", text)
    head = [f"# {title}"] if title else []
    if authors:
        head.append(authors)
    markdown = "\n\n".join([*head, _BLANK_RUN.sub("\n\n", text).strip()])
    return markdown.strip(), title


Macro = tuple[int, str | None, str]  # parameters, the first one's default, the body


def _definitions(text: str) -> tuple[dict[str, Macro], str]:
    """The macros `text` defines, and `text` without their definitions."""
    macros: dict[str, Macro] = {}
    spans: list[tuple[int, int]] = []
    for pattern in (_NEWCOMMAND, _DEF):
        for found in pattern.finditer(text):
            body, end = _braced(text, found.end() - 1)
            if pattern is _NEWCOMMAND:
                name = found.group(1) or found.group(2)
                count, default = int(found.group(3) or 0), found.group(4)
            else:
                name, count, default = found.group(1), found.group(2).count("#"), None
            macros[name] = (count, default, body)
            spans.append((found.start(), end))
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + text[end:]
    return macros, text


def _expanded(text: str) -> str:
    """`text` with the macros it defines expanded (module docstring), within `_PASSES`
    passes and `_GROWTH` times its length, so that a recursive macro cannot run away."""
    macros, text = _definitions(text)
    if not macros:
        return text
    use = re.compile(r"\\(" + "|".join(sorted(macros, key=len, reverse=True)) + r")(?![A-Za-z])")
    limit = _GROWTH * len(text) + 10_000
    for _ in range(_PASSES):
        parts: list[str] = []
        position = 0
        for found in use.finditer(text):
            if found.start() < position:  # inside an argument just taken
                continue
            count, default, body = macros[found.group(1)]
            arguments, end = _arguments(text, found.end(), count, default)
            for k, argument in enumerate(arguments, start=1):
                body = body.replace(f"#{k}", argument)
            parts += [text[position : found.start()], body]
            position = end
        if not parts:
            break
        expanded = "".join([*parts, text[position:]])
        if len(expanded) > limit:
            break
        text = expanded
    return text


def _arguments(text: str, at: int, count: int, default: str | None) -> tuple[list[str], int]:
    """A macro's `count` arguments from `at` (a braced group or one character each; the
    first in brackets, or `default`, when it has one), and where they end. A macro without
    parameters also takes an empty `{}` after it (`\\sys{}`)."""
    arguments: list[str] = []
    position = at
    if default is not None and count:
        rest = text[position:].lstrip()
        if rest.startswith("["):
            start = len(text) - len(rest)
            close = text.find("]", start)
            if close > 0:
                arguments.append(text[start + 1 : close])
                position = close + 1
        if not arguments:
            arguments.append(default)
    while len(arguments) < count:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            arguments.append("")
        elif text[position] == "{":
            argument, position = _braced(text, position)
            arguments.append(argument)
        else:
            arguments.append(text[position])
            position += 1
    if not count and text.startswith("{}", position):
        position += 2
    return arguments, position


def _headings(text: str) -> str:
    """Sectioning commands as Markdown headings on lines of their own."""
    parts: list[str] = []
    position = 0
    for found in _HEADING.finditer(text):
        if found.start() < position:  # inside the heading before
            continue
        argument, end = _braced(text, found.end() - 1)
        level = _LEVELS[found.group(1)]
        parts += [text[position : found.start()], f"\n\n{'#' * level} {_clean(argument)}\n\n"]
        position = end
    return "".join([*parts, text[position:]])


def _argument_of(text: str, command: str) -> str:
    found = re.search(r"\\" + command + r"\s*(?:\[[^\]]*\])?\s*\{", text)
    return _braced(text, found.end() - 1)[0] if found else ""


def _braced(text: str, opening: int) -> tuple[str, int]:
    """The text inside the braces that open at `opening`, and the index after they close
    (the rest of the text when they never do)."""
    depth = 0
    for k in range(opening, len(text)):
        if text[k] == "{" and text[k - 1] != "\\":
            depth += 1
        elif text[k] == "}" and text[k - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[opening + 1 : k], k + 1
    return text[opening + 1 :], len(text)


def _unwrapped(text: str) -> str:
    """Markup commands replaced by their argument, innermost first."""
    while True:
        unwrapped = _FOOTNOTE.sub(r" (\1)", _UNWRAP.sub(r"\1", text))
        if unwrapped == text:
            return text
        text = unwrapped


def _clean(text: str) -> str:
    """A title, author list or heading on one line, its markup gone."""
    while (start := text.find("\\thanks{")) >= 0:
        text = text[:start] + text[_braced(text, start + len("\\thanks"))[1] :]
    text = _LINE_BREAK.sub(" ", _unwrapped(_KEYS.sub(r"[\1]", text)))
    text = _COMMAND.sub(" ", text)  # a macro of the file's own, its argument kept
    text = _ESCAPED.sub(r"\1", text.replace("~", " "))
    return " ".join(text.replace("{", "").replace("}", "").split()).strip(" ,")
