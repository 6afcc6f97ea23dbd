"""The analyst views: every query documented in docs/warehouse.md runs on the shipped warehouse, and each
view means what the page says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelindex_pipeline.warehouse import Warehouse

DOC = Path(__file__).resolve().parents[1] / "docs" / "warehouse.md"
DOC_QUERIES = re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
VIEWS = ("leaderboard", "speedups", "history", "regressions", "rank_confidence", "rank_changes")
LLAMA4 = ("llama4_rope", "backward", "NVIDIA H100", "hidden2048-kv_heads8-q_heads32-seq2048-bf16")


def rows(home: Path, sql: str, params=None) -> list[dict]:
    with Warehouse(home).reader() as con:
        cursor = con.execute(sql, params or [])
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r)) for r in cursor.fetchall()]


def test_every_view_is_documented_with_a_query():
    assert len(DOC_QUERIES) >= len(VIEWS)
    for view in VIEWS:
        assert f"## `{view}`" in DOC.read_text(encoding="utf-8")
        assert any(re.search(rf"\bFROM {view}\b", q) for q in DOC_QUERIES), view


@pytest.mark.parametrize("sql", DOC_QUERIES, ids=[re.search(r"FROM (\w+)", q).group(1) for q in DOC_QUERIES])
def test_documented_query_runs_and_returns_rows(analyst_home, sql):
    assert rows(analyst_home, sql), sql


def test_leaderboard_ratio_to_best(analyst_home):
    board = rows(analyst_home, "SELECT * FROM leaderboard WHERE kernel = ? AND operation_mode = ? AND gpu = ? "
                               "AND workload_slug = ? AND metric = 'latency' ORDER BY rank", list(LLAMA4))
    assert [r["rank"] for r in board] == [1, 2]
    assert board[0]["ratio_to_best"] == 1.0
    assert board[1]["implementation"] == "Liger" and board[1]["median_value"] == 153632
    assert board[1]["ratio_to_best"] == round(153632 / board[0]["median_value"], 4)
    (bad,) = rows(analyst_home, "SELECT count(*) AS n FROM leaderboard WHERE ratio_to_best < 1 "
                                "OR (rank = 1 AND ratio_to_best <> 1)")
    assert bad["n"] == 0
    (counts,) = rows(analyst_home, "SELECT (SELECT count(*) FROM leaderboard) AS board, (SELECT count(*) FROM ranks) AS ranks")
    assert counts["board"] == counts["ranks"]


def test_speedups_pair_liger_with_baselines_of_the_same_group(analyst_home):
    pairs = rows(analyst_home, "SELECT * FROM speedups WHERE kernel = ? AND operation_mode = ? AND gpu = ? "
                               "AND workload_slug = ?", list(LLAMA4))
    assert [(p["liger_implementation"], p["baseline_implementation"]) for p in pairs] == [("Liger", "Transformers")]
    assert pairs[0]["speedup"] == round(pairs[0]["baseline_median"] / 153632, 4) and pairs[0]["speedup"] < 1
    (bad,) = rows(analyst_home, """
        SELECT count(*) AS n FROM speedups s JOIN runs l ON l.run_id = s.liger_run_id JOIN runs b ON b.run_id = s.baseline_run_id
        WHERE l.comparison_key <> b.comparison_key OR l.gpu <> b.gpu OR l.workload_slug <> b.workload_slug
           OR l.project <> 'Liger-Kernel' OR b.project = 'Liger-Kernel'""")
    assert bad["n"] == 0


def test_history_follows_one_series_across_versions(analyst_home):
    series = rows(analyst_home, "SELECT * FROM history WHERE kernel = 'jsd' AND operation_mode = 'forward' "
                                "AND implementation = 'Liger' AND metric = 'latency' AND gpu = 'NVIDIA H100' "
                                "AND workload_slug = 'batch4-seq2048-vocab65536' ORDER BY observed_at")
    versions = [r["liger_version"] for r in series]
    assert "0.3.0" in versions and "0.3.1" in versions
    assert len({r["series_key"] for r in series}) == 1
    assert series[0]["ratio_to_previous"] is None
    assert all(r["ratio_to_previous"] == round(r["median_value"] / p["median_value"], 4)
               for p, r in zip(series, series[1:]))
    (total,) = rows(analyst_home, "SELECT (SELECT count(*) FROM history) = (SELECT count(*) FROM runs) AS same")
    assert total["same"]


def test_regressions_find_the_jsd_forward_slowdown_of_0_3_1(analyst_home):
    found = rows(analyst_home, "SELECT * FROM regressions WHERE kernel = 'jsd' AND operation_mode = 'forward' "
                               "AND implementation = 'Liger' AND gpu = 'NVIDIA H100' "
                               "AND workload_slug = 'batch4-seq2048-vocab65536'")
    assert len(found) == 1
    (r,) = found
    assert (r["from_version"], r["to_version"], r["direction"]) == ("0.3.0", "0.3.1", "regression")
    assert r["change_pct"] == pytest.approx(11.84, abs=0.01)
    assert r["from_p80"] < r["to_p20"]
    assert r["to_median"] - r["from_median"] > max(r["from_spread"], r["to_spread"]) > 0


def test_regressions_are_beyond_the_spread_and_signed(analyst_home):
    (bad,) = rows(analyst_home, """
        SELECT count(*) AS n FROM regressions
        WHERE NOT (to_p20 > from_p80 OR to_p80 < from_p20)
           OR abs(to_median - from_median) <= greatest(from_spread, to_spread)
           OR (direction = 'regression') <> (to_median > from_median)
           OR (change_pct > 0 AND to_median < from_median) OR (change_pct < 0 AND to_median > from_median)""")
    assert bad["n"] == 0
    kinds = {r["direction"] for r in rows(analyst_home, "SELECT DISTINCT direction FROM regressions")}
    assert kinds == {"regression", "improvement"}


def test_rank_confidence_matches_the_intervals(analyst_home):
    (bad,) = rows(analyst_home, """
        SELECT count(*) AS n FROM rank_confidence
        WHERE (confidence = 'separated') <> coalesce(separated, false)
           OR (confidence = 'separated' AND NOT first_p80 < second_p20)
           OR (confidence = 'overlapping' AND first_p80 < second_p20)""")
    assert bad["n"] == 0
    (groups,) = rows(analyst_home, "SELECT (SELECT count(*) FROM rank_confidence) = "
                                   "(SELECT count(DISTINCT comparison_key) FROM ranks WHERE group_size > 1) AS same")
    assert groups["same"]
    llama = rows(analyst_home, "SELECT * FROM rank_confidence WHERE kernel = ? AND operation_mode = ? AND gpu = ? "
                               "AND workload_slug = ?", list(LLAMA4))
    assert llama[0]["second_implementation"] == "Liger" and llama[0]["confidence"] == "separated"


def test_rank_changes_compare_orders(analyst_home):
    changes = rows(analyst_home, "SELECT * FROM rank_changes")
    assert changes and all(c["previous_order"] != c["current_order"] for c in changes)
    assert len({(c["previous_revision"], c["latest_revision"]) for c in changes}) == 1
