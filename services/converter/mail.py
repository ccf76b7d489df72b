"""E-mail messages saved as `.eml` (RFC 5322: Thunderbird, Apple Mail, Outlook's "Save as",
most webmail exports) as Markdown, in the layout markitdown gives Outlook's `.msg` files: the
sender, recipients, date and subject, then the body. The body is the plain-text part if the
message has one, else its HTML part converted like an `.html` file; the charset each part
declares is honoured (the standard library's `email` package decodes quoted-printable and
base64). Attachments are listed by name, not converted: ingest them as files of their own.
"""

from __future__ import annotations

import email
import email.policy
from collections.abc import Callable
from email.message import EmailMessage, MIMEPart

from libs.errors import ConversionError

_HEADERS = ("From", "To", "Cc", "Date", "Subject")


def mail_markdown(
    data: bytes, name: str, html_to_markdown: Callable[[str], str]
) -> tuple[str, str]:
    """The Markdown of the message `data` and its subject; `html_to_markdown` converts an
    HTML body."""
    message = email.message_from_bytes(data, policy=email.policy.default)
    if not isinstance(message, EmailMessage) or not message.keys():
        raise ConversionError(
            f"could not convert '{name}': it has no e-mail headers; check that it is a message "
            "saved as .eml (RFC 5322)"
        )
    lines = ["# Email Message", ""]
    lines += [f"**{h}:** {message[h]}" for h in _HEADERS if message[h]]
    body = _body(message, html_to_markdown)
    if body:
        lines += ["", "## Content", "", body]
    attached = [part.get_filename() or "(unnamed)" for part in message.iter_attachments()]
    if attached:
        lines += ["", "## Attachments", "", *(f"- {filename}" for filename in attached)]
    return "\n".join(lines), str(message["Subject"] or "").strip()


def _body(message: EmailMessage, html_to_markdown: Callable[[str], str]) -> str:
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    content = part_text(part)
    if part.get_content_subtype() == "html":
        return html_to_markdown(content).strip()
    return content.strip()


def part_text(part: MIMEPart) -> str:
    """A MIME part's text, decoded by the charset it declares (Latin-1 when that is unknown
    or wrong)."""
    try:
        return str(part.get_content())
    except (LookupError, UnicodeDecodeError):
        raw = part.get_payload(decode=True)
        return raw.decode("latin-1") if isinstance(raw, bytes) else str(raw or "")
