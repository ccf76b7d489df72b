"""Gateway service: the MCP server (SSE, streamable HTTP, stdio), `POST /upload`,
`POST /ingest_folder`, all outside I/O and the ingest pipeline orchestration."""
