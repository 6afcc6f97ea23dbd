"""Whole files that cannot be read, and values below what the source can measure: refused loudly, never lost."""

import dataclasses
import gzip

import pytest
from test_normalize import GOOD, HEADER, REVISION, variant

from kernelindex_pipeline.defs.resources import SHIPPED_UPSTREAM
from kernelindex_pipeline.ingest.normalize import Snapshot, normalize
from kernelindex_pipeline.ingest.sources import DirectorySource

ROWS = [GOOD, GOOD.replace("21:42:04", "21:42:05"), GOOD.replace("21:42:04", "21:42:06")]


def body(newline: str = "\n") -> str:
    return newline.join([HEADER, *ROWS]) + newline


def only(data: bytes):
    return normalize([Snapshot(REVISION, data)])


def data_lines(data: bytes) -> list[int]:
    """Numbers of the lines after the header that hold anything but whitespace."""
    lines = data.decode("utf-8", errors="replace").split("\n")[1:]
    return [n for n, line in enumerate(lines, start=2) if line.strip()]


def accounted(result) -> bool:
    return result.observations.num_rows + result.quarantine.num_rows == result.rows_in


@pytest.mark.parametrize("data, reason", [
    (body().encode("utf-16"), "header is not valid UTF-8"),
    (body().encode("utf-16-le"), "header is not valid UTF-8"),
    (body().replace("kernel_name", "kernel_n\u00e4me").encode("latin-1"), "header is not valid UTF-8"),
    (("\n" + "\n".join(ROWS) + "\n").encode(), "no header line"),
    (("  \t\n" + "\n".join(ROWS) + "\n").encode(), "no header line"),
    (body().replace("y_value_50", "y_median").encode(), "schema drift: missing column(s) y_value_50"),
    (body().replace("x_label", "x_name").encode(), "schema drift"),
])
def test_unparseable_file_refuses_every_data_line_with_one_reason(data, reason):
    result = only(data)
    assert reason in result.unparseable[REVISION.key]
    assert "\n" not in result.unparseable[REVISION.key]
    assert len(data_lines(data)) >= len(ROWS)
    assert result.observations.num_rows == 0
    quarantine = result.quarantine.to_pylist()
    assert [q["line_number"] for q in quarantine] == data_lines(data)
    assert {q["reason"] for q in quarantine} == {result.unparseable[REVISION.key]}
    assert accounted(result)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_raw_lines_of_a_refused_file_are_kept(newline):
    result = only(body(newline).replace("y_value_50", "y_median").encode())
    assert [q["raw_line"] for q in result.quarantine.to_pylist()] == ROWS


@pytest.mark.parametrize("data", [b"", gzip.decompress(gzip.compress(b"")), b"\n", b"   ", b" \r\n\r\n"])
def test_empty_file_is_one_visible_quarantine_row(data):
    result = only(data)
    assert result.unparseable[REVISION.key].startswith(("empty file", "no header line"))
    assert result.observations.num_rows == 0
    (q,) = result.quarantine.to_pylist()
    assert (q["line_number"], q["raw_line"], q["reason"]) == (0, "", result.unparseable[REVISION.key])
    assert (q["source"], q["source_revision"]) == (REVISION.path, REVISION.commit)
    assert result.rows_in == 1 and accounted(result)


def test_empty_file_reason():
    assert only(b"").unparseable == {REVISION.key: "empty file: no header and no rows"}


@pytest.mark.parametrize("data", [
    body().encode(), body("\r\n").encode(), body()[:-1].encode(), body("\r").encode(), body("\r")[:-1].encode(),
    ("\ufeff" + body()).encode(), ("\ufeff" + body("\r\n")).encode(), ("\ufeff" + body("\r")).encode(),
])
def test_well_formed_files_are_parseable_whatever_their_line_breaks(data):
    result = only(data)
    assert result.unparseable == {} and result.quarantine.num_rows == 0
    assert result.observations.column("line_number").to_pylist() == [2, 3, 4]
    assert result.observations.column("median_value").to_pylist() == [153632] * 3


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_damaged_line_is_refused_alone_whatever_the_line_breaks(newline):
    data = body(newline).replace(ROWS[1], "only,three,fields").encode()
    result = only(data)
    assert result.observations.column("line_number").to_pylist() == [2, 4]
    (q,) = result.quarantine.to_pylist()
    assert (q["line_number"], q["raw_line"]) == (3, "only,three,fields") and "malformed CSV line" in q["reason"]


