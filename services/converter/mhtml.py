"""Web pages saved as one file (`.mhtml` from Chrome and Edge's "Webpage, Single File",
`.mht` from Internet Explorer and Word): a MIME message whose HTML part is the page, its
images and style sheets beside it. The page's HTML is taken out here and converted as an
`.html` file is (`webpage`, markitdown); the other parts are left out.
"""

from __future__ import annotations

import email
import email.policy
from email.message import EmailMessage

from libs.errors import ConversionError
from services.converter.mail import part_text


def page_html(data: bytes, name: str) -> str:
    """The HTML of the saved page `data`, decoded by its part's charset."""
    message = email.message_from_bytes(data, policy=email.policy.default)
    page = None
    if isinstance(message, EmailMessage):
        page = next((p for p in message.walk() if p.get_content_type() == "text/html"), None)
    if page is None:
        raise ConversionError(
            f"could not convert '{name}': it holds no HTML page (no text/html part); check "
            "that it is a web page saved as a single file (.mhtml or .mht)"
        )
    return part_text(page)
