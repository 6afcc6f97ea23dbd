"""The documentation stays true to the warehouse: every SQL example in the README and docs/ runs on the
default build and returns what its text says, every table, view and column is documented in
docs/warehouse.md, and the figures the README quotes are what the queries give."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from kernelindex_pipeline.warehouse.store import Warehouse

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
WAREHOUSE_DOC = REPO / "docs" / "warehouse.md"


def _examples() -> list[tuple[str, str]]:
    """(where, SQL) of every example: ```sql blocks, `kernelindex query "..."`, `duckdb ... -c "..."` and
    `.sql('...')` commands, and the docs/*.sql files the README runs through `$(cat ...)`."""
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for n, block in enumerate(re.findall(r"```sql[^\n]*\n(.*?)```", text, flags=re.S)):
            found.append((f"{doc.name}:sql{n + 1}", block))
        for n, sql in enumerate(re.findall(r"kernelindex query (?:--format \w+ )?\"([^\"$]+)\"", text)):
            if sql != "SQL":  # the command line's synopsis
                found.append((f"{doc.name}:query{n + 1}", sql))
        for n, sql in enumerate(re.findall(r"duckdb [^\n\"]*-c \"([^\"]+)\"", text)):
            found.append((f"{doc.name}:duckdb{n + 1}", sql))
        for n, sql in enumerate(re.findall(r"\.sql\('([^']+)'\)", text)):
            found.append((f"{doc.name}:python{n + 1}", sql))
    for path in sorted((REPO / "docs").glob("*.sql")):
        found.append((path.name, path.read_text(encoding="utf-8")))
    return found


EXAMPLES = _examples()


def run(home: Path, sql: str) -> list[dict]:
    """The example as an analyst runs it: on the warehouse read-only, paths under data/ in this home."""
    sql = sql.replace("'data/", f"'{home}/")
    con = duckdb.connect(str(Warehouse(home).db_path.resolve()), read_only=True)
    try:
        cursor = con.execute(sql)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r)) for r in cursor.fetchall()]
    finally:
        con.close()


def _leaderboard(rows, home):
    """One group: each implementation once, a single rank 1, ranks in order."""
    assert len({r["implementation"] for r in rows}) == len(rows) >= 2
    assert [r["rank"] for r in rows].count(1) == 1 and [r["rank"] for r in rows] == sorted(r["rank"] for r in rows)
    assert rows[0]["ratio_to_best"] == 1.0


def _history(rows, home):
    """One series: each ratio_to_previous is the median over the row above it."""
    assert len(rows) >= 2 and rows[0]["ratio_to_previous"] is None
    assert all(r["ratio_to_previous"] == round(r["median_value"] / p["median_value"], 4) for p, r in zip(rows, rows[1:]))


def _regressions(rows, home):
    assert 0 < len(rows) <= 10 and all(r["direction"] == "regression" and r["change_pct"] > 0 for r in rows)
    assert [r["change_pct"] for r in rows] == sorted((r["change_pct"] for r in rows), reverse=True)


def _speedups(rows, home):
    assert all(r["worst"] <= r["median_speedup"] <= r["best"] for r in rows)


def _withdrawals(rows, home):
    (withdrawn,) = run(home, "SELECT count(*) AS n FROM runs WHERE withdrawn_upstream")
    assert sum(r["runs"] for r in rows) == withdrawn["n"]


def _published(rows, home):
    assert [r["identifier"] for r in rows] == ["01a016ad", "01a0202b"]


def _workload_params(rows, home):
    """Typed parameters: the hidden sizes are integers in numeric order, each as the JSON definition says."""
    hidden = [r["hidden"] for r in rows]
    assert all(isinstance(h, int) for h in hidden) and hidden == sorted(hidden) and len(set(hidden)) > 3
    [(from_json,)] = [tuple(r.values()) for r in run(home, """
        SELECT count(*) FROM workload_params w JOIN workloads d USING (workload_digest)
        WHERE w.hidden IS DISTINCT FROM TRY_CAST(d.definition->>'$.spec.parameters.hidden' AS BIGINT)""")]
    assert from_json == 0


SHAPES = {
    r"FROM workload_params w": _workload_params,
    r"FROM leaderboard\nWHERE": _leaderboard,
    r"FROM history\n": _history,
    r"FROM regressions\n": _regressions,
    r"FROM speedups\n": _speedups,
    r"FROM withdrawals": _withdrawals,
    r"FROM published_identifiers p": _published,
}


@pytest.mark.parametrize("where, sql", EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_every_sql_example_runs_on_the_default_build_with_its_shape(default_home, where, sql):
    if "'sha256:…'" in sql:  # a placeholder for a digest the reader has: one the warehouse has
        (alias,) = run(default_home, "SELECT v1alpha1_digest FROM digest_aliases LIMIT 1")
        sql = sql.replace("'sha256:…'", f"'{alias['v1alpha1_digest']}'")
    rows = run(default_home, sql)
    if "Expected: no rows." in sql:  # a check, such as labels that contradict their own interval
        assert rows == [], f"{where} finds {rows}"
        return
    assert rows, f"{where} returns nothing"
    for pattern, shape in SHAPES.items():
        if re.search(pattern, sql):
            shape(rows, default_home)


def test_the_examples_cover_every_view():
    with_examples = " ".join(sql for _, sql in EXAMPLES)
    for view in ("leaderboard", "speedups", "history", "regressions", "rank_confidence", "rank_changes",
                 "golden_vs_newest", "digest_aliases", "verdicts_by_kernel", "withdrawals", "published_identifiers",
                 "workload_params"):
        assert re.search(rf"\bFROM {view}\b", with_examples), view


def test_the_readme_verdict_table_is_what_its_query_gives(default_home):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| kernel | groups | rechecked |"):]
    lines = [line for line in table.split("\n\n")[0].splitlines()[2:]]
    quoted = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    rows = run(default_home, (REPO / "docs" / "verdict-summary.sql").read_text(encoding="utf-8"))
    assert quoted == [[str(v) for v in r.values()] for r in rows]
    for r in run(default_home, (REPO / "docs" / "claim-coverage.sql").read_text(encoding="utf-8")):
        assert f"{r['answered']:,} of the {r['groups']:,}" in readme or f"{r['answered']:,} ({r['percent']}%)" in readme


def test_every_table_view_and_column_is_documented(default_home):
    doc = WAREHOUSE_DOC.read_text(encoding="utf-8")
    sections = re.split(r"\n(?=#{2,3} )", doc)
    with Warehouse(default_home).reader() as con:
        columns = con.execute("SELECT table_name, list(column_name ORDER BY ordinal_position) FROM "
                              "information_schema.columns WHERE table_schema = 'main' GROUP BY 1 ORDER BY 1").fetchall()
    assert len(columns) > 30
    undocumented = {}
    for relation, names in columns:
        about = "".join(s for s in sections if re.search(rf"^#{{2,3}} .*`{relation}`", s, re.M)
                        or re.search(rf"^- `{relation}`", s, re.M))
        missing = [n for n in names if f"`{n}`" not in about] if about else ["(no section)"]
        if missing:
            undocumented[relation] = missing
    assert not undocumented, undocumented


def test_the_contract_is_in_the_repository():
    contract = REPO / "docs" / "contract.md"
    assert "# KernelIndex pipeline: the outside contract" in contract.read_text(encoding="utf-8")
    assert "docs/contract.md" in (REPO / "README.md").read_text(encoding="utf-8")
