"""Ingesting snapshot N+1 after N keeps every run of N: rows upstream dropped are marked
`withdrawn_upstream`, never deleted, and ranks follow what upstream still lists."""

from __future__ import annotations

from conftest import (
    BASE_REVISIONS,
    contract_tables,
    copy_home,
    ingest,
    main_rows,
    query,
    warehouse_state,
    write_snapshot_dir,
)

RUN_COLUMNS = ("run_id, external_id, title, kernel, operation_mode, provider, metric, unit, median_value, p20_value, "
               "p80_value, gpu, workload_slug, observed_at, first_seen_revision, comparison_key, liger_version")
SOURCE_NATIVE = "evidence_level = 'source-native'"


def key(row: dict) -> str:
    return f"all_benchmark_data@{row['commit'][:12]}"


def test_the_next_snapshot_keeps_every_run_and_withdraws_what_upstream_dropped(tmp_path, base_warehouse,
                                                                              next_warehouse):
    rows = main_rows()[:BASE_REVISIONS + 1]
    previous, latest = key(rows[-2]), key(rows[-1])
    home = copy_home(base_warehouse, tmp_path / "home")
    before = {r[0]: r for r in query(home, f"SELECT {RUN_COLUMNS} FROM runs WHERE {SOURCE_NATIVE}")}
    ranked_before = set(query(home, "SELECT run_id, rank, group_size FROM ranks"))
    assert before and not query(home, f"SELECT 1 FROM runs WHERE {SOURCE_NATIVE} AND withdrawn_upstream")

    result = ingest(home, write_snapshot_dir(tmp_path / "source", rows))
    assert f"ingested 1 new of {len(rows)}" in result.stdout

    after = {r[0]: r for r in query(home, f"SELECT {RUN_COLUMNS} FROM runs WHERE {SOURCE_NATIVE}")}
    assert {k: after.get(k) for k in before} == before  # every run of N, unchanged
    listed_now = {r for (r,) in query(home, "SELECT DISTINCT run_id FROM observations WHERE revision_key = ?", [latest])}
    dropped = set(before) - listed_now
    assert dropped, "the fixture revisions must drop some runs"
    assert set(after) == set(before) | listed_now
    flags = dict(query(home, f"SELECT run_id, withdrawn_upstream FROM runs WHERE {SOURCE_NATIVE}"))
    assert {r for r, withdrawn in flags.items() if withdrawn} == dropped
    last_seen = dict(query(home, f"SELECT run_id, last_seen_revision FROM runs WHERE {SOURCE_NATIVE}"))
    assert {last_seen[r] for r in dropped} == {previous}
    assert {last_seen[r] for r in listed_now} == {latest}

    ranked = set(query(home, "SELECT run_id, rank, group_size FROM ranks"))
    assert ranked != ranked_before
    assert not {r for r, _, _ in ranked} & dropped  # no withdrawn run is ranked
    assert {r for r, _, _ in ranked_before} & dropped  # ... though some were ranked before

    # one snapshot at a time gives what one backfill of both gives, and a second run changes nothing
    assert contract_tables(home) == contract_tables(next_warehouse)
    state = warehouse_state(home)
    assert "nothing new" in ingest(home, tmp_path / "source").stdout
    assert warehouse_state(home) == state
