"""Publishing revision by revision gives the warehouse one publication of them all gives, at a cost that
follows what each publication adds (`steps.mark_scope`), and Parquet parts that only change where rows did."""

import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from conftest import ingest, main_rows, published_state, query, write_snapshot_dir
from kernelindex_pipeline.defs.keys import CLAIM_CHECKS, CONTROLLED_EVIDENCE
from kernelindex_pipeline.defs.resources import SHIPPED_EVIDENCE
from kernelindex_pipeline.warehouse.sql import rows_checksum
from kernelindex_pipeline.publish import steps
from kernelindex_pipeline.defs.warehouse import CHANGED_GROUPS
from kernelindex_pipeline.defs.resources import SHIPPED_GH_PAGES, SHIPPED_UPSTREAM
from kernelindex_pipeline.ingest.sources import DirectorySource, FileDeletedAtRevision
from kernelindex_pipeline.warehouse.views import RANK_CHANGES_SQL
from kernelindex_pipeline.warehouse.store import PARQUET_TABLES, Warehouse

# Every table a publication derives, and what tells two builds apart in the others (`publication` numbers
# the order of publications, which differs by construction).
COMPARED = {"runs": "*", "manifests": "*", "ranks": "*", "quarantine": "*", "reproductions": "*",
            "claim_checks": "*", "observations": "*", "snapshot_quarantine": "*", "golden_commits": "*",
            "snapshots": "* EXCLUDE (publication)", "publications": "run_id, source", "listing_ranks": "*",
            "listing_claim_checks": "*", "version_checks": "*",
            "(SELECT * FROM verdict_history WHERE until IS NULL)": "* EXCLUDE (since, until)"}


def _revisions() -> list:
    """The newest main-branch revisions and the oldest gh-pages runs (a rewritten run and a removed one among
    them), oldest first: enough to move ranks and withdraw runs, small enough for a quick test."""
    main = DirectorySource(str(SHIPPED_UPSTREAM)).list_revisions()[-8:]
    pages = DirectorySource(str(SHIPPED_GH_PAGES)).list_revisions()[:10]
    return sorted(main + pages)


def _publish(wh: Warehouse, revisions, evidence: Path) -> steps.Publication:
    for revision in revisions:
        source = DirectorySource(revision.location)
        try:
            steps.land_revision(wh, revision, source.read(revision))
        except FileDeletedAtRevision:
            steps.land_revision(wh, revision, b"", state=steps.DELETED)
    return steps.publish(wh, evidence)


def _rows(home: Path, table: str, columns: str) -> list[tuple]:
    with Warehouse(home).reader() as con:
        return con.execute(f"SELECT {columns} FROM {table} ORDER BY ALL").fetchall()


@pytest.fixture(scope="module")
def builds(tmp_path_factory, evidence_sample):
    """(one publication of every revision and the evidence, the same published in six steps)."""
    revisions = _revisions()
    assert any(r.path == "benchmarks/855e98d/benchmark.csv" for r in revisions[:12])  # rewritten, then removed
    no_evidence = tmp_path_factory.mktemp("no-evidence")
    at_once = Warehouse(tmp_path_factory.mktemp("at-once"))
    _publish(at_once, revisions, evidence_sample)
    stepwise = Warehouse(tmp_path_factory.mktemp("stepwise"))
    scopes = [_publish(stepwise, revisions[:8], no_evidence).runs.details["in_scope"],
              _publish(stepwise, [], evidence_sample).runs.details["in_scope"]]
    orders = []
    for chunk in (revisions[8:12], revisions[12:13], revisions[13:17], revisions[17:]):
        scopes.append(_publish(stepwise, chunk, evidence_sample).runs.details["in_scope"])
        orders.append(_order_changes(stepwise))
    return at_once.home, stepwise.home, scopes, orders


def _order_changes(wh: Warehouse) -> tuple[list, list]:
    """(the `rank_changes` view, the same for the groups the latest publication changed: what the UI shows)."""
    with wh.reader() as con:
        every = con.execute("SELECT * FROM rank_changes ORDER BY ALL").fetchall()
        changed = con.execute(f"SELECT * FROM ({RANK_CHANGES_SQL.format(groups=CHANGED_GROUPS)}) ORDER BY ALL")
        return every, changed.fetchall()


@pytest.mark.parametrize("table", sorted(COMPARED))
def test_publishing_step_by_step_equals_one_publication(builds, table):
    at_once, stepwise, *_ = builds
    assert _rows(stepwise, table, COMPARED[table]) == _rows(at_once, table, COMPARED[table])


def test_a_scope_built_in_slices_equals_one_built_whole(builds, tmp_path, monkeypatch, evidence_sample):
    """A long backfill builds `runs` a slice of its scope at a time (`SCOPE_SLICE_RUNS`), and the listing-time
    claims a slice of the groups in scope at a time (`LISTING_SLICE_RUNS`): sliced small, the same revisions
    give the same tables."""
    from kernelindex_pipeline.publish import derived

    monkeypatch.setattr(derived, "SCOPE_SLICE_RUNS", 500)
    monkeypatch.setattr(derived, "LISTING_SLICE_RUNS", 500)
    sliced = Warehouse(tmp_path / "sliced")
    done = _publish(sliced, _revisions(), evidence_sample)
    assert done.runs.details["in_scope"] > 5 * 500
    assert done.claims.details["listing_slices"] > 5
    for table, columns in COMPARED.items():
        assert _rows(sliced.home, table, columns) == _rows(builds[0], table, columns), table


