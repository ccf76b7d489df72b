"""Bytes plus a file name in, Markdown with a title, a file type and page spans out.

PDFs are read page by page with pypdfium2 (`pdf`); Markdown and plain text are their own
Markdown, decoded here and nothing more; ZIP and tar archives, compressed files, e-mail,
OpenDocument, RTF, Word and PowerPoint 97-2003 files and Excel workbooks have readers of their
own (`zipfiles`, `tarballs`, `mail`, `opendocument`, `rtf`, `worddoc`, `powerpoint`,
`workbook`); a web page's menus, site header
and footer are left out first (`webpage`); everything else goes
through one MarkItDown instance. Text formats are decoded here first (`charset`: a BOM,
UTF-8, else detection) and the charset is handed to markitdown, so a Shift-JIS CSV converts
instead of failing a UTF-8 decode. Slides and sheets keep their numbers as page spans:
markitdown (and the OpenDocument reader) mark slides with `<!-- Slide number: N -->` and
sheets with `## SheetName`.

This module runs inside the worker processes (`worker`); nothing here touches the network or
the filesystem.
"""

from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace

from markitdown import (
    FileConversionException,
    MarkItDown,
    MissingDependencyException,
    StreamInfo,
    UnsupportedFormatException,
)

from libs.errors import ConversionError, NoTextError
from libs.formats import ARCHIVE_EXTENSIONS, OFFICE_VARIANTS
from services.converter import tarballs
from services.converter.archive import ArchiveLimits, check_archive, is_zip
from services.converter.charset import DEFAULT_LEGACY, MARKUP, read_text
from services.converter.chunk import PageSpan, has_text
from services.converter.delimited import OWN_SEPARATOR, as_comma_separated, separator_of
from services.converter.epubbook import without_contents as book_body
from services.converter.formats import (
    VERBATIM,
    Route,
    base_name,
    extension_of,
    route_for,
    type_of,
)
from services.converter.headings import first_heading, front_matter_title
from services.converter.latex import latex_markdown
from services.converter.mail import mail_markdown
from services.converter.mhtml import page_html
from services.converter.ooxml import core_title
from services.converter.opendocument import opendocument_markdown
from services.converter.orgmode import org_markdown
from services.converter.pages import joined_pages, page_spans
from services.converter.pdf import extract_pdf, sensible_title
from services.converter.powerpoint import ppt_markdown
from services.converter.renamed import SUCCESSORS, real_format
from services.converter.rtf import rtf_markdown
from services.converter.subtitles import subtitles_markdown
from services.converter.webpage import main_content
from services.converter.worddoc import word_markdown
from services.converter.worddocx import tidy_notes, visible_docx
from services.converter.workbook import xls_markdown, xlsx_markdown
from services.converter.zipfiles import archive_markdown, archive_member, zip_members

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")
# Titles Word and friends apply as a paragraph style; mapping them to H1 gives the document
# its title and its chunks a heading path.
_DOCX_STYLE_MAP = "p[style-name='Title'] => h1:fresh"
# Text that is its own Markdown (`formats.VERBATIM`) is decoded here: markitdown would only
# decode it too (its plain-text converter, given the charset) and tidy it as it tidies every
# result (`_tidy`), after running its file-type model over the bytes: a fifth of the
# converter's CPU on a folder of Markdown notes (docs/benchmarks.md, issue 19 goal 4).
_LINE_END = re.compile(r"\r?\n")
_BLANK_RUN = re.compile(r"\n{3,}")
# A data URI with a base64 payload too long to be text anyone searches for.
_INLINE_DATA = re.compile(
    r"(data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[\w.+-]+)*;base64),[A-Za-z0-9+/]{200,}=*"
)
# The formats read here rather than by markitdown, which has no reader for them.
OWN_READERS: dict[str, Callable[[bytes, str], tuple[str, str]]] = {
    ".odt": opendocument_markdown,
    ".ods": opendocument_markdown,
    ".odp": opendocument_markdown,
    ".fodt": opendocument_markdown,
    ".fods": opendocument_markdown,
    ".fodp": opendocument_markdown,
    ".rtf": rtf_markdown,
    ".doc": word_markdown,
    ".ppt": ppt_markdown,
    ".xlsx": xlsx_markdown,
    ".xls": xls_markdown,
}
# Text formats read here from their decoded text: LaTeX, Org mode and subtitles.
TEXT_READERS: dict[str, Callable[[str, str], tuple[str, str]]] = {
    ".tex": latex_markdown,
    ".ltx": latex_markdown,
    ".org": org_markdown,
    ".vtt": subtitles_markdown,
    ".srt": subtitles_markdown,
}
_SAVED_PAGES = (".mhtml", ".mht")  # a web page and its images in one MIME file (`mhtml`)
_WEB_PAGES = (".html", ".htm")
_PACKAGES = (".docx", ".pptx")  # read by markitdown, which leaves their titles (`ooxml`)
# What markitdown is handed of a file (what its reader sees, less its table of contents),
# and what is made of markitdown's Markdown after (Word's notes as Markdown footnotes).
_PREPARE: dict[str, Callable[[bytes], bytes]] = {".docx": visible_docx, ".epub": book_body}
_FINISH: dict[str, Callable[[str], str]] = {".docx": tidy_notes}


