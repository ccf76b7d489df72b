"""LaTeX sources (`.tex`, `.ltx`) as Markdown: the document's own words under its own
headings, without the typesetting.

What is kept: the body (between `\\begin{document}` and `\\end{document}` when the file has
them), the title and authors, the abstract, sectioning commands as headings (`\\chapter` and
`\\part` level 1, `\\section` 2, down to `\\paragraph` 5), list items, captions, footnotes and
math as written. What goes: comments, the preamble, labels, spacing and page commands, and
the markup around words (`\\emph{word}` reads `word`); links are Markdown links. Citations
and cross-references keep their keys in brackets (`[smith2020]`), which is what a reader
searching a paper by them types. This is a reader for finding text, not a LaTeX engine:
macros the file defines itself, `\\input` files and tables' layout are not expanded.
"""

from __future__ import annotations

import re

_COMMENT = re.compile(r"(?<!\\)%.*")
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
    r"appendix|raggedright|footnotesize|small|large|Large|par)\b\*?"
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
