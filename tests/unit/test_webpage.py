"""A web page's content without its menus, site header and footer, sidebars and banners
(`services.converter.webpage`), on a page written here and on a real one from shared/data."""

from __future__ import annotations

from bs4 import BeautifulSoup

from services.converter.webpage import main_content
from tests.conftest import REPO

PAGE = """<!doctype html><html><head><title>Otter care</title></head><body>
<header><a href="/">Zoo home</a> <a href="#main">Skip to content</a></header>
<nav><ul><li><a href="/a">Animals</a></li><li><a href="/b">Tickets</a></li></ul></nav>
<div role="dialog">We use cookies. Accept all?</div>
<main id="main"><article>
  <header><h1>Feeding otters</h1><p>By the keepers</p></header>
  <p>Otters eat fish twice a day.</p>
  <aside>Related: beavers</aside>
  <p hidden>Internal: restock on Friday</p>
  <form><input name="q"> Search the zoo</form>
  <footer>Filed under: mammals</footer>
</article></main>
<aside>Popular pages</aside>
<footer>Copyright 2026 City Zoo</footer>
</body></html>"""


def _text(html: str) -> str:
    return " ".join(BeautifulSoup(html, "html.parser").get_text(" ").split())


def test_the_page_furniture_is_left_out_and_the_content_kept() -> None:
    text = _text(main_content(PAGE))
    assert text.startswith("Otter care Feeding otters By the keepers Otters eat fish")
    assert "Filed under: mammals" in text  # the article's own footer
    for furniture in (
        "Zoo home", "Animals", "cookies", "beavers", "restock", "Search the zoo",
        "Popular pages", "Copyright",
    ):  # fmt: skip
        assert furniture not in text, furniture


def test_without_a_main_element_the_body_less_its_furniture() -> None:
    page = PAGE.replace('<main id="main">', "<div>").replace("</main>", "</div>")
    page = page.replace("<article>", "<section>").replace("</article>", "</section>")
    text = _text(main_content(page))
    assert "Otters eat fish" in text and "Feeding otters" in text  # a header with the h1
    assert "Zoo home" not in text  # the site's header
    assert "Animals" not in text and "Copyright" not in text


def test_a_main_with_little_of_the_text_is_not_taken_alone() -> None:
    story = "<p>" + "The river otter story goes on. " * 40 + "</p>"
    page = f"<html><body><main><p>Sign in</p></main><div>{story}</div><nav>Menu</nav></body></html>"
    text = _text(main_content(page))
    assert "Sign in" in text and "river otter story" in text and "Menu" not in text
    assert main_content("<p>no body here</p>") == "<p>no body here</p>"


def test_a_real_blog_page_starts_at_its_post() -> None:
    page = (REPO.parent / "shared/data/files/markitdown/test_blog.html").read_text("utf-8")
    text = _text(main_content(page))
    assert "Does Model and Inference Parameter Matter" in text
    assert "Skip to main content" not in text and "Copyright © 2024" not in text
    assert "Just by tuning the inference parameters" in text


def test_a_menu_that_a_control_opens_is_left_out_and_a_button_in_a_paragraph_is_not() -> None:
    """A dropdown in the page's own header (a checkbox or button with `aria-haspopup`, its
    label and its list beside it), and menus by their role; a paragraph with such a button
    keeps its text."""
    page = """<html><body><main><header><h1>Otters</h1>
      <div class="dropdown"><input type="checkbox" aria-haspopup="true"><label>Languages</label>
        <div><ul><li><a href="/de">Deutsch</a></li><li><a href="/fr">Français</a></li></ul></div>
      </div></header>
      <ul role="menu"><li>Print this page</li></ul>
      <p>Otters hold hands while they sleep.
        <button aria-haspopup="dialog">Share</button></p></main></body></html>"""
    text = _text(main_content(page))
    assert text == "Otters Otters hold hands while they sleep. Share"


def test_a_wikipedia_article_without_its_language_list() -> None:
    page = (REPO.parent / "shared/data/files/markitdown/test_wikipedia.html").read_text("utf-8")
    text = _text(main_content(page))
    assert "Microsoft Corporation is an American multinational" in text
    assert "Afrikaans" not in text and "Edit links" not in text


def test_a_control_directly_in_the_content_root_leaves_the_content() -> None:
    page = """<html><body><div role="main"><button aria-haspopup="menu">Options</button>
      <p>Otters live in rivers.</p></div><footer>Site footer</footer></body></html>"""
    assert _text(main_content(page)) == "Options Otters live in rivers."


def test_a_headings_links_to_itself_are_not_its_title() -> None:
    """Sphinx's and MkDocs' `¶`, Docusaurus's zero-width link (the shared blog page), a
    heading that is a link to itself; links elsewhere, and in the text, stay."""
    page = (
        '<html><body><main><h2 id="a">Install<a class="headerlink" href="#a">¶</a></h2>'
        '<h3><a href="#b">Usage notes</a></h3><p>See <a href="#a">install</a>.</p>'
        '<h2>Links <a href="https://example.org">out</a></h2></main></body></html>'
    )
    body = BeautifulSoup(main_content(page), "html.parser").body
    assert body is not None
    headings = [
        (h.get_text(), [a["href"] for a in h.find_all("a")]) for h in body.find_all(["h2", "h3"])
    ]
    assert headings == [
        ("Install", []),
        ("Usage notes", []),
        ("Links out", ["https://example.org"]),
    ]
    assert body.p is not None and body.p.a is not None  # a link in the text stays
    blog = (REPO.parent / "shared/data/files/markitdown/test_blog.html").read_text("utf-8")
    assert "Direct link to" not in main_content(blog).split("<h2", 1)[1]


def test_a_notes_link_back_to_where_it_was_cited_is_left_out() -> None:
    page = (
        '<html><body><main><p>Otters hold hands.<sup><a href="#fn1">1</a></sup></p><ol>'
        '<li id="fn1">Seen in 2024. <a href="#ref1">↩</a></li>'
        '<li><span><a href="#cite_ref-2">^</a></span> A field guide.</li></ol>'
        "</main></body></html>"
    )
    body = BeautifulSoup(main_content(page), "html.parser").body
    assert body is not None
    assert [a["href"] for a in body.find_all("a")] == ["#fn1"]  # the citation itself stays
    assert _text(str(body)) == "Otters hold hands. 1 Seen in 2024. A field guide."
    wikipedia = (REPO.parent / "shared/data/files/markitdown/test_wikipedia.html").read_text(
        "utf-8"
    )
    assert 'href="#cite_ref-1"' not in main_content(wikipedia)
