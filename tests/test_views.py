"""The analyst views mean what docs/warehouse.md says (tests/test_docs.py runs its examples)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelindex_pipeline.warehouse.store import Warehouse
from kernelindex_pipeline.warehouse.views import REGRESSION_Z
from test_ui import LLAMA4 as SEED_EXTERNAL_ID

LLAMA4 = ("llama4_rope", "backward", "NVIDIA H100 80GB HBM3", "hidden2048-kv_heads8-q_heads32-seq2048-bf16")


def rows(home: Path, sql: str, params=None) -> list[dict]:
    with Warehouse(home).reader() as con:
        cursor = con.execute(sql, params or [])
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r)) for r in cursor.fetchall()]


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
                                "AND implementation = 'Liger' AND metric = 'latency' AND gpu = 'NVIDIA H100 PCIe' "
                                "AND workload_slug = 'batch4-seq2048-vocab65536' ORDER BY observed_at")
    versions = [r["liger_version"] for r in series]
    assert "0.3.0" in versions and "0.3.1" in versions
    assert len({r["series_key"] for r in series}) == 1
    assert series[0]["ratio_to_previous"] is None
    assert all(r["ratio_to_previous"] == round(r["median_value"] / p["median_value"], 4)
               for p, r in zip(series, series[1:]))
    (total,) = rows(analyst_home, "SELECT (SELECT count(*) FROM history) = (SELECT count(*) FROM runs) AS same")
    assert total["same"]


def test_regressions_find_the_embedding_backward_slowdown_of_0_6_2(default_home):
    found = rows(default_home, "SELECT * FROM regressions WHERE kernel = 'embedding' AND operation_mode = 'backward' "
                               "AND implementation = 'Liger' AND gpu = 'NVIDIA H100 80GB HBM3' "
                               "AND workload_slug = 'batch8-dim4096-seq2048-vocab4096-fp32'")
    assert len(found) == 1
    (r,) = found
    assert (r["from_version"], r["to_version"], r["direction"]) == ("0.6.1", "0.6.2", "regression")
    assert (r["from_runs"], r["to_runs"]) == (2, 4) and r["change_pct"] == pytest.approx(32.28, abs=0.01)
    assert r["z"] > 100 and r["noise_pct"] < 1


def test_run_to_run_noise_alone_reports_no_regression(default_home):
    """The seed workload's runs span 111-244 us within single releases: none of its release steps is a change,
    for Liger or for the baseline a Liger release does not touch."""
    seed_group = "(SELECT comparison_key FROM runs WHERE external_id = ?)"
    [spread] = rows(default_home, f"SELECT max(median_value) / min(median_value) AS widest FROM history "
                                  f"WHERE comparison_key = {seed_group} AND provider = 'liger' AND liger_version = '0.6.4'",
                    [SEED_EXTERNAL_ID])
    assert spread["widest"] > 2
    assert rows(default_home, f"SELECT * FROM regressions WHERE comparison_key = {seed_group}", [SEED_EXTERNAL_ID]) == []
    projects = rows(default_home, "SELECT DISTINCT r.project FROM regressions g JOIN runs r ON r.run_id = g.to_run_id")
    assert projects == [{"project": "Liger-Kernel"}]


def test_regressions_stand_out_from_their_series_noise_and_are_signed(default_home):
    (bad,) = rows(default_home, f"""
        SELECT count(*) AS n FROM regressions
        WHERE NOT (to_p20 > from_p80 OR to_p80 < from_p20)
           OR z <= {REGRESSION_Z} OR noise_pct <= 0
           OR (direction = 'regression') <> (to_median > from_median)
           OR (change_pct > 0 AND to_median < from_median) OR (change_pct < 0 AND to_median > from_median)""")
    assert bad["n"] == 0
    kinds = {r["direction"] for r in rows(default_home, "SELECT DISTINCT direction FROM regressions")}
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


def test_views_name_the_card_as_claim_checks_do_and_one_group_per_card_and_protocol(analyst_home):
    """`gpu` in the views is model and form factor, claim_checks' spelling: a claim's source runs are found
    under its source_gpu, and within a kernel, pass, metric and workload, a card, protocol and stack is one
    group (a rerun session at the source's own Liger release is a stack of its own)."""
    (joined,) = rows(analyst_home, """
        SELECT count(*) AS claims, count(l.run_id) AS found FROM claim_checks c
        LEFT JOIN leaderboard l ON l.run_id = c.a_run_id AND l.gpu = c.source_gpu""")
    assert joined["claims"] > 0 and joined["found"] == joined["claims"]
    (groups,) = rows(analyst_home, """
        SELECT count(*) AS n FROM (SELECT l.kernel, l.operation_mode, l.metric, l.workload_slug, l.gpu, l.protocol,
                                          r.environment_digest
                                   FROM leaderboard l JOIN runs r USING (run_id)
                                   GROUP BY ALL HAVING count(DISTINCT l.comparison_key) > 1)""")
    assert groups["n"] == 0
    cards = {r["gpu"] for r in rows(analyst_home, "SELECT DISTINCT gpu FROM leaderboard WHERE gpu_model = 'NVIDIA H100'")}
    assert cards >= {"NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"}


def test_withdrawals_name_the_revision_that_stopped_listing_each_run(analyst_home):
    (counts,) = rows(analyst_home, "SELECT (SELECT count(*) FROM withdrawals) AS w, "
                                   "(SELECT count(DISTINCT run_id) FROM withdrawals) AS runs, "
                                   "(SELECT count(*) FROM runs WHERE withdrawn_upstream) AS withdrawn")
    assert counts["w"] == counts["runs"] == counts["withdrawn"] > 0
    (bad,) = rows(analyst_home, """
        SELECT count(*) AS n FROM withdrawals w JOIN snapshots s ON s.revision_key = w.withdrawn_in_revision
        WHERE EXISTS (SELECT 1 FROM observations o WHERE o.run_id = w.run_id AND o.revision_key = w.withdrawn_in_revision)
           OR NOT EXISTS (SELECT 1 FROM run_listings l WHERE l.run_id = w.run_id AND l.stream = s.stream
                          AND l.committed_at < s.committed_at)
           OR EXISTS (SELECT 1 FROM run_listings l WHERE l.run_id = w.run_id AND l.committed_at > s.committed_at)""")
    assert bad["n"] == 0
