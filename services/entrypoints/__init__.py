"""The programs that start mcpvectordb, and the one composition root they share.

    mcpvectordb.py   `mcpvectordb`: the MCP server (stdio, or the HTTP gateway)
    serve.py         `python -m services.entrypoints.serve SERVICE`: one service under uvicorn
    cluster.py       `make up` / `make down` / `make status`: the four services on loopback
    ingest.py        `mcpvectordb-ingest`: bulk-ingest a folder, locally or through a gateway
    inprocess.py     the cores wired together in one process (stdio, CLI, benchmarks)

Nothing under `services/<service>/` imports from here; this package imports the services.
"""
