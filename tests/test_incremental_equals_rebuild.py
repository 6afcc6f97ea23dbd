"""A warehouse built a publication at a time equals one built at once from the same inputs, in every table and
Parquet copy: evidence files added on their own (read alone, their kernels' claims re-checked), then a new
upstream revision."""

import shutil

import dagster as dg

from conftest import ingest, main_rows, published_state, query, write_snapshot_dir
from kernelindex_pipeline.defs.keys import CLAIM_CHECKS, CONTROLLED_EVIDENCE
from kernelindex_pipeline.defs.resources import SHIPPED_EVIDENCE
from kernelindex_pipeline.warehouse.sql import rows_checksum
from kernelindex_pipeline.warehouse.store import Warehouse

FIRST_SESSIONS = ("h200-2026-12-02", "h100-2026-12-06-74c35547a4b8-own-card-7", "h100-2026-12-06-74c35547a4b8-liger-0.7.0")
LATER_SESSIONS = ("h100-2026-12-06-b175f195cb62-replication", "h200-2026-12-03-norms")


def _evidence(folder, names):
    folder.mkdir()
    for name in names:
        shutil.copy(SHIPPED_EVIDENCE / f"{name}.jsonl.gz", folder)
    return folder


def _state(home) -> dict[str, str]:
    """`published_state`, less what records the publications themselves: which publication listed each
    snapshot, what the latest one changed, and the verdicts claims held before (only the current ones)."""
    state = published_state(home)
    del state["table:publication_changes"]
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
