"""A web page's content without the page around it: its menus, site header and footer,
sidebars, search forms and cookie banners, which repeat on every page of a site and, indexed,
turn up as hits for any query about the site. markitdown converts a page's whole `<body>`.

The content is the page's one `<main>` element (or `role="main"`), else its one `<article>`,
else the body; inside it, elements that are navigation or page furniture by their HTML
element (`nav`, `aside`, `form`...) or their ARIA role (navigation, menu, toolbar...) are
dropped, and so is anything marked hidden, and a dropdown: the `div`, `span` or `li` around a
control that opens a menu (`aria-haspopup`), with the menu beside it (Wikipedia's language
list, a results page's filters), unless it holds a heading. A `<header>` or `<footer>` is
dropped only outside an article, where it is the site's (inside one it holds the article's
title or byline), and a header holding an `<h1>` stays. A heading's link to itself (a
permalink) is dropped, or unwrapped when it holds the title, and so is a note's link back to
where it was cited (Wikipedia's `^`, Pandoc's `↩`). When the chosen element holds less
than a fifth of the body's text, the body is taken instead (a `<main>` around a lone form,
with the text elsewhere). The page's `<head>` stays, so its `<title>` is still the
document's title.
"""

from __future__ import annotations

from bs4 import BeautifulSoup, Tag

_FURNITURE = ("nav", "aside", "form", "dialog", "template", "noscript", "script", "style")
_FURNITURE_ROLES = (
    "navigation", "banner", "contentinfo", "search", "complementary", "dialog", "menu",
    "menubar", "toolbar",
)  # fmt: skip
# Where a control that opens a menu sits (its popup beside it): the widget, dropped whole.
_WIDGETS = ("div", "span", "li")
_SITE_PARTS = ("header", "footer")
_MIN_SHARE = 0.2
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_MARKS = "\u200b\u00b6#§🔗⚓ "  # what a heading's link to itself shows, if it shows anything
_BACK = frozenset({"^", "↑", "↩", "↩\ufe0e", "↩\ufe0f", "⤴"})  # Wikipedia's, Pandoc's notes


def main_content(html: str) -> str:
    """`html` with only the page's content in its body (see the module docstring); the
    page as it is when it has no body."""
    soup = BeautifulSoup(html, "html.parser")
    body = soup.body
    if body is None:
        return html
    root = _content_root(body)
    if root is not body and len(_text(root)) < _MIN_SHARE * len(_text(body)):
        root = body
    _drop_furniture(root, inside_article=root is not body)
    if root is not body:
        root.extract()
        body.clear()
        body.append(root)
    return str(soup)


def _content_root(body: Tag) -> Tag:
    for found in (
        body.find_all("main") or body.find_all(role="main"),
        body.find_all("article"),
    ):
        if len(found) == 1 and isinstance(found[0], Tag):
            return found[0]
    return body


def _drop_furniture(root: Tag, *, inside_article: bool) -> None:
    elements = root.find_all(True)
    doomed = [
        element
        for element in elements
        if element.name in _FURNITURE
        or (element.get("role") or "") in _FURNITURE_ROLES
        or element.has_attr("hidden")
        or element.get("aria-hidden") == "true"
        or (
            element.name in _SITE_PARTS
            and not _in_article(element, root, inside_article)
            and element.find("h1") is None  # a page's own title in its header stays
        )
    ]
    doomed += [w for w in (_dropdown(e) for e in elements) if w is not None and w is not root]
    for element in doomed:
        if not element.decomposed:
            element.decompose()
    for heading in root.find_all(_HEADINGS):
        _without_self_links(heading)
    for link in root.find_all("a", href=True):  # a note's way back to where it was cited
        if str(link["href"]).startswith("#") and _text(link) in _BACK:
            link.decompose()


def _without_self_links(heading: Tag) -> None:
    """A heading's links to itself, as documentation sites write them (Sphinx's and MkDocs'
    `¶`, Docusaurus's zero-width `#` link): dropped when they show only a mark, unwrapped to
    their text when they hold the title."""
    for link in heading.find_all("a", href=True):
        if not str(link["href"]).startswith("#"):
            continue
        if _text(link).strip(_MARKS):
            link.unwrap()
        else:
            link.decompose()


def _dropdown(control: Tag) -> Tag | None:
    """The widget around a control that opens a menu, the menu beside the control (the
    content's root itself is never one)."""
    widget = control.parent if control.has_attr("aria-haspopup") else None
    if widget is None or widget.name not in _WIDGETS or widget.find(_HEADINGS) is not None:
        return None
    return widget


def _in_article(element: Tag, root: Tag, root_is_article: bool) -> bool:
    """Whether `element` sits in an article (or the page's main content) below `root`."""
    for parent in element.parents:
        if parent is root:
            return root_is_article
        if parent.name in ("article", "main") or parent.get("role") == "main":
            return True
    return False


def _text(element: Tag) -> str:
    return " ".join(element.get_text(" ").split())
