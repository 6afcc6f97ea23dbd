"""Upstream CSV bytes -> records, read as RFC 4180 and the tools that write CSV have them.

A file's line break is the one that ends its header: a line feed (LF or CRLF) or, as old Mac tools write, a
lone carriage return; a leading UTF-8 byte-order mark is not part of the header. A record is one line, or
several where a quoted field holds line breaks (a pretty-printed config). A clean file is read by Arrow's CSV
reader; a damaged one record by record, so that a damaged line is refused alone, with its reason, and never
costs its neighbours. Line numbers count physical lines (1 is the header); a record has the number of its
first line.
"""

from __future__ import annotations

import csv
import io
import itertools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

BOM = b"\xef\xbb\xbf"
_LF, _CR, _QUOTE = ord("\n"), ord("\r"), ord('"')
MIN_BLOCK_BYTES = 1 << 20  # Arrow's default block; a longer record gets a block twice its size


@dataclass(frozen=True)
class Lines:
    """The physical lines of a file, as byte offsets of each line's text (its line break left out)."""

    data: bytes
    newline: bytes  # b"\n" (LF, or CRLF) or b"\r" (lone CR)
    starts: np.ndarray
    ends: np.ndarray
    quotes: np.ndarray  # the number of '"' characters on each line

    @classmethod
    def of(cls, data: bytes) -> Lines:
        buf = np.frombuffer(data, np.uint8)
        newline = line_break(data)
        breaks = np.flatnonzero(buf == newline[0])
        starts = np.concatenate(([0], breaks + 1))
        ends = np.concatenate((breaks, [len(data)]))
        if len(starts) > 1 and starts[-1] == len(data):  # the last line ends with a line break
            starts, ends = starts[:-1], ends[:-1]
        if newline == b"\n" and len(buf):
            ends = ends - ((ends > starts) & (buf[np.maximum(ends - 1, 0)] == _CR))
        if data.startswith(BOM):
            starts[0] = min(len(BOM), ends[0])
        found = np.flatnonzero(buf == _QUOTE)
        quotes = np.searchsorted(found, ends) - np.searchsorted(found, starts)
        return cls(data, newline, starts, ends, quotes)

    def __len__(self) -> int:
        return len(self.starts)

    def raw(self, first: int, last: int | None = None) -> bytes:
        """The bytes of lines first..last (0-based), the line breaks between them included."""
        return self.data[self.starts[first]: self.ends[first if last is None else last]]

    def text(self, first: int, last: int | None = None) -> str:
        return self.raw(first, last).decode("utf-8", errors="replace")

    def stray_breaks(self) -> bool:
        """Whether a line holds the other line-break character (a CR not before an LF, or an LF in a CR file)."""
        buf = np.frombuffer(self.data, np.uint8)
        if self.newline == b"\r":
            return bool((buf == _LF).any())
        after = np.flatnonzero(buf == _CR) + 1
        return bool(((after >= len(buf)) | (buf[np.minimum(after, len(buf) - 1)] != _LF)).any())


def line_break(data: bytes) -> bytes:
    """The line break that ends the header: b"\\r" for a lone carriage return, else b"\\n" (LF or CRLF)."""
    lf, cr = data.find(b"\n"), data.find(b"\r")
    return b"\r" if cr >= 0 and (lf < 0 or cr < lf - 1) else b"\n"


def _allow_fields_of(size: int) -> None:
    """Let the csv module read a field as long as `size` (its default limit is 128 KiB)."""
    if csv.field_size_limit() < size:
        csv.field_size_limit(size)


def strict_fields(text: str) -> list[str] | None:
    """The fields of `text` as exactly one RFC 4180 record (quotes only around whole fields), else None."""
    _allow_fields_of(len(text))
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        rows = list(itertools.islice(reader, 2))
    except csv.Error:
        return None
    return rows[0] if len(rows) == 1 else None


def lenient_fields(line: str) -> tuple[list[str] | None, str | None]:
    """(fields, None) of one line, or (None, why) where the csv module refuses it."""
    _allow_fields_of(len(line))
    try:
        return next(csv.reader([line]), []), None
    except csv.Error as exc:
        if "\r" in line or "\n" in line:
            kind = "carriage return" if "\r" in line else "line feed"
            return None, f"malformed CSV line: a {kind} inside an unquoted field"
        return None, f"malformed CSV line: {exc}"


def record_at(lines: Lines, first: int, width: int) -> tuple[int | None, list[str] | None]:
    """(last line, fields) of the record that starts at line `first` (0-based): (first, None) for a line whose
    quotes pair up (a record alone); (last, fields) where a later line's quote closes it into one valid record
    of `width` fields; (None, None) where none does (a quote opened and never closed: the line is malformed)."""
    if lines.quotes[first] % 2 == 0:
        return first, None
    odd = np.flatnonzero(lines.quotes[first + 1:] % 2)
    if not len(odd):
        return None, None
    last = first + 1 + int(odd[0])
    fields = strict_fields(lines.text(first, last))
    return (last, fields) if fields is not None and len(fields) == width else (None, None)


