"""Web pages saved as one file (`.mhtml` from Chrome and Edge's "Webpage, Single File",
`.mht` from Internet Explorer, Word and Excel): a MIME message whose HTML part is the page,
its images and style sheets beside it. The page's HTML is taken out here and converted as an
`.html` file is (`webpage`, markitdown); the other parts are left out.

Excel saves a workbook of several sheets as a frameset: the first HTML part only frames the
sheets (each its own HTML part, listed by `<link id="shLink">`, named in the script's
`c_rgszSh` array) and a tab strip. Its page is the sheets one after another, each under
`## name`, as the spreadsheet readers write sheets.
"""

from __future__ import annotations

import email
import email.policy
import html
import re
from email.message import EmailMessage
from urllib.parse import urljoin

from bs4 import BeautifulSoup

from libs.errors import ConversionError
from services.converter.mail import part_text

_SHEET_NAME = re.compile(r'c_rgszSh\[(\d+)\]\s*=\s*"((?:[^"\\]|\\.)*)"')
_TAB_STRIP = "tabstrip.htm"


def page_html(data: bytes, name: str) -> str:
    """The HTML of the saved page `data`, decoded by its part's charset."""
    message = email.message_from_bytes(data, policy=email.policy.default)
    pages: list[EmailMessage] = []
    if isinstance(message, EmailMessage):
        pages = [p for p in message.walk() if p.get_content_type() == "text/html"]
    if not pages:
        raise ConversionError(
            f"could not convert '{name}': it holds no HTML page (no text/html part); check "
            "that it is a web page saved as a single file (.mhtml or .mht)"
        )
    first = part_text(pages[0])
    if len(pages) == 1 or not re.search(r"<frameset\b", first, re.IGNORECASE):
        return first
    return _workbook(first, pages) or first


def _workbook(frameset: str, pages: list[EmailMessage]) -> str | None:
    """Excel's frameset of sheets as one page: each sheet's body under its name; None when
    the frameset names no sheet this file holds."""
    soup = BeautifulSoup(frameset, "html.parser")
    base = str(pages[0].get("Content-Location") or "")
    by_location = {str(p.get("Content-Location") or ""): p for p in pages[1:]}
    links = [
        str(link.get("href")) for link in soup.find_all("link", id="shLink") if link.get("href")
    ]
    if links:
        sheets = [
            by_location.get(urljoin(base, href)) or _ending(by_location, href) for href in links
        ]
    else:  # no list: every page but the tab strip, in the file's order
        sheets = [p for loc, p in by_location.items() if not loc.lower().endswith(_TAB_STRIP)]
    if not any(sheets):
        return None
    names = dict((int(i), n.replace('\\"', '"')) for i, n in _SHEET_NAME.findall(frameset))
    title = soup.title.get_text() if soup.title else ""
    parts = [f"<html><head><title>{html.escape(title)}</title></head><body>"]
    for number, sheet in enumerate(sheets):
        if sheet is None:
            continue
        name = names.get(number, f"Sheet {number + 1}")
        body = BeautifulSoup(part_text(sheet), "html.parser").body
        parts.append(f"<h2>{html.escape(name)}</h2>{body.decode_contents() if body else ''}")
    parts.append("</body></html>")
    return "".join(parts)


def _ending(by_location: dict[str, EmailMessage], href: str) -> EmailMessage | None:
    """The part whose location ends with `href`'s file name (a link relative to a folder the
    file's own locations do not share)."""
    tail = "/" + href.rsplit("/", 1)[-1].lower()
    return next((p for loc, p in by_location.items() if loc.lower().endswith(tail)), None)
