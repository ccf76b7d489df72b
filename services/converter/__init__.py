"""The converter service: bytes plus a file name in, Markdown, title, file type, pages and
token-bounded chunks out.

`core.Converter` is the service core (used in-process by the stdio server and the CLI);
`app.create_app` wraps it in a thin HTTP adapter. Conversion itself runs in spawned worker
processes (`worker`), so a pathological file can be stopped without taking the service down.
"""
