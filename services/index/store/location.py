"""Where the store lives: a local path or an object-storage URI (`s3://`, `gs://`, `az://`),
the storage options LanceDB reaches it with, and the credentials that must never be shown.

`connect` registers every secret the location carries (user information in the URI, the
secret-looking storage options, the cloud SDK variables of the environment, which the object
store reads too) with `libs.redaction` before LanceDB sees them, so no log line, error
message or `/readyz` detail of this process can carry one; `shown_uri` is the URI fit for
`/info` and `server_info`.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import unquote, urlsplit

import lancedb

from libs.redaction import redact_uri, remember_environment, remember_options, remember_secret
from services.index.settings import IndexSettings


def remember_credentials(settings: IndexSettings) -> None:
    """Register the secrets of `settings`' location (see the module docstring)."""
    parts = urlsplit(settings.lancedb_uri)
    if parts.password:
        remember_secret(unquote(parts.password))
    if parts.username and parts.password:
        remember_secret(unquote(parts.username))
    remember_options(settings.lancedb_storage_options)
    remember_environment()


def connect(settings: IndexSettings, session: lancedb.Session) -> lancedb.DBConnection:
    """The LanceDB connection of the store. A reader's handles see the writer's commits
    within `INDEX_READ_CONSISTENCY_S`; a writer's never refresh on their own, and move only
    under its write lock (why: `writer_guard`'s module docstring)."""
    remember_credentials(settings)
    options = settings.lancedb_storage_options or None
    reader = settings.index_role == "reader"
    return lancedb.connect(
        settings.lancedb_uri,
        read_consistency_interval=(
            timedelta(seconds=settings.index_read_consistency_s) if reader else None
        ),
        session=session,
        storage_options=options,
    )


def shown_uri(settings: IndexSettings) -> str:
    """LANCEDB_URI without credentials."""
    return redact_uri(settings.lancedb_uri)
