"""LanceDB's own log filter, for every process that runs the index.

LanceDB writes plain-text lines on stderr, filtered by `LANCEDB_LOG` (env_logger's syntax),
read once when LanceDB starts its logger. The default keeps its warnings except one per
empty IVF partition each time a fold builds the vector index's delta segment over the new
rows (about 150 lines a fold at a million chunks, every one expected). A LANCEDB_LOG of the
operator's own wins.

Lance (`pylance`, which a search reads its picked rows with) also warns at every fork of a
process that imported it. A process that runs the index forks only to exec another program
at once (git, for a repository ingest in one-process mode), where the warning does not
apply, so it is not shown.
"""

from __future__ import annotations

import os
import warnings

LANCE_LOG = "warn,lance::index::vector::builder=error"
FORK_WARNING = "lance is not fork-safe"


def quiet_lance_log() -> None:
    """Set the default filter; call it before LanceDB is imported."""
    os.environ.setdefault("LANCEDB_LOG", LANCE_LOG)
    warnings.filterwarnings("ignore", message=FORK_WARNING, category=UserWarning)
