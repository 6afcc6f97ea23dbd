"""`kernelindex query` output formats and errors, and `kernelindex export` from the command line."""

from __future__ import annotations

import csv
import io
import json

import pytest

from kernelindex_pipeline import cli
from kernelindex_pipeline.cli import format_rows

SQL = ("SELECT rank, implementation, median_value, ratio_to_best FROM leaderboard WHERE kernel = 'llama4_rope' "
       "AND operation_mode = 'backward' AND gpu = 'NVIDIA H100 80GB HBM3' "
       "AND workload_slug = 'hidden2048-kv_heads8-q_heads32-seq2048-bf16' ORDER BY rank")


@pytest.fixture
def kernelindex(analyst_home, monkeypatch, capsys):
    monkeypatch.setenv("KERNELINDEX_HOME", str(analyst_home))

    def run(*args):
        code = cli.main(list(args))
        out, err = capsys.readouterr()
        return code, out, err
    return run


def test_query_prints_an_aligned_table(kernelindex):
    code, out, _ = kernelindex("query", SQL)
    assert code == 0
    header, rule, first, second, footer = out.rstrip("\n").split("\n")
    assert header.split() == ["rank", "implementation", "median_value", "ratio_to_best"]
    assert set(rule.replace(" ", "")) == {"-"}
    widths = [len(w) for w in rule.split("  ")]
    assert len(first) == len(second) == sum(widths) + 2 * (len(widths) - 1)
    assert second.split()[:3] == ["2", "Liger", "153632"] and footer == "(2 rows)"
    assert first.index("Transformers") == header.index("implementation")
    assert second.index("153632") + len("153632") == header.index("median_value") + len("median_value")


def test_query_csv_and_json_are_for_scripts(kernelindex):
    _, out, _ = kernelindex("query", "--format", "csv", SQL)
    table = list(csv.DictReader(io.StringIO(out)))
    assert [r["implementation"] for r in table] == ["Transformers", "Liger"] and table[1]["median_value"] == "153632"
    _, out, _ = kernelindex("query", "--format", "json", SQL)
    data = json.loads(out)
    assert data[1] == {"rank": 2, "implementation": "Liger", "median_value": 153632,
                       "ratio_to_best": data[1]["ratio_to_best"]} and data[0]["ratio_to_best"] == 1.0


def test_table_cuts_long_cells_but_csv_keeps_them():
    long = "x" * 200
    assert "…" in format_rows(["v"], [(long,)], "table") and long not in format_rows(["v"], [(long,)], "table")
    assert long in format_rows(["v"], [(long,)], "csv")


def test_bad_sql_is_one_line_on_stderr(kernelindex):
    code, out, err = kernelindex("query", "SELECT * FROM no_such_view")
    assert code == 1 and out == "" and err.startswith("kernelindex: query failed:") and err.count("\n") == 1


@pytest.mark.parametrize("sql", ["", "   ", "-- just a comment", "/* a block comment */", ";", " ; -- twice\n;"])
def test_sql_without_a_statement_is_one_line_on_stderr(kernelindex, sql):
    code, out, err = kernelindex("query", sql)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("kernelindex: query ") and "SELECT count(*) FROM runs" in err


def test_query_is_read_only(kernelindex):
    code, _, err = kernelindex("query", "DROP VIEW leaderboard")
    assert code == 1 and "read-only" in err.lower()


def test_export_without_a_warehouse_says_so(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("KERNELINDEX_HOME", str(tmp_path / "empty"))
    assert cli.main(["export", "--format", "json", str(tmp_path / "out")]) == 1
    assert "run `kernelindex ingest` first" in capsys.readouterr().err


def test_export_reports_what_it_wrote(kernelindex, tmp_path):
    code, out, _ = kernelindex("export", "--format", "json", str(tmp_path))
    assert code == 0 and out.startswith("exported ") and "manifests and index.json" in out


def test_the_command_exits_with_its_code_and_all_of_its_output(analyst_home, tmp_path):
    """`kernelindex` (the console script's `run`) ends the process without the interpreter's teardown: its
    exit code and every line it printed still arrive."""
    import subprocess
    import sys

    from conftest import cli_env

    from kernelindex_pipeline.warehouse.store import Warehouse

    command = [sys.executable, "-c", "import sys; from kernelindex_pipeline.cli import run; "
               "sys.argv[0] = 'kernelindex'; run()"]
    listed = subprocess.run([*command, "query", "SELECT run_id FROM runs ORDER BY run_id", "--format", "csv"],
                            env=cli_env(analyst_home), capture_output=True, text=True)
    with Warehouse(analyst_home).reader() as con:
        expected = [r for (r,) in con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]
    assert listed.returncode == 0 and listed.stdout.splitlines() == ["run_id", *expected]
    missing = subprocess.run([*command, "show", "no-such-run"], env=cli_env(analyst_home), capture_output=True,
                             text=True)
    assert missing.returncode == 1 and missing.stderr.strip().startswith("kernelindex: no run")
