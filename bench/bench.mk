# Load benchmark targets, included from the Makefile (`include bench/bench.mk`).

bench-load: install ## Load: 20 MCP SSE sessions searching while a folder ingest runs (LOAD_ARGS="--duration 60 --sessions 20")
	$(PY) -m bench.load $(LOAD_ARGS)
