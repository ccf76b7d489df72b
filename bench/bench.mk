# Load benchmark targets, included from the Makefile (`include bench/bench.mk`).

bench-load: install ## Load: 20 MCP SSE sessions searching while a folder ingest runs (LOAD_ARGS="--duration 60 --sessions 20")
	$(PY) -m bench.load $(LOAD_ARGS)

bench-sync: install ## Folder sync: time and bytes of a pass over 1,000 unchanged files (SYNC_ARGS="--files 1000")
	$(PY) -m bench.sync $(SYNC_ARGS)
