"""The warehouse steps the assets run, as plain functions of a Warehouse (no Dagster here).

Each step writes inside one transaction and replaces a table only where its rows changed, so running a
step again with nothing new rewrites no row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from kernelindex_pipeline import catalog, evidence
from kernelindex_pipeline.history import CONFLICTS_SQL, RUNS_SQL
from kernelindex_pipeline.identity import digest
from kernelindex_pipeline.manifests import build_manifests
from kernelindex_pipeline.normalize import QUARANTINE_SCHEMA, Snapshot, normalize
from kernelindex_pipeline.ranking import RANKS_SQL
from kernelindex_pipeline.sources import SOURCE_NAME, Revision
from kernelindex_pipeline.warehouse import Warehouse, replace_if_changed


# ingest_state row that `kernelindex ingest` writes after a successful run (the evidence fingerprint).
INGEST_COMPLETE_KEY = "evidence"


@dataclass
class StepResult:
    rows: int
    changed: bool
    details: dict


def record_snapshots(wh: Warehouse, fetched: Sequence[tuple[Revision, bytes]]) -> StepResult:
    """Store each snapshot's bytes content-addressed, then list it in `snapshots`.

    Listing a new snapshot also clears the completed-ingest marker, in the same transaction: if the run
    fails or is killed before its last step, the next `kernelindex ingest` re-runs every step over every
    revision instead of taking the stored snapshots for fully ingested ones."""
    rows = []
    for revision, data in fetched:
        sha = wh.store_raw(data)
        rows.append({"revision_key": revision.key, "source": SOURCE_NAME, "stream": revision.stream,
                     "source_file": revision.path, "commit": revision.commit, "committed_at": revision.committed_at,
                     "sha256": sha, "bytes": len(data), "location": revision.location})
    table = pa.Table.from_pylist(rows)
    changed = False
    with wh.transaction() as con:
        if rows:
            con.register("incoming", table)
            (new,) = con.execute(
                "SELECT count(*) FROM incoming i WHERE NOT EXISTS (SELECT 1 FROM snapshots s "
                "WHERE s.revision_key = i.revision_key AND s.sha256 = i.sha256)").fetchone()
            if new:
                con.execute("DELETE FROM snapshots WHERE revision_key IN (SELECT revision_key FROM incoming)")
                con.execute("INSERT INTO snapshots SELECT revision_key, source, stream, source_file, commit, "
                            "CAST(committed_at AS TIMESTAMPTZ), sha256, bytes, location FROM incoming")
                # The warehouse is complete again only when the run that goes on from here succeeds: until
                # then, `kernelindex ingest` must not take the stored snapshots for ingested ones.
                con.execute(f"DELETE FROM ingest_state WHERE key = '{INGEST_COMPLETE_KEY}'")
                changed = True
            con.unregister("incoming")
    return StepResult(len(rows), changed, {"bytes": int(sum(r["bytes"] for r in rows))})


def normalize_snapshots(wh: Warehouse, keys: Sequence[str]) -> StepResult:
    """Normalize stored snapshots into observations and quarantine rows, replacing those partitions."""
    with wh.reader() as con:
        listed = con.execute(
            "SELECT revision_key, stream, commit, source_file, CAST(committed_at AS VARCHAR), location, sha256 "
            "FROM snapshots WHERE list_contains(?, revision_key)", [list(keys)]).fetchall()
    missing = set(keys) - {row[0] for row in listed}
    if missing:
        raise LookupError(f"snapshots not stored yet: {', '.join(sorted(missing))}")
    snapshots = [Snapshot(Revision(at, stream, commit, path, location), wh.load_raw(sha))
                 for key, stream, commit, path, at, location, sha in listed]
    result = normalize(snapshots)
    with wh.transaction() as con:
        for name, table in [("o_new", result.observations), ("k_new", result.dims), ("q_new", result.quarantine),
                            ("w_new", result.workloads)]:
            con.register(name, table)
        con.execute("DELETE FROM observations WHERE list_contains(?, revision_key)", [list(keys)])
        con.execute("INSERT INTO observations BY NAME SELECT * FROM o_new")
        con.execute("DELETE FROM snapshot_quarantine WHERE list_contains(?, revision_key)", [list(keys)])
        con.execute("INSERT INTO snapshot_quarantine BY NAME SELECT * FROM q_new")
        con.execute("DELETE FROM run_keys WHERE dim_key IN (SELECT dim_key FROM k_new)")
        con.execute("INSERT INTO run_keys BY NAME SELECT * FROM k_new")
        con.execute("DELETE FROM workloads WHERE workload_digest IN (SELECT workload_digest FROM w_new)")
        con.execute("INSERT INTO workloads BY NAME SELECT * FROM w_new")
        for name in ("o_new", "k_new", "q_new", "w_new"):
            con.unregister(name)
    return StepResult(
        result.observations.num_rows, True,
        {"rows_in": result.rows_in, "quarantined": result.quarantine.num_rows, "snapshots": len(keys)},
    )


def _reference_rows() -> tuple[list[dict], list[dict], list[dict]]:
    protocols = [catalog.source_protocol(m, metric) for m in catalog.MODES for metric in ("latency", "peak_memory")]
    environments = [g.environment() for g in catalog.GPUS.values()]
    implementations = [i.manifest() for i in catalog.IMPLEMENTATIONS.values()]
    return protocols, environments, implementations


def _manifest_table(manifests: list[dict], key: str, extra: str, extra_of) -> pa.Table:
    rows = {digest(m): m for m in manifests}
    return pa.table({key: list(rows), extra: [extra_of(m) for m in rows.values()],
                     "manifest": [json.dumps(m, ensure_ascii=False, sort_keys=True) for m in rows.values()]},
                    schema=pa.schema([(key, pa.string()), (extra, pa.string()), ("manifest", pa.string())]))


def load_controlled_evidence(wh: Warehouse, evidence_dir: Path) -> StepResult:
    """Controlled runs from committed rerun records, with their protocols, environments and workloads."""
    runs, protocols, environments, workloads, refused = evidence.load_evidence(evidence_dir)
    src_protocols, src_environments, implementations = _reference_rows()
    tables = {
        "protocols": _manifest_table(src_protocols + protocols, "protocol_digest", "name", lambda m: m["metadata"]["name"]),
        "environments": _manifest_table(src_environments + environments, "environment_digest", "name",
                                        lambda m: m["metadata"]["name"]),
        "implementations": _manifest_table(implementations, "implementation_digest", "provider",
                                           lambda m: m["spec"]["provider"]),
    }
    changed = False
    with wh.transaction() as con:
        for name, table in tables.items():
            con.register(f"{name}_new", table)
            changed |= replace_if_changed(con, name, f"SELECT * FROM {name}_new")
            con.unregister(f"{name}_new")
        if runs:
            con.register("c_new", pa.Table.from_pylist(runs))
            changed |= replace_if_changed(con, "controlled_runs", "SELECT * FROM c_new")
            con.unregister("c_new")
        else:
            changed |= replace_if_changed(con, "controlled_runs", "SELECT * FROM controlled_runs WHERE false")
        con.register("r_new", pa.Table.from_pylist(
            [{**r, "source_revision": None, "revision_key": None} for r in refused], schema=QUARANTINE_SCHEMA))
        changed |= replace_if_changed(con, "evidence_quarantine", "SELECT * FROM r_new")
        con.unregister("r_new")
        if workloads:
            con.register("w_new", pa.Table.from_pylist([
                {"workload_digest": w["workload_digest"], "kernel": w["definition"]["spec"]["kernel"],
                 "workload_slug": w["workload_slug"], "definition": json.dumps(w["definition"], ensure_ascii=False),
                 "shapes_known": w["shapes_known"]} for w in workloads]))
            con.execute("INSERT INTO workloads BY NAME SELECT * FROM w_new "
                        "WHERE workload_digest NOT IN (SELECT workload_digest FROM workloads)")
            con.unregister("w_new")
    return StepResult(len(runs), changed, {"refused": len(refused), "files": len(list(Path(evidence_dir).glob("*.jsonl.gz")))})


def rebuild_runs(wh: Warehouse) -> StepResult:
    """`runs` from every observation and controlled run; `quarantine` from every refused line."""
    with wh.transaction() as con:
        changed = replace_if_changed(con, "runs", f"SELECT * FROM ({RUNS_SQL}) ORDER BY run_id")
        conflicts = con.sql(CONFLICTS_SQL).to_arrow_table()
        con.register("conflicts", _conflicts_with_lines(wh, con, conflicts))
        changed |= replace_if_changed(
            con, "quarantine",
            "SELECT source, source_revision, line_number, reason, raw_line, revision_key FROM snapshot_quarantine "
            "UNION ALL SELECT source, source_revision, line_number, reason, raw_line, revision_key FROM conflicts "
            "UNION ALL SELECT source, source_revision, line_number, reason, raw_line, revision_key FROM evidence_quarantine",
        )
        con.unregister("conflicts")
        (count,) = con.execute("SELECT count(*) FROM runs").fetchone()
        (quarantined,) = con.execute("SELECT count(*) FROM quarantine").fetchone()
        wh.export_parquet(con, ("runs", "quarantine"))
    return StepResult(count, changed, {"quarantined": quarantined})


def _conflicts_with_lines(wh: Warehouse, con, conflicts: pa.Table) -> pa.Table:
    """Attach the raw line of each conflicting listing from the stored snapshot bytes."""
    rows = conflicts.to_pylist()
    shas = dict(con.execute("SELECT revision_key, sha256 FROM snapshots").fetchall()) if rows else {}
    lines: dict[str, list[str]] = {}
    for row in rows:
        key = row["revision_key"]
        if key not in lines:
            lines[key] = wh.load_raw(shas[key]).decode("utf-8", errors="replace").splitlines()
        n = row["line_number"]
        row["raw_line"] = lines[key][n - 1] if 0 < n <= len(lines[key]) else ""
    return pa.Table.from_pylist(rows, schema=pa.schema([
        ("source", pa.string()), ("source_revision", pa.string()), ("line_number", pa.int64()), ("reason", pa.string()),
        ("revision_key", pa.string()), ("raw_line", pa.string())]))


def rebuild_manifests(wh: Warehouse) -> StepResult:
    with wh.transaction() as con:
        con.register("m_new", build_manifests(con))
        changed = replace_if_changed(con, "manifests", "SELECT * FROM m_new ORDER BY run_id")
        con.unregister("m_new")
        (count,) = con.execute("SELECT count(*) FROM manifests").fetchone()
        wh.export_parquet(con, ("manifests",))
    return StepResult(count, changed, {})


def rebuild_ranks(wh: Warehouse) -> StepResult:
    with wh.transaction() as con:
        changed = replace_if_changed(con, "ranks", f"SELECT * FROM ({RANKS_SQL}) ORDER BY run_id")
        changed |= replace_if_changed(con, "reproductions",
                                      f"SELECT * FROM ({evidence.REPRODUCTIONS_SQL}) ORDER BY ALL")
        (count,) = con.execute("SELECT count(*) FROM ranks").fetchone()
        (groups,) = con.execute("SELECT count(DISTINCT comparison_key) FROM ranks").fetchone()
        wh.export_parquet(con, ("ranks", "reproductions"))
    return StepResult(count, changed, {"groups": groups})
