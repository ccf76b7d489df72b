"""The four mcpvectordb services (converter, embedder, index, gateway) and their launchers.

Services never import each other; `services.entrypoints` holds the programs that start them
and `services.entrypoints.inprocess`, the one composition root that wires the cores together
in a single process (stdio transport, CLI without a cluster URL).
"""
