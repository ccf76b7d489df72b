"""Keeping credentials out of everything a service says: log lines, error messages, `/readyz`,
`server_info`.

A store on object storage is reached with secrets: in the URI's user information
(`s3://KEY:SECRET@bucket/...`), in storage options (`aws_secret_access_key`, an Azure SAS
token, ...), in the standard environment variables (`AWS_SECRET_ACCESS_KEY`...), and in the
signed URLs that object-store errors quote (`X-Amz-Credential=...`). `scrub` removes all of them
from a text:

- every value registered with `remember_secret` (the index registers its secret storage
  options, and the secret cloud variables of its environment, when it builds its store);
- user information in any URI (`scheme://user:password@` becomes `scheme://***@`);
- query parameters that carry signatures, credentials or tokens.

`JsonFormatter` (`libs.telemetry`) scrubs every log line and `libs.service_app` every error
message and readiness detail it sends, so a secret that reaches an exception text from a
library deep down still stays in the process.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Mapping

MASK = "***"

# A storage option or environment variable whose name contains one of these holds a secret.
_SECRET_WORDS = ("secret", "password", "token", "credential", "signature", "sas", "key")
# ...unless it is one of these settings, which only switch things on or off.
_NOT_SECRET = ("skip_signature", "use_fabric_endpoint", "key_id_type")
# Environment variables of the cloud SDKs whose secret values object stores read.
_CLOUD_ENV_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_", "GCS_", "GCP_")
# Shorter values, or switches, would mask innocent words everywhere.
_MIN_SECRET_CHARS = 6
_SWITCHES = {"true", "false", "yes", "no", "on", "off"}

_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@?#\"']+@")
_SIGNED_PARAM = re.compile(
    r"(?P<name>[?&;](?:x-amz-[a-z-]*|x-goog-[a-z-]*|sig|signature|token|credential|"
    r"access_?key[a-z_]*|secret[a-z_]*|password|sas[a-z_]*)=)[^&\s\"'#<>]+",
    re.IGNORECASE,
)

_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None


def is_secret_name(name: str) -> bool:
    """Whether a storage option or variable named `name` holds a secret."""
    lowered = name.lower()
    if lowered in _NOT_SECRET:
        return False
    return any(word in lowered for word in _SECRET_WORDS)


def remember_secret(value: str) -> None:
    """Mask `value` wherever it appears from now on (too short or switch-like values are
    masked only where a pattern catches them)."""
    global _pattern
    value = value.strip()
    if len(value) < _MIN_SECRET_CHARS or value.lower() in _SWITCHES:
        return
    forms = {value, json.dumps(value)[1:-1]}
    with _lock:
        if forms <= _secrets:
            return
        _secrets.update(forms)
        alternatives = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(s) for s in alternatives))


def remember_options(options: Mapping[str, str]) -> None:
    """Register the values of the secret-looking keys of storage options."""
    for name, value in options.items():
        if is_secret_name(name):
            remember_secret(value)


def remember_environment(environ: Mapping[str, str] | None = None) -> None:
    """Register the secret cloud variables (`AWS_SECRET_ACCESS_KEY`, ...) of the environment."""
    environ = os.environ if environ is None else environ
    for name, value in environ.items():
        if name.upper().startswith(_CLOUD_ENV_PREFIXES) and is_secret_name(name):
            remember_secret(value)


def scrub(text: str) -> str:
    """`text` with every registered secret, URI user information and signed query parameter
    masked."""
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    text = _USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
    return _SIGNED_PARAM.sub(lambda m: m.group("name") + MASK, text)


def redact_uri(uri: str) -> str:
    """A URI fit to show: `scrub`bed (user information, secret query parameters, secrets)."""
    return scrub(uri)