@dataclass(frozen=True)
class Document:
    markdown: str
    title: str
    file_type: str
    page_count: int
    pages: list[PageSpan]
    code: bool = False  # source code: the chunker cuts at definitions (`code`)


def normalise_text(text: str) -> str:
    """One form for every converter's output: LF line endings, no control characters, NFC."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    text = _CONTROL.sub("", text)
    return unicodedata.normalize("NFC", text).strip()


def _file_stem(name: str) -> str:
    stem, dot, _ = name.rpartition(".")
    return stem if dot and stem else name


class DocumentConverter:
    """One per worker process: holds the MarkItDown instance, created once."""

    def __init__(self, limits: ArchiveLimits, legacy_encoding: str = DEFAULT_LEGACY) -> None:
        self._limits = limits
        self._legacy = legacy_encoding
        self._markitdown = MarkItDown(enable_plugins=False)

    def convert(self, data: bytes, filename: str) -> Document:
        name = base_name(filename)
        route = route_for(name)
        named = type_of(name)
        file_type = named.lstrip(".")
        ext = OFFICE_VARIANTS.get(named, named)  # a .docm read as a .docx, an .xlsm as...
        if ext in SUCCESSORS:
            ext, route = real_format(data, ext, route)  # file_type stays the name's
        elif not extension_of(name) and is_zip(data):
            raise _binary(name, "a ZIP archive")  # an Office document or .zip, unnamed
        if route is Route.PDF:
            document = self._pdf(data, name, file_type)
        else:
            zipped = is_zip(data)
            tarball = ext in ARCHIVE_EXTENSIONS
            if (route is Route.ARCHIVE and not tarball) or zipped:
                check_archive(data, name, self._limits, nested=route is Route.ARCHIVE)
            if tarball and not zipped:
                document = self._tarball_document(data, name)
            elif route is Route.ARCHIVE:
                document = self._archive_document(data, name)
            elif ext in VERBATIM and not zipped:
                document = self._verbatim_document(data, name, ext)
            elif route is Route.CODE:
                document = self._code_document(data, name, ext)
            elif ext in TEXT_READERS and not zipped:
                document = self._text_document(data, name, ext)
            elif ext in _SAVED_PAGES:
                document = self._web_page(page_html(data, name), name)
            elif ext in OWN_SEPARATOR and not zipped:
                document = self._table_document(data, name, ext)
            elif route is Route.MAIL:
                document = self._mail_document(data, name)
            elif ext in OWN_READERS:
                document = self._own_document(data, name, ext, route)
            else:
                document = self._markitdown_document(data, name, ext, route)
        document = replace(document, file_type=file_type)
        if not has_text(document.markdown):
            raise NoTextError(
                f"no text could be extracted from '{name}': the {file_type} file converted "
                "to empty Markdown (it may hold only images or be blank). If it has text, "
                "extract it elsewhere and index it with ingest_content."
            )
        return document

    def _pdf(self, data: bytes, name: str, file_type: str) -> Document:
        extracted = extract_pdf(data, name)
        markdown, spans = joined_pages(extracted.pages)
        title = extracted.title or _file_stem(name)
        return Document(markdown, title, file_type, len(extracted.pages), spans)

    def _verbatim_document(self, data: bytes, name: str, ext: str) -> Document:
        markdown = normalise_text(_tidy(_without_inline_data(self._decoded(data, name))))
        return Document(
            markdown=markdown,
            title=self._title(None, markdown, name, Route.TEXT),
            file_type=ext.lstrip("."),
            page_count=0,
            pages=[PageSpan(0, 0, len(markdown))],
        )

    def _code_document(self, data: bytes, name: str, ext: str) -> Document:
        """Source code as it is (`code`): its lines are the document's, its name the title."""
        markdown = normalise_text(self._decoded(data, name, f"{ext} source code")).rstrip()
        return Document(markdown, name, ext.lstrip("."), 0, [PageSpan(0, 0, len(markdown))], True)

    def _text_document(self, data: bytes, name: str, ext: str) -> Document:
        """A text format with a reader of its own (`TEXT_READERS`), given its decoded text."""
        markdown, title = TEXT_READERS[ext](self._decoded(data, name), name)
        return self._document(markdown, title, name, ext, Route.TEXT)

    def _archive_document(self, data: bytes, name: str) -> Document:
        """Each file of the archive converted as if ingested alone (`zipfiles`); source code
        is left out, as folder scans leave it out."""
        markdown = archive_markdown(zip_members(data), name, archive_member(self._member))
        return Document(markdown, _file_stem(name), "zip", 0, [PageSpan(0, 0, len(markdown))])

    def _tarball_document(self, data: bytes, name: str) -> Document:
        """A tar archive's files as a ZIP archive's are (`tarballs`), or the one file a
        `.gz`, `.bz2` or `.xz` holds, converted under its own name."""
        expanded = tarballs.decompressed(data, name, self._limits)
        single = tarballs.single_file(expanded, name)
        if single is not None:
            return self.convert(*single)
        found = tarballs.members(expanded, name, self._limits)
        member = tarballs.unnested(archive_member(self._member))
        markdown = archive_markdown(found, name, member, "tar archive")
        return Document(markdown, _file_stem(name), "tar", 0, [PageSpan(0, 0, len(markdown))])

    def _member(self, data: bytes, path: str) -> str:
        return self.convert(data, path).markdown

    def _mail_document(self, data: bytes, name: str) -> Document:
        """An e-mail message (`mail`); an HTML body converted as an .html file is."""

        def html(body: str) -> str:
            return self._web_page(body, "body.html").markdown

        markdown, subject = mail_markdown(data, name, html)
        markdown = normalise_text(markdown)
        title = sensible_title(subject) or _file_stem(name)
        return Document(markdown, title, "eml", 0, [PageSpan(0, 0, len(markdown))])

    def _web_page(self, html: str, name: str) -> Document:
        """HTML already decoded (an e-mail's body, a saved page's part), read as an `.html`
        file is: without its menus, site header and footer (`webpage`), then markitdown."""
        return self._markitdown_document(html.encode(), name, ".html", Route.TEXT, charset="utf-8")

    def _own_document(self, data: bytes, name: str, ext: str, route: Route) -> Document:
        """A format this service reads itself (OpenDocument, RTF, Word and PowerPoint 97), in
        markitdown's shapes: sheets under `## name`, slides after their number marker, so
        pages come alike."""
        markdown, title = OWN_READERS[ext](data, name)
        return self._document(markdown, title, name, ext, route)

    def _table_document(self, data: bytes, name: str, ext: str) -> Document:
        """A delimited table in whatever separator it was written with (`delimited`)."""
        text = self._decoded(data, name)
        separator = separator_of(text, OWN_SEPARATOR[ext])
        if separator != ",":
            text = as_comma_separated(text, separator)
        return self._markitdown_document(
            text.encode(), name, ext, Route.TEXT, as_csv=True, charset="utf-8"
        )

    def _read(self, data: bytes, name: str, *, markup: bool = False) -> str:
        """`data` in the encoding `charset` picks; conversion_failed if it does not read."""
        try:
            return read_text(data, self._legacy, markup=markup)
        except (UnicodeDecodeError, LookupError) as exc:
            raise _undecodable(name, exc) from exc

    def _decoded(self, data: bytes, name: str, what: str = "") -> str:
        """The text of a text file; binary data under a text extension (a program, an image
        or an archive renamed, which any code page would read) is refused. UTF-16 text,
        whose bytes hold zeros, is decoded before this looks."""
        text = self._read(data, name)
        if "\x00" in text:
            raise _binary(name, "NUL bytes", what)
        return text

    def _markitdown_document(
        self,
        data: bytes,
        name: str,
        ext: str,
        route: Route,
        *,
        as_csv: bool = False,
        charset: str | None = None,
    ) -> Document:
        """markitdown's conversion; text is read in `charset` if the caller decoded it
        already (and handed it on as UTF-8), else in the one detected here."""
        text: str | None = None
        if route is Route.TEXT and charset is None:
            text = self._read(data, name, markup=ext in MARKUP)
        elif ext in _WEB_PAGES and charset is not None:  # an e-mail's HTML body, decoded
            text = data.decode(charset, "replace")
        if text is not None:
            # A web page without its menus, site header and footer (`webpage`), decoded once.
            data, charset = (main_content(text) if ext in _WEB_PAGES else text).encode(), "utf-8"
        info = StreamInfo(extension=".csv" if as_csv else ext, filename=name, charset=charset)
        extra = {"style_map": _DOCX_STYLE_MAP} if ext == ".docx" else {}
        data = _PREPARE[ext](data) if ext in _PREPARE else data
        try:
            result = self._markitdown.convert_stream(io.BytesIO(data), stream_info=info, **extra)
        except MissingDependencyException as exc:
            raise ConversionError(
                f"cannot convert '{name}': a converter dependency is missing ({exc}); "
                "reinstall the service with `make install`"
            ) from exc
        except FileConversionException as exc:
            raise ConversionError(
                f"could not convert '{name}': {_first_failure(exc)}. The file may be corrupt, "
                "or not really a "
                f"{ext} file; check it opens in its usual application"
            ) from exc
        except UnsupportedFormatException as exc:
            raise ConversionError(
                f"could not convert '{name}': markitdown found no converter that accepts its "
                f"content as {ext}; check that the file really is a {ext} file"
            ) from exc
        except (UnicodeDecodeError, LookupError) as exc:
            raise _undecodable(name, exc) from exc
        title = result.title or (core_title(data) if ext in _PACKAGES else None)
        markdown = _FINISH[ext](result.markdown) if ext in _FINISH else result.markdown
        return self._document(markdown, title, name, ext, route)

    def _document(
        self, markdown: str, found_title: str | None, name: str, ext: str, route: Route
    ) -> Document:
        """A reader's Markdown, normalised, with its title and its pages (slides, sheets)."""
        markdown = normalise_text(markdown)
        pages, page_count = page_spans(markdown, route)
        return Document(
            markdown=markdown,
            title=self._title(found_title, markdown, name, route),
            file_type=ext.lstrip("."),
            page_count=page_count,
            pages=pages,
        )

    @staticmethod
    def _title(found: str | None, markdown: str, name: str, route: Route) -> str:
        if route is Route.ARCHIVE or route is Route.SHEETS:
            # The first heading here is a member file's or a sheet's, not the document's.
            return _file_stem(name)
        return (
            sensible_title(found or "")
            or front_matter_title(markdown)
            or first_heading(markdown)
            or _file_stem(name)
        )


