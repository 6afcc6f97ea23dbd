"""Both shipped sources in one warehouse: the main-branch files and Liger's gh-pages per-commit runs."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import query
from shipped_warehouse import REPO, SHIPPED_UPSTREAM, ingest_into

from kernelindex_pipeline import cli

GH_PAGES = REPO / "data" / "upstream" / "liger-kernel-gh-pages"
SEED = "llama4_rope/backward/liger/nvidia-h100-80gb-hbm3/hidden2048-kv_heads8-q_heads32-seq2048-bf16/2025-08-07-21-42-04"


@pytest.fixture(scope="module")
def both_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("both-sources")
    assert ingest_into(home, "--source", str(SHIPPED_UPSTREAM), "--source", str(GH_PAGES)) == 0
    return home


def _data_lines() -> int:
    total = 0
    for path in GH_PAGES.glob("*.csv.gz"):
        lines = gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()
        total += sum(1 for line in lines[1:] if line.strip())
    return total


def test_every_gh_pages_line_is_a_run_listing_or_quarantined(both_home):
    (listed,) = query(both_home, "SELECT count(*) FROM run_listings WHERE source = 'liger-kernel-gh-pages'")[0]
    (refused,) = query(both_home, "SELECT count(*) FROM quarantine q JOIN snapshots s USING (revision_key) "
                                  "WHERE s.source = 'liger-kernel-gh-pages'")[0]
    assert listed + refused == _data_lines()


def test_a_measurement_in_both_sources_is_one_run_ranked_once(both_home):
    rows = query(both_home, "SELECT run_id, list(DISTINCT source ORDER BY source) FROM run_listings "
                            "GROUP BY 1 HAVING count(DISTINCT source) = 2 LIMIT 50")
    assert rows, "no measurement appears in both sources"
    ids = [r for r, _ in rows]
    assert query(both_home, "SELECT count(*), count(DISTINCT run_id) FROM runs WHERE list_contains(?, run_id)",
                 [ids]) == [(len(ids), len(ids))]
    assert query(both_home, "SELECT count(*) - count(DISTINCT run_id) FROM ranks") == [(0,)]


def test_gh_pages_runs_know_their_commit_release_and_removal(both_home):
    sources = dict(query(both_home, "SELECT source, count(*) FROM snapshots GROUP BY 1"))
    assert sources["liger-kernel-gh-pages"] == 46 and sources["liger-kernel-bench"] == 38
    assert query(both_home, "SELECT count(*) FROM snapshots WHERE state = 'deleted'") == [(5,)]
    (release_runs,) = query(both_home, "SELECT count(*) FROM runs WHERE release IS NOT NULL")[0]
    (with_commit,) = query(both_home, "SELECT count(*) FROM runs WHERE source = 'liger-kernel-gh-pages' "
                                      "AND benchmarked_commit IS NULL")[0]
    assert release_runs > 0 and with_commit == 0
    removed = query(both_home, "SELECT count(*) FILTER (WHERE NOT r.withdrawn_upstream) FROM runs r "
                               "WHERE r.run_id IN (SELECT run_id FROM run_listings l JOIN snapshots s ON "
                               "s.stream = l.stream AND s.state = 'deleted') AND r.run_id NOT IN "
                               "(SELECT run_id FROM run_listings WHERE source = 'liger-kernel-bench')")
    assert removed == [(0,)]  # a run of a removed gh-pages run, listed nowhere else, is withdrawn


def test_the_seed_manifest_is_unchanged_by_the_second_source(both_home, analyst_home, monkeypatch, capsys):
    shown = []
    for home in (analyst_home, both_home):
        monkeypatch.setenv("KERNELINDEX_HOME", str(home))
        assert cli.main(["show", SEED]) == 0
        shown.append(json.loads(capsys.readouterr().out))
    assert shown[0] == shown[1]
