"""Build the sync client as one file: `python -m mcpvectordb_sync.bundle dist/mcpvectordb-sync.pyz`
(`make sync-client`).

The archive holds this package (less this builder and caches) and a `__main__.py` that runs
the CLI and exits with its code; it needs nothing but a Python 3.11+ (`py mcpvectordb-sync.pyz`
on Windows, `python3 mcpvectordb-sync.pyz` elsewhere).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import zipapp
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
MAIN = "import sys\n\nfrom mcpvectordb_sync.cli import main\n\nsys.exit(main())\n"


def build(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as staging:
        root = Path(staging)
        shutil.copytree(
            PACKAGE,
            root / PACKAGE.name,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "bundle.py"),
        )
        (root / "__main__.py").write_text(MAIN, encoding="utf-8")
        zipapp.create_archive(root, target, interpreter="/usr/bin/env python3", compressed=True)
    return target


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m mcpvectordb_sync.bundle TARGET.pyz")
    print(build(Path(sys.argv[1])))
