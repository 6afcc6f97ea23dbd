"""The verdict tables as Dagster assets: `claim_checks`, `listing_ranks` and `attestations` materialize with
the metadata an operator reads, the checks on the rules the verdicts rest on run, and a verdict that changes
between publications is kept in `verdict_history`."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import dagster as dg
import pytest
from conftest import query, write_snapshot_dir, main_rows

from kernelindex_pipeline.publish import steps
from kernelindex_pipeline.core.catalog import SOURCE_REPLICA_FAMILY
from kernelindex_pipeline.defs import keys
from kernelindex_pipeline.defs import verdict_reports as verdict_defs
from kernelindex_pipeline.defs.warehouse import warehouse_tables
from kernelindex_pipeline.defs.resources import WarehouseResource
from kernelindex_pipeline.ingest.sources import DirectorySource
from kernelindex_pipeline.warehouse.store import Warehouse

REPO = Path(__file__).resolve().parents[1]
SEED = ("llama4_rope/backward/liger/nvidia-h100-80gb-hbm3/hidden2048-kv_heads8-q_heads32-seq2048-bf16/"
        "2025-08-07-21-42-04")
SEED_PARAMS = {"hidden": 2048, "kv_heads": 8, "q_heads": 32, "seq": 2048}
SEED_REVISION = "2025-08-09"  # the main-branch file that first lists the seed llama4_rope runs


def _template() -> dict:
    with gzip.open(REPO / "data" / "evidence" / "h200-2026-12-03-v18.jsonl.gz", "rt") as handle:
        return next(r for r in map(json.loads, handle) if r["kernel"] == "llama4_rope" and r["mode"] == "backward"
                    and r["metric"] == "latency" and r["params"] == SEED_PARAMS and r["provider"] == "liger")


def write_evidence(directory: Path, liger_factor: float) -> Path:
    """One rerun batch of the seed llama4_rope backward: huggingface at 100 µs, liger at `liger_factor` of that,
    under both protocols (the source says huggingface < liger)."""
    template = _template()
    records = []
    for family in ("kernelindex_rerun", SOURCE_REPLICA_FAMILY):
        for provider, factor in (("huggingface", 1.0), ("liger", liger_factor)):
            samples = [factor * (100_000 + 10 * i) for i in range(20)]
            record = json.loads(json.dumps(template))
            record.update(provider=provider, samples=samples, median=int(sorted(samples)[10]), p20=int(min(samples)),
                          p80=int(max(samples)), observed_at="2026-12-04T00:00:00Z")
            record["protocol"]["spec"]["comparability"]["family"] = family
            record["protocol"]["metadata"]["name"] += f"-{family}"
            records.append(record)
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.jsonl.gz"):
        old.unlink()
    with gzip.open(directory / f"h200-test-{liger_factor}.jsonl.gz", "wt") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)
    return directory


def materialize(home: Path, evidence: Path) -> dg.ExecuteInProcessResult:
    result = dg.materialize([warehouse_tables], instance=dg.DagsterInstance.ephemeral(),
                            resources={"warehouse": WarehouseResource(home=str(home), evidence_dir=str(evidence))})
    assert result.success
    return result


def metadata_of(result, key: dg.AssetKey) -> dict:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == key]
    return event.step_materialization_data.materialization.metadata


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """Two publications of the seed's revision: the reruns first put liger ahead (the source's huggingface <
    liger reversed), then behind (held)."""
    root = tmp_path_factory.mktemp("verdict-assets")
    source = write_snapshot_dir(root / "source", [r for r in main_rows() if r["committed_at"].startswith(SEED_REVISION)])
    wh = Warehouse(root / "home")
    for revision in DirectorySource(str(source)).list_revisions():
        steps.land_revision(wh, revision, DirectorySource(str(source)).read(revision))
    first = materialize(wh.home, write_evidence(root / "evidence", 0.5))
    second = materialize(wh.home, write_evidence(root / "evidence", 1.5))
    return wh.home, first, second


def test_the_verdict_tables_are_assets_of_the_one_publication():
    assert {keys.CLAIM_CHECKS, keys.LISTING_RANKS, keys.ATTESTATIONS,
            keys.VERSION_CHECKS, keys.VERDICT_REPLICATION} <= set(warehouse_tables.keys)
    assert not warehouse_tables.can_subset  # published with every other warehouse table, or not at all


def test_claim_checks_metadata_counts_verdicts_and_names_the_changed_ones(published):
    home, first, second = published
    before, after = metadata_of(first, keys.CLAIM_CHECKS), metadata_of(second, keys.CLAIM_CHECKS)
    [(claims,)] = query(home, "SELECT count(*) FROM claim_checks")
    assert after["dagster/row_count"].value == claims > 0
    assert "| protocol | held | reversed | indistinguishable | not re-checked | claims |" in after["verdicts"].value
    assert after["groups_answered/kernelindex-device-time"].value >= 1
    assert before["verdicts_changed"].value == 0 and before["claims_new"].value == claims
    changes = after["verdict_changes"].value
    assert after["verdicts_changed"].value == 2  # the seed's claim under each protocol
    assert "| huggingface < liger | reversed |" in changes and "| held |" in changes
    assert after["rechecked"].value == claims


def test_verdict_history_keeps_what_each_verdict_was_and_since_when(published):
    home, *_ = published
    rows = query(home, "SELECT protocol, verdict, since, until FROM verdict_history WHERE comparison_key = "
                       "(SELECT comparison_key FROM runs WHERE external_id = ?) ORDER BY protocol, since", [SEED])
    by_protocol = {}
    for protocol, verdict, since, until in rows:
        by_protocol.setdefault(protocol, []).append((verdict, since, until))
    for protocol in ("kernelindex-device-time", "source-replica"):
        (was, since, until), (now, since_now, open_) = by_protocol[protocol]
        assert (was, now) == ("reversed", "held") and until == since_now and open_ is None and since <= until
    [(open_rows, claims)] = query(home, "SELECT (SELECT count(*) FROM verdict_history WHERE until IS NULL), "
                                        "(SELECT count(*) FROM claim_checks)")
    assert open_rows == claims


def test_the_publication_step_runs_every_check_and_they_pass_and_say_what_they_read(published):
    _, _, second = published
    results = {r.check_name: r for r in second.get_asset_check_evaluations()}
    assert set(results) == {k.name for k in warehouse_tables.check_keys} >= {
        verdict_defs.LABELS_MATCH_INTERVALS, verdict_defs.NO_FALLEN_BACK_PROVIDER,
        verdict_defs.EVERY_UNCHECKED_CLAIM_SAYS_WHY, "unique_run_ids", "digests_recompute"}
    assert all(r.passed for r in results.values()), results
    assert results[verdict_defs.LABELS_MATCH_INTERVALS].metadata["mislabelled"].value == 0


def test_a_mislabelled_verdict_fails_its_check(published, tmp_path):
    """The labels check reads the table: a verdict written against its interval is found by the next
    materialization (nothing new to publish, so it checks the table as it is)."""
    import shutil

    import duckdb

    home = shutil.copytree(published[0], tmp_path / "home", symlinks=True)
    db = (home / "kernelindex.duckdb").resolve()
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE claim_checks SET verdict = 'reversed' WHERE verdict = 'held' AND protocol = "
                    "'kernelindex-device-time'")
    result = dg.materialize([warehouse_tables], instance=dg.DagsterInstance.ephemeral(),
                            resources={"warehouse": WarehouseResource(
                                home=str(home), evidence_dir=str(published[0].parent / "evidence"))},
                            raise_on_error=False)
    [evaluation] = [e for e in result.get_asset_check_evaluations()
                    if e.check_name == verdict_defs.LABELS_MATCH_INTERVALS]
    assert not evaluation.passed and evaluation.metadata["mislabelled"].value >= 1
    assert "huggingface < liger" in evaluation.metadata["examples"].value


def test_listing_ranks_and_attestations_report_their_tables(published):
    home, _, second = published
    [(listed,)] = query(home, "SELECT count(*) FROM listing_ranks")
    assert metadata_of(second, keys.LISTING_RANKS)["dagster/row_count"].value == listed > 0
    attestations = metadata_of(second, keys.ATTESTATIONS)
    assert "dagster/column_schema" in attestations and "refused" in attestations


def test_version_checks_and_replication_report_what_an_operator_reads(published):
    home, _, second = published
    [(checked,)] = query(home, "SELECT count(*) FROM version_checks")
    versions = metadata_of(second, keys.VERSION_CHECKS)
    assert versions["dagster/row_count"].value == checked
    assert "| protocol | version_effect | claims |" in versions["version_effects"].value
    flipped = dict(query(home, "SELECT card, sum(flipped) FROM verdict_replication "
                               "WHERE protocol = 'kernelindex-device-time' GROUP BY ALL"))
    replication = metadata_of(second, keys.VERDICT_REPLICATION)
    assert "| protocol | card | decided | replicated |" in replication["replication"].value
    assert flipped and all(replication[f"flipped/kernelindex-device-time/{card}"].value == n
                           for card, n in flipped.items())
