"""The index service: the only reader and writer of LanceDB.

`store.IndexStore` does the LanceDB work (documents, chunks, hybrid search, crash recovery;
the package's docstring maps its modules); `core.IndexCore` wraps it for asyncio callers and
implements `libs.ports.IndexPort` in-process; `app.create_app` serves the same core over HTTP
for `libs.clients.IndexClient`.
"""
