# Load benchmark targets, included from the Makefile (`include bench/bench.mk`).

bench-load: install ## Load: one user's searches against a folder ingest, as ratios (INTERFERENCE_ARGS), then 20 MCP SSE sessions while a folder ingest runs (LOAD_ARGS="--duration 60 --sessions 20")
	$(PY) -m bench.interference $(INTERFERENCE_ARGS)
	$(PY) -m bench.load $(LOAD_ARGS)

bench-interference: install ## One user's searches during / right after a folder ingest, as ratios to idle and steady (INTERFERENCE_ARGS="--files 60 --settle 60")
	$(PY) -m bench.interference $(INTERFERENCE_ARGS)

bench-sync: install ## Folder sync: time and bytes of a pass over 1,000 unchanged files (SYNC_ARGS="--files 1000")
	$(PY) -m bench.sync $(SYNC_ARGS)
