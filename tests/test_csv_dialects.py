"""Every CSV a real tool writes, built from a shipped snapshot: other line breaks, a byte-order mark, quoted
fields holding line breaks, a very long line, and numbers written with thousands separators."""

from __future__ import annotations

import csv
import io
import json

import pytest
from conftest import main_rows, read_snapshot

from kernelindex_pipeline.ingest.normalize import UPSTREAM_COLUMNS, Snapshot, normalize
from kernelindex_pipeline.ingest.sources import Revision

SHIPPED = read_snapshot(main_rows()[-1])  # the newest main-branch file, as upstream wrote it (CRLF)
LF = SHIPPED.replace(b"\r\n", b"\n")
REVISION = Revision("2026-06-16T19:10:30+00:00", "all_benchmark_data", "c" * 40,
                    "benchmark/data/all_benchmark_data.csv", "test")
OBSERVED = ["run_id", "line_number", "median_value", "p20_value", "p80_value", "observed_at", "liger_version"]


def landed(data: bytes):
    result = normalize([Snapshot(REVISION, data)])
    assert result.observations.num_rows + result.quarantine.num_rows == result.rows_in
    return result


def observed(result) -> list[dict]:
    return result.observations.select(OBSERVED).sort_by("line_number").to_pylist()


def quarantined(result) -> list[tuple]:
    return [(q["line_number"], q["reason"], q["raw_line"]) for q in result.quarantine.to_pylist()]


def rows_of(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode(), newline="")))


def written(rows: list[dict], newline: str = "\n") -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=UPSTREAM_COLUMNS, lineterminator=newline)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


@pytest.fixture(scope="module")
def original():
    result = landed(LF)
    assert b"\r" not in LF and result.observations.num_rows > 2000 and result.unparseable == {}
    return result


@pytest.mark.parametrize("variant", {
    "crlf": SHIPPED,
    "lone-cr": LF.replace(b"\n", b"\r"),
    "bom-lf": b"\xef\xbb\xbf" + LF,
    "bom-crlf": b"\xef\xbb\xbf" + SHIPPED,
    "bom-lone-cr": b"\xef\xbb\xbf" + LF.replace(b"\n", b"\r"),
    "no-final-line-break": SHIPPED.removesuffix(b"\r\n"),
}.items(), ids=lambda v: v[0] if isinstance(v, tuple) else v)
def test_other_line_breaks_and_a_byte_order_mark_land_exactly_the_rows_of_the_lf_file(variant, original):
    name, data = variant
    result = landed(data)
    assert result.unparseable == {}
    assert observed(result) == observed(original)
    assert quarantined(result) == quarantined(original)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("damaged", [False, True], ids=["clean", "beside-a-damaged-line"])
def test_a_quoted_pretty_printed_config_lands_as_one_record(newline, damaged, original):
    rows = rows_of(LF)
    at = 10
    config = json.loads(rows[at]["extra_benchmark_config_str"])
    rows[at]["extra_benchmark_config_str"] = json.dumps(config, indent=2).replace("\n", newline)
    extra = rows[at]["extra_benchmark_config_str"].count(newline)
    data = written(rows, newline)
    if damaged:  # an unclosed quote two records later: the file is read record by record
        lines = data.split(newline.encode())
        lines[at + 3 + extra] = lines[at + 3 + extra].replace(b",", b',"', 1)
        data = newline.encode().join(lines)
    result = landed(data)
    shift = {n: n + extra if n > at + 2 else n for n in range(2, len(rows) + 2)}
    want = [{**o, "line_number": shift[o["line_number"]]} for o in observed(original)]
    if damaged:
        broken = at + 4 + extra
        want = [o for o in want if o["line_number"] != broken]
        assert [(n, reason) for n, reason, _ in quarantined(result)] == [
            (broken, "malformed CSV line: a quoted field is never closed (an odd number of double quotes)")]
    else:
        assert quarantined(result) == []
    assert observed(result) == want
    configs = result.dims.column("extra_benchmark_config_str").to_pylist()
    assert sum(newline in c for c in configs) == 1  # the pretty-printed text, read whole: the same run as before


@pytest.mark.parametrize("length", [200_000, 3_000_000])
@pytest.mark.parametrize("damage", ["", "cut short", "unclosed quote"])
def test_a_damaged_line_beside_a_very_long_line_costs_only_itself(length, damage, original):
    rows = rows_of(LF)
    rows[20]["x_label"] = "x" * length  # a label: no part of a run's identity or values
    data = written(rows)
    lines = data.split(b"\n")
    if damage == "cut short":
        lines[22] = lines[22][: len(lines[22]) // 2]
    elif damage == "unclosed quote":
        lines[22] = b'"' + lines[22]
    result = landed(b"\n".join(lines))
    want = [o for o in observed(original) if not damage or o["line_number"] != 23]
    assert observed(result) == want
    assert [n for n, _, _ in quarantined(result)] == ([23] if damage else [])


def _large_number(row: dict, column: str) -> str | None:
    """The name of a whole number of 1,000 or more in the row's x_value or config (None where it has none)."""
    if column == "x_value":
        return "x_value" if row["x_value"].isdigit() and int(row["x_value"]) >= 1000 else None
    config = json.loads(row["extra_benchmark_config_str"])
    return next((k for k, v in config.items() if type(v) is int and v >= 1000), None)


@pytest.mark.parametrize("column", ["x_value", "config"])
def test_a_number_with_thousands_separators_is_quarantined_never_a_new_workload(column, original):
    rows = rows_of(LF)
    at, name = next((i, n) for i, r in enumerate(rows) if (n := _large_number(r, column)))
    if column == "x_value":
        grouped = rows[at]["x_value"] = f"{int(rows[at]['x_value']):,}"
    else:
        config = json.loads(rows[at]["extra_benchmark_config_str"])
        grouped = config[name] = f"{config[name]:,}"
        rows[at]["extra_benchmark_config_str"] = json.dumps(config)
    result = landed(written(rows))
    (q,) = result.quarantine.to_pylist()
    assert q["line_number"] == at + 2
    assert "a number written with thousands separators" in q["reason"] and repr(grouped) in q["reason"]
    assert observed(result) == [o for o in observed(original) if o["line_number"] != at + 2]
    assert not any("," in slug for slug in result.workloads.column("workload_slug").to_pylist())
