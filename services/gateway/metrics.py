"""Gateway metrics: documents and chunks ingested, tool calls by tool and outcome, index reads
by replica."""

from prometheus_client import Counter

INGESTED_DOCUMENTS = Counter(
    "mvdb_documents_ingested_total", "Documents written by ingests", ["status"]
)
INGESTED_CHUNKS = Counter("mvdb_chunks_ingested_total", "Chunks written by ingests")
REUSED_VECTORS = Counter(
    "mvdb_ingest_reused_vectors_total",
    "Chunk texts an ingest did not embed: their vectors came from the stored version of the "
    "document (services.gateway.embedding)",
)
TOOL_CALLS = Counter("mvdb_tool_calls_total", "MCP tool calls", ["tool", "status"])

# Index replicas (services.gateway.replicas); `target` is `writer` or `reader1`...`readerN`.
INDEX_READS = Counter("mvdb_index_reads_total", "Index reads answered, by target", ["target"])
INDEX_PINNED_READS = Counter(
    "mvdb_index_pinned_reads_total",
    "Index reads sent to the writer because the caller wrote within the consistency window",
)
INDEX_FAILOVERS = Counter(
    "mvdb_index_read_failovers_total",
    "Index reads a reader failed (it is skipped for INDEX_READ_COOLDOWN_S), by reader",
    ["target"],
)
