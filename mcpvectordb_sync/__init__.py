"""`mcpvectordb-sync`: keep a library of an mcpvectordb gateway in step with a local folder.

Standard library only, so that it runs from one file (`dist/mcpvectordb-sync.pyz`) with a
plain Python 3.11+ on Windows, macOS and Linux, over `POST /upload`, `GET /sources` and
`DELETE /documents`. One module per job:

    paths.py      a file's source (relative, `/`-separated, NFC) and Windows long paths
    scan.py       walk the folder: supported files, include/exclude globs, what could not be read
    transport.py  the gateway over HTTP: retries with backoff, multipart upload, errors
    plan.py       manifest + scan -> what to upload, what is unchanged, what to delete
    engine.py     one sync pass: hash, upload, delete, count
    watch.py      --watch: a pass every interval, sooner when the folder changes
    cli.py        arguments, progress bar, summary, exit codes

The gateway's manifest is the only state: an interrupted run simply runs again, and files
whose SHA-256 the manifest already has are not sent.
"""

__version__ = "0.6.0"