def _without_inline_data(text: str) -> str:
    """Base64 payloads of data URIs (an image pasted into a note by Typora, Obsidian or
    Joplin) cut to `data:<type>;base64...`, as markitdown writes them for HTML and Office
    files: 60 KB of base64 made about 290 chunks of noise, each embedded and each a
    neighbour of any query. The line count stays, so chunks' line numbers do."""
    return _INLINE_DATA.sub(r"\1...", text)


def _tidy(text: str) -> str:
    """What markitdown does to every result: no blanks at line ends, no run of more than
    one empty line."""
    text = "\n".join(line.rstrip() for line in _LINE_END.split(text))
    return _BLANK_RUN.sub("\n\n", text)


def _binary(name: str, found: str, what: str = "") -> ConversionError:
    """Binary data under a text file's name (or none)."""
    what = what or f"a text file ({extension_of(name) or 'no extension'})"
    return ConversionError(
        f"could not convert '{name}': it holds binary data ({found}), so it is not {what}; "
        "a program, an image or an archive under that name? Check what the file really is "
        "and give it its type's extension"
    )


def _undecodable(name: str, exc: Exception) -> ConversionError:
    return ConversionError(
        f"could not decode the text of '{name}' ({exc}); save it as UTF-8 and retry"
    )


def _first_failure(exc: FileConversionException) -> str:
    for attempt in exc.attempts or []:
        if attempt.exc_info is not None:
            error = attempt.exc_info[1]
            return f"{type(error).__name__}: {error}"[:300]
    return str(exc)[:300]