def test_a_byte_order_mark_alone_is_no_header():
    assert only(b"\xef\xbb\xbf\n" + "\n".join(ROWS).encode()).unparseable[REVISION.key].startswith("no header line")


def test_stray_carriage_return_in_a_data_line_refuses_that_line_only():
    data = body().replace(ROWS[1], ROWS[1].replace("liger,backward", "liger\r,backward")).encode()
    result = only(data)
    assert result.unparseable == {}
    assert result.observations.num_rows == 2
    (q,) = result.quarantine.to_pylist()
    assert q["line_number"] == 3 and "carriage return" in q["reason"]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_header_only_file_is_an_empty_listing(newline):
    result = only((HEADER + newline).encode())
    assert result.unparseable == {} and result.rows_in == 0


def test_unparseable_revision_does_not_affect_its_neighbours():
    other = dataclasses.replace(REVISION, commit="b" * 40)
    result = normalize([Snapshot(REVISION, b""), Snapshot(other, body().encode())])
    assert result.unparseable == {REVISION.key: "empty file: no header and no rows"}
    assert set(result.observations.column("revision_key").to_pylist()) == {other.key}
    assert result.quarantine.column("revision_key").to_pylist() == [REVISION.key]
    assert result.rows_in == 4 and accounted(result)


@pytest.mark.parametrize("values, reason", [
    (("1e-07", "1e-07", "1e-07"), "latency 1e-07 ms is below the timer's resolution (1 µs)"),
    (("0.0004", "0.002", "0.003"), "latency 0.0004 ms is below the timer's resolution (1 µs)"),
    (("0.0009994", "0.0009994", "0.0009994"), "below the timer's resolution"),
])
def test_latency_below_timer_resolution_is_quarantined_not_rounded(values, reason):
    p20, p50, p80 = values
    row = variant(y_value_20=p20, y_value_50=p50, y_value_80=p80, timestamp="2025-08-07 21:42:05")
    result = only(body().replace(ROWS[1], row).encode())
    assert result.observations.num_rows == 2
    assert min(result.observations.column("p20_value").to_pylist()) > 0
    (q,) = result.quarantine.to_pylist()
    assert q["line_number"] == 3 and reason in q["reason"]


def test_latency_at_timer_resolution_is_kept():
    row = variant(y_value_20="0.001", y_value_50="0.001", y_value_80="0.001", timestamp="2025-08-07 21:42:05")
    result = only(body().replace(ROWS[1], row).encode())
    assert result.quarantine.num_rows == 0
    assert 1000 in result.observations.column("median_value").to_pylist()


def test_memory_that_rounds_to_zero_bytes_is_quarantined():
    tiny = variant(metric_name="memory", metric_unit="MB", y_value_20="1e-07", y_value_50="1e-07", y_value_80="1e-07")
    byte = variant(metric_name="memory", metric_unit="MB", y_value_20="1e-06", y_value_50="1e-06", y_value_80="1e-06")
    result = only(body().replace(ROWS[1], tiny).replace(ROWS[2], byte).encode())
    (q,) = result.quarantine.to_pylist()
    assert q["line_number"] == 3 and q["reason"] == "memory 1e-07 MB rounds to 0 bytes"
    assert sorted(result.observations.column("median_value").to_pylist()) == [1, 153632]


def test_shipped_snapshots_are_all_parseable_and_above_resolution():
    source = DirectorySource(str(SHIPPED_UPSTREAM))
    snapshots = [Snapshot(r, source.read(r)) for r in source.list_revisions()]
    assert snapshots
    result = normalize(snapshots)
    assert result.unparseable == {}
    reasons = result.quarantine.column("reason").to_pylist()
    assert not [r for r in reasons if "resolution" in r or "0 bytes" in r]
    assert accounted(result)
