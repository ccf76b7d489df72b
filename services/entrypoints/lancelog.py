"""LanceDB's own log filter, for every process that runs the index.

LanceDB writes plain-text lines on stderr, filtered by `LANCEDB_LOG` (env_logger's syntax),
read once when LanceDB starts its logger. The default keeps its warnings except one per
empty IVF partition each time a fold builds the vector index's delta segment over the new
rows (about 150 lines a fold at a million chunks, every one expected). A LANCEDB_LOG of the
operator's own wins.
"""

from __future__ import annotations

import os

LANCE_LOG = "warn,lance::index::vector::builder=error"


def quiet_lance_log() -> None:
    """Set the default filter; call it before LanceDB is imported."""
    os.environ.setdefault("LANCEDB_LOG", LANCE_LOG)
