# Load benchmark targets, included from the Makefile (`include bench/bench.mk`).

bench-load: install ## Load: one user's searches against a folder ingest, as ratios (INTERFERENCE_ARGS), then 20 MCP SSE sessions alone, during a folder ingest, and the ingest alone, as ratios (LOAD_ARGS="--duration 60 --sessions 20")
	$(PY) -m bench.interference $(INTERFERENCE_ARGS)
	$(PY) -m bench.load $(LOAD_ARGS)

bench-search: install ts-client ## MCP search p50 (Python SDK, TypeScript SDK, bare client) against query embedding + index search p50 at 10k/100k chunks, interleaved in one run (SEARCH_ARGS="--rounds 3 --cpu")
	$(PY) -m bench.perf_search $(SEARCH_ARGS)

bench-interference: install ## One user's searches during / right after a folder ingest, as ratios to idle and steady (INTERFERENCE_ARGS="--files 60 --settle 60")
	$(PY) -m bench.interference $(INTERFERENCE_ARGS)

bench-sync: install ## Folder sync: time and bytes of a pass over 1,000 unchanged files (SYNC_ARGS="--files 1000")
	$(PY) -m bench.sync $(SYNC_ARGS)

bench-scale: install ## A million chunks: build the table once under var/bench/scale (nice), then measure (SCALE_ARGS=...)
	nice -n 10 $(PY) -m bench.scale build $(SCALE_BUILD_ARGS)
	$(PY) -m bench.scale measure $(SCALE_ARGS)

bench-folds: install ## Search as the library keeps changing: index search p50 fold after fold on copies of the 1M table, merging the vector index's delta segments and not (FOLDS_ARGS="--folds 24 --every 8")
	$(PY) -m bench.folds $(FOLDS_ARGS)

bench-scale-s3: install ## The index on a local S3 server (ministack): warm search, a cold reader, searches/s with 0-2 readers (S3_ARGS=...)
	$(PY) -m bench.scale_s3 $(S3_ARGS)

bench-ingest: install ## Ingest rate vs the model's own rate on the same text, in tokens/s (INGEST_RATE_ARGS="--docs 60 --words 1500")
	$(PY) -m bench.ingest_rate $(INGEST_RATE_ARGS)

bench-chunking: install ## Retrieval quality (SciFact) and tokens embedded per chunk size and overlap, in-process, niced (CHUNKING_ARGS="--max-docs 2000")
	nice -n 10 $(PY) -m bench.chunking $(CHUNKING_ARGS)

bench-large-document: install ## One very large document's write to an index process, in parts and in one request: seconds, requests, index memory (LARGE_DOC_ARGS="--chunks 20000,40000")
	$(PY) -m bench.large_document $(LARGE_DOC_ARGS)

bench-pdf-sections: install ## PDF sections as queries: how often the top hit is in the section, or the printed table of contents (PDF_SECTIONS_ARGS="--json var/bench/pdf_sections.json")
	$(PY) -m bench.pdf_sections $(PDF_SECTIONS_ARGS)
