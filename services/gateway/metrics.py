"""Gateway metrics: documents and chunks ingested, tool calls by tool and outcome."""

from prometheus_client import Counter

INGESTED_DOCUMENTS = Counter(
    "mvdb_documents_ingested_total", "Documents written by ingests", ["status"]
)
INGESTED_CHUNKS = Counter("mvdb_chunks_ingested_total", "Chunks written by ingests")
TOOL_CALLS = Counter("mvdb_tool_calls_total", "MCP tool calls", ["tool", "status"])
