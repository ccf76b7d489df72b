"""The rule for authorization-server URLs, shared by the settings check and the OAuth code:
https, or plain http on a loopback host only (a token server reached over plain http on a
network could be impersonated, and with it every identity)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from libs.errors import InvalidInputError


def is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, setting: str) -> str:
    """`url` if it is https, or http on a loopback host; else an error naming `setting`."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and parts.hostname and is_loopback_url(url):
        return url
    raise InvalidInputError(
        f"{setting} must be an https:// URL (plain http:// only on a loopback host such as "
        f"127.0.0.1), not {url!r}"
    )
