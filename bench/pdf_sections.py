"""Do searches for a PDF's sections find the sections? Measured through the product's path.

    python -m bench.pdf_sections [PDF ...] [--json PATH]

Each PDF (by default the two NIST reports and the LaTeX seminar paper in
`../shared/data/files`) is ingested as an
upload through the in-process services (converter, embedder, index), and each of its
bookmarks below the cover becomes a query: its title without its number or label ("3.3
Trust Algorithm" asks "Trust Algorithm"). A query's section runs from its bookmark's page
to the next bookmark's. Reported, per mode (hybrid, BM25, vector), over all queries: how
often the top hit lies in the section's pages (`top1_in_section`), and how often a chunk of
the printed table of contents is the top hit or among the top 3 (pages where dot-leader
entries were found in the PDF's raw text, which the converter now leaves out).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium

from services.converter.pdfoutline import outline

DEFAULT_PDFS = [
    Path(__file__).resolve().parents[2] / "shared/data/files" / name
    for name in (
        "nist/NIST.SP.800-207-ZeroTrustArchitecture.pdf",
        "nist/NIST.SP.800-218.pdf",
        "yaos-prinzip/Online-Optimierung als Zwei-Personen-Nullsummenspiel und Yaos Prinzip.pdf",
    )
]
LIBRARY = "pdf-sections"
MODES = ("hybrid", "bm25", "vector")
_NUMBER = re.compile(r"^(?:appendix [a-z][—–:.-]?\s*|[a-z]?\.?[\d.]+\s+)", re.IGNORECASE)
# Told from the raw text on its own, not by the converter's detector that this measures.
_LEADERS = re.compile(r"(?:\.\s?){4,}\s*(?:\d{1,4}|[ivxlcdm]{1,7})\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Section:
    source: str
    query: str
    first: int  # 1-based pages
    last: int


def sections_of(path: Path) -> tuple[list[Section], set[int]]:
    """The PDF's sections below its cover, and the pages printing its table of contents."""
    document = pdfium.PdfDocument(path)
    try:
        marks = sorted((b.page + 1, b.title) for b in outline(document) if b.page > 0)
        sections = []
        for k, (page, title) in enumerate(marks):
            last = marks[k + 1][0] if k + 1 < len(marks) else len(document)
            query = _NUMBER.sub("", title).strip()
            if query:
                sections.append(Section(path.name, query, page, max(last, page)))
        contents = set()
        for index in range(len(document)):
            textpage = document[index].get_textpage()
            lines = textpage.get_text_range().splitlines()
            textpage.close()
            if sum(1 for line in lines if _LEADERS.search(line)) >= 3:
                contents.add(index + 1)
        return sections, contents
    finally:
        document.close()


async def measure(pdfs: list[Path]) -> dict[str, Any]:
    from libs.contracts import SearchInput, UploadInput
    from services.entrypoints.inprocess import inprocess_ports
    from services.gateway.library import Library
    from services.gateway.settings import GatewaySettings

    sections: list[Section] = []
    contents: dict[str, set[int]] = {}
    for pdf in pdfs:
        found, pages = sections_of(pdf)
        sections += found
        contents[pdf.name] = pages
    settings = GatewaySettings(transport="bench")
    tally = {mode: {"top1_in_section": 0, "toc_top1": 0, "toc_in_top3": 0} for mode in MODES}
    async with inprocess_ports(settings) as ports:
        library = Library(settings, ports)
        chunks = 0
        for pdf in pdfs:
            upload = UploadInput(filename=pdf.name, data=pdf.read_bytes(), library=LIBRARY)
            chunks += (await library.ingest_upload(upload)).chunk_count
        for section in sections:
            question = SearchInput(query=section.query, top_k=3, library=LIBRARY)
            for mode in MODES:
                hits = (await library.search(question, mode=mode)).results
                toc = [h for h in hits if h.page in contents.get(h.source, set())]
                counts = tally[mode]
                top = hits[0] if hits else None
                in_section = top is not None and top.source == section.source
                in_section = in_section and section.first <= top.page <= section.last
                counts["top1_in_section"] += in_section
                counts["toc_top1"] += bool(top is not None and toc and toc[0] is top)
                counts["toc_in_top3"] += bool(toc)
    return {"pdfs": [p.name for p in pdfs], "chunks": chunks, "queries": len(sections), **tally}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pdf_sections", description=__doc__)
    parser.add_argument("pdfs", type=Path, nargs="*", default=DEFAULT_PDFS)
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the store here")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mvdb-bench-"))
    os.environ["LANCEDB_URI"] = str(workdir / "lancedb")
    os.environ.setdefault("VAR_DIR", str(workdir / "var"))
    missing = [str(p) for p in args.pdfs if not p.is_file()]
    if missing:
        print(f"not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    print(f"$ python -m bench.pdf_sections {' '.join(map(str, argv or []))}".rstrip())
    report = asyncio.run(measure(args.pdfs))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