def raw_lines(lines: Lines, numbers, width: int | None = None) -> list[str]:
    """The text of the records at line `numbers` (a record spanning lines in full, where it has `width`
    fields: by default the header's); "" for a number outside the file."""
    if width is None:
        width = len(lenient_fields(lines.text(0))[0] or [])
    out = []
    for n in numbers:
        if not 0 < n <= len(lines):
            out.append("")
            continue
        last = record_at(lines, n - 1, width)[0] if n > 1 else None
        out.append(lines.text(n - 1, last))
    return out


def read_clean(lines: Lines, header: list[str], columns: list[str]) -> pa.Table | None:
    """Arrow's reader over a clean file: `columns` as strings plus `line_number`; None for a damaged file (a
    stray line break, an unclosed quote, a malformed record, a blank line that holds spaces, bytes that are
    not UTF-8), which needs `read_damaged`."""
    if lines.stray_breaks():
        return None
    parity = np.cumsum(lines.quotes) % 2
    if parity[-1] or parity[0]:
        return None  # a quote never closed, or a header spanning lines
    closes = parity == 0  # line i ends a record
    firsts = np.flatnonzero(np.concatenate(([True], closes[:-1])))[1:]
    lasts = np.flatnonzero(closes)[1:]
    kept = (lasts > firsts) | (lines.ends[firsts] > lines.starts[firsts])  # Arrow skips empty lines
    firsts, lasts = firsts[kept], lasts[kept]
    spanning = np.flatnonzero(lasts > firsts)
    expected = {}
    for i in spanning:
        fields = strict_fields(lines.text(firsts[i], lasts[i]))
        if fields is None or len(fields) != len(header):
            return None
        expected[int(i)] = dict(zip(header, fields))
    longest = int((lines.ends[lasts] - lines.starts[firsts]).max()) if len(firsts) else 0
    try:
        table = pacsv.read_csv(
            io.BytesIO(lines.data),
            read_options=pacsv.ReadOptions(block_size=max(MIN_BLOCK_BYTES, 2 * longest + 2)),
            parse_options=pacsv.ParseOptions(newlines_in_values=bool(expected)),
            convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c in header}, strings_can_be_null=False,
                quoted_strings_can_be_null=False, include_columns=columns,
            ),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None  # a line with the wrong number of fields, or bytes that are not UTF-8
    if table.num_rows != len(firsts):
        return None  # a blank line of spaces, or Arrow's records are not the lines' (a damaged quote)
    for i, fields in expected.items():
        if table.slice(i, 1).to_pylist()[0] != {c: fields[c] for c in columns}:
            return None
    return table.select(columns).append_column("line_number", pa.array(firsts + 1, pa.int64()))


@dataclass
class Damaged:
    """A damaged file read record by record."""

    table: pa.Table  # accepted records: `columns` as strings plus `line_number`
    rejected: list[tuple[int, str]]  # (line number, reason)
    has_replacement: bool  # some accepted text held bytes that are not UTF-8


def read_damaged(lines: Lines, header: list[str], columns: list[str]) -> Damaged:
    """Each record on its own: a blank line is no record; a line whose quote no later line closes into a
    valid record, or with the wrong number of fields, is refused alone, and reading goes on at the next line."""
    rejected, accepted, numbers, replacement = [], [], [], False
    i = 1
    while i < len(lines):
        line = lines.text(i)
        if not line.strip():
            i += 1
            continue
        last, fields = record_at(lines, i, len(header))
        why = None
        if last is None:
            last, why = i, "malformed CSV line: a quoted field is never closed (an odd number of double quotes)"
        elif fields is None:
            fields, why = lenient_fields(line)
        if fields is not None and len(fields) != len(header):
            fields, why = None, f"malformed CSV line: {len(fields)} fields, header has {len(header)}"
        if fields is None:
            rejected.append((i + 1, why))
        else:
            accepted.append(fields)
            numbers.append(i + 1)
            replacement |= any("\ufffd" in f for f in fields)
        i = last + 1
    rows = list(zip(*accepted)) if accepted else [[] for _ in header]
    table = pa.table({name: pa.array(col, pa.string()) for name, col in zip(header, rows)})
    table = table.select(columns).append_column("line_number", pa.array(numbers, pa.int64()))
    return Damaged(table, rejected, replacement)


def data_lines(lines: Lines) -> list[int]:
    """Line numbers of the lines after the header that hold anything but whitespace."""
    return [i + 1 for i in range(1, len(lines)) if lines.text(i).strip()]
