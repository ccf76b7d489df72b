"""E-mail messages saved as `.eml` (`services.converter.mail`), built with the standard
library as mail programs write them: headers and a plain body; an HTML-only body converted as
HTML; the plain part of a multipart/alternative message; a Windows-1252 body in
quoted-printable; attachments listed by name; a file that is no message refused clearly."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from libs.errors import ConversionError
from services.converter.archive import ArchiveLimits
from services.converter.convert import DocumentConverter


@pytest.fixture(scope="module")
def converter() -> DocumentConverter:
    return DocumentConverter(ArchiveLimits(20, 1_000_000, 2))


def message(subject: str = "Lighthouse rota for March") -> EmailMessage:
    mail = EmailMessage()
    mail["From"] = "Keeper <keeper@example.org>"
    mail["To"] = "crew@example.org"
    mail["Date"] = "Mon, 02 Mar 2026 08:15:00 +0000"
    mail["Subject"] = subject
    return mail


def test_a_plain_message(converter: DocumentConverter) -> None:
    mail = message()
    mail.set_content("Anna takes the lamp on Mondays.\nBen polishes the lens on Fridays.\n")
    document = converter.convert(mail.as_bytes(), "rota.eml")
    assert document.title == "Lighthouse rota for March"
    assert document.file_type == "eml"
    markdown = document.markdown
    assert "**From:** Keeper <keeper@example.org>" in markdown
    assert "**To:** crew@example.org" in markdown and "**Date:** Mon, 02 Mar 2026" in markdown
    assert markdown.endswith("Anna takes the lamp on Mondays.\nBen polishes the lens on Fridays.")


def test_an_html_body_is_converted_and_a_plain_one_preferred(converter: DocumentConverter) -> None:
    html_only = message()
    html_only.set_content(
        "<html><body><h2>Rota</h2><p>Anna: <b>Mondays</b></p><script>x()</script></body></html>",
        subtype="html",
    )
    markdown = converter.convert(html_only.as_bytes(), "html.eml").markdown
    assert "## Rota" in markdown and "Anna: **Mondays**" in markdown and "x()" not in markdown
    both = message()
    both.set_content("Plain: Anna on Mondays.")
    both.add_alternative("<p>HTML: Anna on Mondays.</p>", subtype="html")
    markdown = converter.convert(both.as_bytes(), "both.eml").markdown
    assert "Plain: Anna on Mondays." in markdown and "HTML:" not in markdown


def test_a_windows_1252_body_and_attachments(converter: DocumentConverter) -> None:
    mail = message("Crème brûlée for the crew")
    body = "Le gâteau est à 4 € — “très bon”."
    mail.set_content(body, charset="windows-1252", cte="quoted-printable")
    mail.add_attachment(b"%PDF-1.4 ...", maintype="application", subtype="pdf", filename="menu.pdf")
    mail.add_attachment(b"\x89PNG", maintype="image", subtype="png", filename="cake.png")
    raw = mail.as_bytes()
    # The body travels quoted-printable in Windows-1252 ("â" is the byte E2 there).
    assert b'charset="windows-1252"' in raw and b"g=E2teau" in raw
    document = converter.convert(raw, "dessert.eml")
    assert document.title == "Crème brûlée for the crew"
    assert body in document.markdown
    assert "## Attachments\n\n- menu.pdf\n- cake.png" in document.markdown
    assert "%PDF" not in document.markdown


def test_a_file_that_is_no_message_is_refused(converter: DocumentConverter) -> None:
    with pytest.raises(ConversionError, match="no e-mail headers"):
        converter.convert(b"\x00\x01\x02 just bytes", "broken.eml")