def test_each_parquet_copy_holds_its_table(builds):
    _, stepwise, *_ = builds
    wh = Warehouse(stepwise)
    with duckdb.connect() as con:
        for table in PARQUET_TABLES:
            parquet = con.execute("SELECT * FROM read_parquet(?) ORDER BY ALL", [wh.parquet(table)]).fetchall()
            assert parquet == _rows(stepwise, table, "*"), table


def test_a_publication_recomputes_only_the_runs_it_touches(builds):
    at_once, _, scopes, _ = builds
    [(runs,)] = _rows(at_once, "(SELECT count(*) FROM runs)", "*")
    [(controlled,)] = _rows(at_once, "(SELECT count(*) FROM controlled_runs)", "*")
    assert scopes[1] == controlled  # new evidence: the controlled runs, no source run
    assert all(0 < scope < runs / 2 for scope in scopes[2:]), scopes


def test_the_order_changes_shown_are_those_of_the_groups_a_publication_changed(builds):
    orders = builds[3]
    assert any(every for every, _ in orders)
    assert all(changed == every for every, changed in orders)


def test_a_nightly_links_the_parquet_parts_it_did_not_change(builds, tmp_path, evidence_sample):
    _, stepwise, *_ = builds
    home = tmp_path / "home"
    shutil.copytree(stepwise, home, symlinks=True)
    wh = Warehouse(home)
    before = {p.name: p.stat().st_ino for p in (wh.tables_dir / "manifests").iterdir()}
    newest = DirectorySource(str(SHIPPED_UPSTREAM)).list_revisions()[-1]
    later = newest.__class__(**{**newest.__dict__, "commit": "f" * 40, "committed_at": "2030-01-01T00:00:00+00:00"})
    data = DirectorySource(str(SHIPPED_UPSTREAM)).read(newest).replace(b",2025-", b",2029-").replace(b",2026-", b",2030-")
    steps.land_revision(wh, later, data)
    assert steps.publish(wh, evidence_sample).published
    after = {p.name: p.stat().st_ino for p in (wh.tables_dir / "manifests").iterdir()}
    assert set(before) < set(after)  # one part more, for the new runs' manifests
    assert all(after[name] == inode for name, inode in before.items())  # the others are the same files


# Evidence added to evidence: the new files read alone, only their kernels' claims re-checked.
FIRST_SESSIONS = ("h200-2026-12-02", "h100-2026-12-06-74c35547a4b8-own-card-7", "h100-2026-12-06-74c35547a4b8-liger-0.7.0")
LATER_SESSIONS = ("h100-2026-12-06-b175f195cb62-replication", "h200-2026-12-03-norms")


def _evidence(folder, names):
    folder.mkdir()
    for name in names:
        shutil.copy(SHIPPED_EVIDENCE / f"{name}.jsonl.gz", folder)
    return folder


def _state(home) -> dict[str, str]:
    """`published_state`, less what records the publications themselves: which publication listed each
    snapshot, what the latest one changed, the verdicts claims held before (only the current ones), and the
    intervals earlier publications bootstrapped (a cache by their inputs)."""
    state = published_state(home)
    del state["table:publication_changes"], state["table:bootstrap_intervals"]
    with Warehouse(home).reader() as con:
        state["table:snapshots"] = rows_checksum(con, "(SELECT * EXCLUDE (publication) FROM snapshots)")
        state["table:verdict_history"] = rows_checksum(
            con, "(SELECT * EXCLUDE (since, until) FROM verdict_history WHERE until IS NULL)")
    return state


def _latest(home, key: dg.AssetKey) -> dict:
    instance = dg.DagsterInstance.from_config(str((home / "dagster").resolve()))
    event = instance.get_latest_materialization_event(key)
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def test_publishing_evidence_then_a_revision_equals_one_build_of_both(tmp_path):
    rows = main_rows()[-2:]
    source = write_snapshot_dir(tmp_path / "source", rows[:1])
    first = _evidence(tmp_path / "first", FIRST_SESSIONS)
    every = _evidence(tmp_path / "every", FIRST_SESSIONS + LATER_SESSIONS)

    home = tmp_path / "home"
    ingest(home, source, KERNELINDEX_EVIDENCE=str(first))
    [(claims,)] = query(home, "SELECT count(*) FROM claim_checks")
    ingest(home, source, KERNELINDEX_EVIDENCE=str(every))
    assert _latest(home, CONTROLLED_EVIDENCE)["files_read"] == len(LATER_SESSIONS)
    rechecked = _latest(home, CLAIM_CHECKS)["rechecked"]
    assert 0 < rechecked < claims  # the claims of the kernels the new sessions measured, not every claim
    evidence_at_once = tmp_path / "evidence-at-once"
    ingest(evidence_at_once, source, KERNELINDEX_EVIDENCE=str(every))
    assert _state(home) == _state(evidence_at_once)

    shutil.rmtree(source)
    write_snapshot_dir(source, rows)
    ingest(home, source, KERNELINDEX_EVIDENCE=str(every))
    rebuilt = tmp_path / "rebuilt"
    ingest(rebuilt, source, KERNELINDEX_EVIDENCE=str(every))
    assert _state(home) == _state(rebuilt)
