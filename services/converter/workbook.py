"""Excel workbooks as Markdown: `.xlsx` (openpyxl) and `.xls` 97-2003 (xlrd), in the shape the
OpenDocument reader gives `.ods`: each sheet with text as `## Sheet name` and one table whose
first row is the header, so that sheets become pages the same way.

A cell is written as Excel shows it: the value a formula last computed (as the file stored
it), a number in its cell's number format where that says more than the number (a
percentage, a count of decimals, a currency: `services.converter.cellformat`, without digit
grouping), else as the General format shows it (whole numbers without `.0`, others to 15
significant digits); dates as ISO 8601, TRUE and FALSE, error values as `#DIV/0!`.

Empty rows, empty columns before the first filled one, and trailing empty cells are
dropped; an empty sheet is left out, and so is a hidden or very hidden one, whose tab Excel
does not show (lookup tables, settings), as the Word reader leaves hidden text out.
markitdown's pandas route wrote `NaN` in every empty cell, `Unnamed: 2` over columns without
a header, `4.0` for a whole number in a column with a fraction, and `|` for an empty sheet.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from typing import Any

import olefile
import openpyxl
import xlrd

from libs.errors import ConversionError
from libs.tables import markdown_sheet
from services.converter import ole
from services.converter.cellformat import displayed

Rows = list[list[str]]


def xlsx_markdown(data: bytes, name: str) -> tuple[str, str]:
    """The Markdown of the Excel workbook `data` (Office Open XML) and its title."""
    if data.startswith(ole.MAGIC):
        return _compound_workbook(data, name)
    try:
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise ConversionError(
            f"could not convert '{name}': it does not read as an Excel workbook ({exc}); check "
            "that it opens in Excel, or ingest it under its real extension"
        ) from exc
    try:
        sheets = []
        for sheet in book.worksheets:
            if sheet.sheet_state != "visible":  # hidden or very hidden: no reader sees it
                continue
            sheet.reset_dimensions()  # read every row, whatever size the file states
            cells = ([(c.value, c.number_format) for c in row] for row in sheet.iter_rows())
            sheets.append((sheet.title, _rows(cells)))
        return _markdown(sheets), (book.properties.title or "").strip()
    finally:
        book.close()


def xls_markdown(data: bytes, name: str) -> tuple[str, str]:
    """The Markdown of the Excel 97-2003 workbook `data` and its title."""
    try:
        book = xlrd.open_workbook(file_contents=data, on_demand=True, formatting_info=True)
    except xlrd.XLRDError as exc:
        if "encrypted" in str(exc).lower():
            raise _password(name) from exc
        raise ConversionError(
            f"could not convert '{name}': it does not read as an Excel 97-2003 workbook "
            f"({exc}); check that it opens in Excel, or save it as .xlsx and ingest that"
        ) from exc
    try:
        sheets = []
        for index in range(book.nsheets):
            sheet = book.sheet_by_index(index)
            if not sheet.visibility:  # 1 hidden, 2 very hidden: left out
                rows = ([_xls_cell(book, c) for c in sheet.row(r)] for r in range(sheet.nrows))
                sheets.append((sheet.name, _rows(rows)))
            book.unload_sheet(index)
        return _markdown(sheets), _xls_title(data)
    finally:
        book.release_resources()


def _compound_workbook(data: bytes, name: str) -> tuple[str, str]:
    """An `.xlsx` name over an OLE compound file: Excel's password-protected workbook (the
    real one encrypted inside), or an Excel 97-2003 workbook renamed."""
    try:
        with olefile.OleFileIO(io.BytesIO(data)) as compound:
            encrypted = compound.exists("EncryptedPackage")
            legacy = compound.exists("Workbook") or compound.exists("Book")
    except OSError as exc:
        raise ConversionError(
            f"could not convert '{name}': a damaged Office compound file ({exc})"
        ) from exc
    if encrypted:
        raise _password(name)
    if legacy:
        return xls_markdown(data, name)
    raise ConversionError(
        f"could not convert '{name}': it is an Office 97-2003 file but not a workbook (a Word "
        "or PowerPoint file renamed?); ingest it under its real extension"
    )


def _markdown(sheets: Iterable[tuple[str, Rows]]) -> str:
    return "\n\n".join(markdown_sheet(title, rows) for title, rows in sheets if rows)


def _rows(values: Iterable[Iterable[tuple[Any, str]]]) -> Rows:
    """Cell texts of the rows with text (each cell a value and its number format), without
    trailing empty cells and without the empty columns before the first filled one."""
    rows = []
    for row in values:
        cells = [_text(value, number_format) for value, number_format in row]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            rows.append(cells)
    first = min((next(k for k, c in enumerate(row) if c) for row in rows), default=0)
    return [row[first:] for row in rows]


def _text(value: Any, number_format: str) -> str:
    """A cell as Excel shows it: a number in its number format where `cellformat` reads
    that, else as the General format shows it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float) and (shown := displayed(value, number_format)) is not None:
        return shown
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.15g}"
    if isinstance(value, datetime):
        if value.time() == time(0):
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return str(value)
    return " ".join(str(value).split())


def _xls_cell(book: xlrd.book.Book, cell: xlrd.sheet.Cell) -> tuple[Any, str]:
    """The cell's value as openpyxl would give it, and its number format."""
    kind = cell.ctype
    if kind == xlrd.XL_CELL_DATE:
        try:
            return xlrd.xldate.xldate_as_datetime(cell.value, book.datemode), "General"
        except (ValueError, OverflowError, xlrd.xldate.XLDateError):
            return cell.value, "General"
    if kind == xlrd.XL_CELL_BOOLEAN:
        return bool(cell.value), "General"
    if kind == xlrd.XL_CELL_ERROR:
        return xlrd.error_text_from_code.get(cell.value, "#ERROR"), "General"
    if kind != xlrd.XL_CELL_NUMBER:
        return cell.value, "General"
    index = cell.xf_index
    xf = book.xf_list[index] if index is not None and 0 <= index < len(book.xf_list) else None
    found = book.format_map.get(xf.format_key) if xf is not None else None
    return cell.value, found.format_str if found is not None else "General"


def _xls_title(data: bytes) -> str:
    try:
        with olefile.OleFileIO(io.BytesIO(data)) as compound:
            return ole.summary_title(compound)
    except (OSError, ValueError):
        return ""


def _password(name: str) -> ConversionError:
    return ConversionError(
        f"could not convert '{name}': the workbook is password-protected; remove the password "
        "in Excel (File > Info > Protect Workbook > Encrypt with Password) and ingest it again"
    )
