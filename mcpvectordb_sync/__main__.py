"""`python -m mcpvectordb_sync` and the `.pyz`'s entry point."""

import sys

from mcpvectordb_sync.cli import main

sys.exit(main())
