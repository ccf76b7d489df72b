"""The installed commands `mcpvectordb` and `mcpvectordb-ingest`.

The package installs with no dependencies (`pip install "mcpvectordb[client]"` is the
folder-sync client alone); the server's come with the `server` extra. Without them these
commands would die on an ImportError deep in a traceback; here they say what to install.
Only the standard library is imported before the check.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

INSTALL_HINT = 'pip install "mcpvectordb[server]"'


def _run(module: str) -> int:
    try:
        entry: Callable[[], int] = importlib.import_module(module).main
    except ModuleNotFoundError as exc:
        # Only a missing third-party package is the user's to fix; a missing module of
        # this project is a broken install and keeps its traceback.
        if exc.name is None or exc.name.split(".")[0] in {"libs", "services"}:
            raise
        print(
            f"{sys.argv[0]}: the server's dependencies are not installed (no module "
            f"{exc.name!r}). Install them with: {INSTALL_HINT}",
            file=sys.stderr,
        )
        return 2
    return entry()


def mcpvectordb() -> int:
    return _run("services.entrypoints.mcpvectordb")


def ingest() -> int:
    return _run("services.entrypoints.ingest")
