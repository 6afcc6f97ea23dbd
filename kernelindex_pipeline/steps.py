"""The warehouse steps, as plain functions (no Dagster here).

Fetching lands revisions: their bytes go to the content-addressed raw store and a small record of each
goes to `landing/`. Publishing turns every landed revision not yet in the warehouse, and the committed
rerun evidence, into the next generation of the warehouse in one go (`Warehouse.publish`): snapshots,
observations, runs, manifests, ranks and their Parquet copies change together or not at all.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from kernelindex_pipeline import catalog, claims, evidence
from kernelindex_pipeline.attestations import load_attestations
from kernelindex_pipeline.history import CONFLICTS_SQL, RUNS_SQL
from kernelindex_pipeline.identity import digest
from kernelindex_pipeline.manifests import build_manifests
from kernelindex_pipeline.normalize import QUARANTINE_SCHEMA, Snapshot, normalize
from kernelindex_pipeline.ranking import RANKS_SQL
from kernelindex_pipeline.references import record_references
from kernelindex_pipeline.sources import SOURCE_NAME, Revision
from kernelindex_pipeline.warehouse import Warehouse, replace_if_changed, replace_where

# ingest_state key holding the fingerprint of the evidence files the warehouse was built from.
EVIDENCE_KEY = "evidence"
# ingest_state key and value naming how the derived tables (runs, manifests, ranks, ...) were computed: a
# home built otherwise has them recomputed from all of history once, then publication by publication.
DERIVED_KEY = "derived"
DERIVED_VERSION = "scoped-1"

# How a landed revision is recorded in `snapshots.state`.
LISTED = "listed"  # bytes fetched; parsed into observations and quarantine rows
DELETED = "deleted"  # the revision deleted the file: no rows, the file's runs are withdrawn from then on
UNLISTED = "unlisted"  # a registered revision upstream no longer lists: nothing fetched, nothing withdrawn
UNPARSEABLE = "unparseable"  # bytes that are not a CSV file at all: every line quarantined, nothing withdrawn


@dataclass
class StepResult:
    rows: int
    changed: bool
    details: dict = field(default_factory=dict)


@dataclass
class Publication:
    """What one publication did, step by step (what the Dagster assets report)."""

    published: bool
    snapshots: StepResult
    observations: StepResult
    evidence: StepResult
    runs: StepResult
    manifests: StepResult
    ranks: StepResult


# -- landing ----------------------------------------------------------------------------------------

def land_revision(wh: Warehouse, revision: Revision, data: bytes | None, state: str = LISTED) -> None:
    """Store a fetched revision's bytes, then its record, for the next publication to take in."""
    sha = wh.store_raw(data) if data is not None else None
    wh.land({"revision_key": revision.key, "source": revision.source, "stream": revision.stream,
             "source_file": revision.path, "commit": revision.commit, "committed_at": revision.committed_at,
             "sha256": sha, "bytes": len(data) if data is not None else 0, "location": revision.location,
             "state": state, "benchmarked_commit": revision.benchmarked_commit, "release": revision.release})


def land_unlisted(wh: Warehouse, key: str) -> None:
    """A registered revision that upstream no longer lists: recorded, so it never blocks an ingest again."""
    stream, _, commit = key.partition("@")
    wh.land({"revision_key": key, "source": SOURCE_NAME, "stream": stream, "source_file": None, "commit": commit,
             "committed_at": None, "sha256": None, "bytes": 0, "location": None, "state": UNLISTED})


def still_to_fetch(keys, known: dict[str, str]) -> list[str]:
    """The keys whose bytes are not stored yet: never seen, or recorded as unlisted (upstream may list them
    again), given each known key's state."""
    return [k for k in keys if known.get(k, UNLISTED) == UNLISTED]


def known_revisions(wh: Warehouse) -> dict[str, str]:
    """revision key -> state, of every revision published or landed (what need not be fetched again)."""
    known = {r["revision_key"]: r["state"] for r in wh.landed()}
    if wh.exists():
        with wh.reader() as con:
            known.update(dict(con.execute("SELECT revision_key, coalesce(state, 'listed') FROM snapshots").fetchall()))
    return known


# -- one publication --------------------------------------------------------------------------------

def evidence_fingerprint(directory: Path, attestations_dir: Path | None = None) -> str:
    """A digest of the committed evidence files and attestation files: a change to either republishes."""
    h = hashlib.sha256()
    files = sorted(Path(directory).glob("*.jsonl.gz"))
    if attestations_dir is not None:
        files += sorted(Path(attestations_dir).glob("*.json"))
    for path in files:
        h.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def publish(wh: Warehouse, evidence_dir: Path, attestations_dir: Path | None = None) -> Publication:
    """Take every landed revision not yet published, the evidence files and the attestation files into the
    next generation. The derived tables change only where the new revisions or evidence reach (`mark_scope`)."""
    with wh.publish() as staging:
        con = staging.con
        con.execute("DELETE FROM publication_changes")
        snapshots = record_snapshots(con, wh.landed())
        observations = normalize_snapshots(con, wh, snapshots.details["keys"])
        references = record_references(con, wh, wh.landed_references())
        fingerprint = evidence_fingerprint(evidence_dir, attestations_dir)
        evidence_changed = _state(con, EVIDENCE_KEY) != fingerprint
        if evidence_changed:
            loaded = load_controlled_evidence(con, evidence_dir)
            _set_state(con, EVIDENCE_KEY, fingerprint)
        else:
            loaded = StepResult(0, False, {"refused": 0, "files": 0})
        everything = _state(con, DERIVED_KEY) != DERIVED_VERSION
        if everything:
            _set_state(con, DERIVED_KEY, DERIVED_VERSION)
        staging.changed |= bool(snapshots.changed or references or evidence_changed or everything)
        if staging.changed:
            in_scope = mark_scope(con, snapshots.details["keys"] + references, evidence_changed, everything)
            runs = update_runs(con, wh)
            runs.details["in_scope"] = in_scope
            manifests = update_manifests(con)
            runs.details["attestations"] = load_attestation_files(con, attestations_dir)
            ranks = update_ranks(con)
        else:
            runs = manifests = ranks = StepResult(0, False)
        return Publication(staging.changed, snapshots, observations, loaded, runs, manifests, ranks)


def _state(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
    [(value,)] = con.execute("SELECT any_value(value) FROM ingest_state WHERE key = ?", [key]).fetchall()
    return value


def _set_state(con: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    con.execute("DELETE FROM ingest_state WHERE key = ?", [key]).fetchall()
    con.execute("INSERT INTO ingest_state VALUES (?, ?)", [key, value]).fetchall()


def mark_scope(con: duckdb.DuckDBPyConnection, new_keys: Sequence[str], evidence_changed: bool,
               everything: bool) -> int:
    """Name what this publication can change, as temporary tables the derived queries read:

    - `scope_revisions`: the revisions (and reference files) published now;
    - `scope_runs`: the runs they list, the runs the previous newest listing of each stream they touch
      listed (their withdrawal may change), and every controlled run when the evidence changed;
    - `scope_groups`: the comparison groups of those runs (`update_runs` adds the groups of new runs), or
      every group when the evidence changed.

    With `everything` (an empty home, or one whose derived tables were built another way) the scope is all
    of history. Returns the number of runs in scope."""
    if everything:
        con.execute("CREATE OR REPLACE TEMP TABLE scope_revisions AS "
                    "SELECT revision_key FROM snapshots UNION SELECT revision_key FROM snapshot_quarantine")
    else:
        con.execute("CREATE OR REPLACE TEMP TABLE scope_revisions AS SELECT unnest(?::VARCHAR[]) AS revision_key",
                    [list(new_keys)])
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE scope_runs AS
        WITH touched AS (
            SELECT DISTINCT stream FROM snapshots WHERE revision_key IN (SELECT revision_key FROM scope_revisions)
        ), previous_newest AS (
            SELECT arg_max(revision_key, committed_at) AS revision_key FROM snapshots
            WHERE stream IN (SELECT stream FROM touched)
              AND revision_key NOT IN (SELECT revision_key FROM scope_revisions)
              AND coalesce(state, '{LISTED}') IN ('{LISTED}', '{DELETED}')
            GROUP BY stream
        )
        SELECT run_id FROM observations
        WHERE revision_key IN (SELECT revision_key FROM scope_revisions)
           OR revision_key IN (SELECT revision_key FROM previous_newest)
        UNION SELECT run_id FROM controlled_runs WHERE $reload
        UNION SELECT run_id FROM runs WHERE $reload AND evidence_level = '{catalog.CONTROLLED}'
        UNION SELECT run_id FROM runs WHERE $everything""",
                {"reload": evidence_changed or everything, "everything": everything})
    # Changed evidence can settle any source claim (claims.py), so it puts every group in scope.
    con.execute("CREATE OR REPLACE TEMP TABLE scope_groups AS SELECT DISTINCT comparison_key FROM runs "
                "WHERE run_id IN (SELECT run_id FROM scope_runs) OR $reload", {"reload": evidence_changed or everything})
    [(count,)] = con.execute("SELECT count(*) FROM scope_runs").fetchall()
    return count


def record_snapshots(con: duckdb.DuckDBPyConnection, landed: Sequence[dict]) -> StepResult:
    """List every landed revision that is not published yet in `snapshots`, as one publication.

    The first publication of a revision is final: a revision landed again is ignored, except one recorded
    as unlisted, which its bytes replace once upstream lists it again. `publication` numbers the order in
    which revisions were first published, which decides whose values a run keeps (see history.py)."""
    if not landed:
        return StepResult(0, False, {"keys": [], "bytes": 0})
    rows = pa.Table.from_pylist([{**r, "committed_at": r.get("committed_at")} for r in landed], schema=pa.schema([
        ("revision_key", pa.string()), ("source", pa.string()), ("stream", pa.string()), ("source_file", pa.string()),
        ("commit", pa.string()), ("committed_at", pa.string()), ("sha256", pa.string()), ("bytes", pa.int64()),
        ("location", pa.string()), ("state", pa.string()), ("benchmarked_commit", pa.string()),
        ("release", pa.string())]))
    con.register("landed", rows)
    new = con.execute(f"""
        SELECT l.revision_key FROM landed l LEFT JOIN snapshots s USING (revision_key)
        WHERE s.revision_key IS NULL OR (s.state = '{UNLISTED}' AND l.state <> '{UNLISTED}')
        ORDER BY l.committed_at NULLS LAST, l.revision_key""").fetchall()
    keys = [k for (k,) in new]
    if keys:
        [(publication,)] = con.execute("SELECT coalesce(max(publication), 0) + 1 FROM snapshots").fetchall()
        con.execute("DELETE FROM snapshots WHERE list_contains(?, revision_key)", [keys]).fetchall()
        con.execute("""
            INSERT INTO snapshots BY NAME
            SELECT revision_key, source, stream, source_file, commit, CAST(committed_at AS TIMESTAMPTZ) AS committed_at,
                sha256, bytes, location, state, NULL AS problem, ? AS publication, benchmarked_commit, release
            FROM landed WHERE list_contains(?, revision_key)""", [publication, keys]).fetchall()
    [(total,)] = con.execute("SELECT coalesce(sum(bytes), 0) FROM landed WHERE list_contains(?, revision_key)",
                             [keys]).fetchall()
    con.unregister("landed")
    return StepResult(len(keys), bool(keys), {"keys": keys, "bytes": int(total)})


def normalize_snapshots(con: duckdb.DuckDBPyConnection, wh: Warehouse, keys: Sequence[str]) -> StepResult:
    """Normalize newly listed snapshots into observations and quarantine rows; a file that cannot be parsed
    at all is marked unparseable (its lines quarantined), so it withdraws nothing."""
    listed = con.execute(
        "SELECT stream, commit, source_file, CAST(committed_at AS VARCHAR), location, sha256, source, "
        "benchmarked_commit, release "
        f"FROM snapshots WHERE list_contains(?, revision_key) AND state = '{LISTED}'", [list(keys)]).fetchall()
    snapshots = [Snapshot(Revision(at, stream, commit, path, location, source, benchmarked, release), wh.load_raw(sha))
                 for stream, commit, path, at, location, sha, source, benchmarked, release in listed]
    if not snapshots:
        return StepResult(0, False, {"rows_in": 0, "quarantined": 0, "snapshots": 0, "keys": []})
    result = normalize(snapshots)
    parsed = [s.revision.key for s in snapshots]
    for name, table in [("o_new", result.observations), ("k_new", result.dims), ("q_new", result.quarantine),
                        ("w_new", result.workloads)]:
        con.register(name, table)
    con.execute("DELETE FROM observations WHERE list_contains(?, revision_key)", [parsed]).fetchall()
    con.execute("INSERT INTO observations BY NAME SELECT * FROM o_new")
    con.execute("DELETE FROM snapshot_quarantine WHERE list_contains(?, revision_key)", [parsed]).fetchall()
    con.execute("INSERT INTO snapshot_quarantine BY NAME SELECT * FROM q_new")
    con.execute("DELETE FROM run_keys WHERE dim_key IN (SELECT dim_key FROM k_new)")
    con.execute("INSERT INTO run_keys BY NAME SELECT * FROM k_new")
    con.execute("DELETE FROM workloads WHERE workload_digest IN (SELECT workload_digest FROM w_new)")
    con.execute("INSERT INTO workloads BY NAME SELECT * FROM w_new")
    for name in ("o_new", "k_new", "q_new", "w_new"):
        con.unregister(name)
    for key, reason in result.unparseable.items():
        con.execute(f"UPDATE snapshots SET state = '{UNPARSEABLE}', problem = ? WHERE revision_key = ?", [reason, key]).fetchall()
    return StepResult(
        result.observations.num_rows, True,
        {"rows_in": result.rows_in, "quarantined": result.quarantine.num_rows, "snapshots": len(parsed),
         "unparseable": len(result.unparseable), "keys": parsed},
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


def load_controlled_evidence(con: duckdb.DuckDBPyConnection, evidence_dir: Path) -> StepResult:
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
        [{**r, "source_revision": None, "revision_key": f"evidence/{r['source']}"} for r in refused],
        schema=QUARANTINE_SCHEMA))
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
    return StepResult(len(runs), changed, {"refused": len(refused),
                                           "files": len(list(Path(evidence_dir).glob("*.jsonl.gz")))})


# Revision-level records in `quarantine`: revisions registered but no longer listed upstream.
UNLISTED_QUARANTINE_SQL = f"""
SELECT coalesce(source_file, stream) AS source, commit AS source_revision, 0 AS line_number,
    'upstream no longer lists this revision: nothing was fetched, no run withdrawn' AS reason, '' AS raw_line,
    revision_key
FROM snapshots WHERE state = '{UNLISTED}'
"""


IN_SCOPE = "run_id IN (SELECT run_id FROM scope_runs)"
IN_SCOPE_GROUPS = "comparison_key IN (SELECT comparison_key FROM scope_groups)"
# The quarantine rows a publication recomputes: its revisions' lines and conflicts, the evidence files'
# refusals and the attestation files' (appended again by `load_attestation_files`).
QUARANTINE_IN_SCOPE = ("revision_key IN (SELECT revision_key FROM scope_revisions) OR revision_key IS NULL "
                       "OR revision_key LIKE 'evidence/%' OR revision_key LIKE 'attestations/%'")


def update_runs(con: duckdb.DuckDBPyConnection, wh: Warehouse) -> StepResult:
    """The `runs` rows in scope from their observations and controlled runs; the `quarantine` rows of the
    revisions in scope and of the evidence files."""
    changed = replace_where(con, "runs", IN_SCOPE, f"SELECT * FROM ({RUNS_SQL}) ORDER BY run_id", key="run_id")
    con.execute(f"INSERT INTO scope_groups SELECT DISTINCT comparison_key FROM runs WHERE {IN_SCOPE} "
                "EXCEPT SELECT comparison_key FROM scope_groups")
    conflicts = con.sql(CONFLICTS_SQL).to_arrow_table()
    con.register("conflicts", _conflicts_with_lines(wh, con, conflicts))
    changed |= replace_where(
        con, "quarantine", QUARANTINE_IN_SCOPE,
        "SELECT source, source_revision, line_number, reason, raw_line, revision_key FROM snapshot_quarantine "
        "WHERE revision_key IN (SELECT revision_key FROM scope_revisions) "
        "UNION ALL SELECT source, source_revision, line_number, reason, raw_line, revision_key FROM conflicts "
        "UNION ALL SELECT source, source_revision, line_number, reason, raw_line, revision_key FROM evidence_quarantine "
        f"UNION ALL SELECT * FROM ({UNLISTED_QUARANTINE_SQL}) WHERE revision_key IN (SELECT revision_key FROM scope_revisions)",
    )
    con.unregister("conflicts")
    [(count,)] = con.execute("SELECT count(*) FROM runs").fetchall()
    [(quarantined,)] = con.execute("SELECT count(*) FROM quarantine").fetchall()
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


def load_attestation_files(con: duckdb.DuckDBPyConnection, directory: Path | None) -> int:
    """`attestations` from the attestation files; each refused file becomes a `quarantine` row."""
    targets = {}
    for run_id, run_digest, metric in con.execute(
            "SELECT r.run_id, m.run_digest, r.metric FROM runs r JOIN manifests m USING (run_id)").fetchall():
        targets[run_id] = targets[run_digest] = (run_id, metric)
    accepted, refused = load_attestations(directory, targets)
    con.register("a_new", accepted)
    replace_if_changed(con, "attestations", "SELECT * FROM a_new ORDER BY attestation_id")
    con.unregister("a_new")
    con.register("a_refused", refused)
    con.execute("""
        INSERT INTO quarantine BY NAME
        SELECT 'attestations' AS source, sha256 AS source_revision, 0 AS line_number, reason, raw AS raw_line,
            'attestations/' || file AS revision_key
        FROM a_refused""").fetchall()
    con.unregister("a_refused")
    return accepted.num_rows


def update_manifests(con: duckdb.DuckDBPyConnection) -> StepResult:
    """The manifests of the runs in scope (a run's manifest never depends on its withdrawal, so the others
    stand as they are)."""
    con.execute("CREATE OR REPLACE TEMP TABLE _manifests AS SELECT * FROM manifests WHERE false")
    for page in build_manifests(con):
        con.register("m_page", page)
        con.execute("INSERT INTO _manifests SELECT * FROM m_page")
        con.unregister("m_page")
    # The run digest covers the whole manifest (the protocol and environment through their digests).
    changed = replace_where(con, "manifests", IN_SCOPE, "SELECT * FROM _manifests ORDER BY run_id", key="run_id",
                            compare="run_id, run_digest")
    con.execute("DROP TABLE _manifests")
    [(count,)] = con.execute("SELECT count(*) FROM manifests").fetchall()
    return StepResult(count, changed, {"first_published": record_first_publications(con)})


def record_first_publications(con: duckdb.DuckDBPyConnection) -> int:
    """Stamp each run published for the first time with this publication's time; a run's stamp, once
    written, never changes (a record page's "Published" date), even if the run is withdrawn and listed again."""
    [(added,)] = con.execute("""
        INSERT INTO publications
        SELECT run_id, date_trunc('second', get_current_timestamp()) FROM manifests
        WHERE run_id NOT IN (SELECT run_id FROM publications)
    """).fetchall()
    return added


def update_ranks(con: duckdb.DuckDBPyConnection) -> StepResult:
    """Ranks, reproductions and claim checks of the comparison groups in scope."""
    changed = replace_where(con, "ranks", IN_SCOPE_GROUPS, f"SELECT * FROM ({RANKS_SQL}) ORDER BY run_id",
                            key="comparison_key")
    group_runs = f"SELECT run_id FROM runs WHERE {IN_SCOPE_GROUPS}"
    changed |= replace_where(con, "reproductions",
                             f"controlled_run_id IN ({group_runs}) OR source_run_id IN ({group_runs})",
                             f"SELECT * FROM ({evidence.REPRODUCTIONS_SQL}) ORDER BY ALL", key="source_run_id")
    con.register("cc_new", claims.claim_checks(con))
    changed |= replace_where(con, "claim_checks", IN_SCOPE_GROUPS, "SELECT * FROM cc_new ORDER BY ALL",
                             key="comparison_key")
    con.unregister("cc_new")
    [(count,)] = con.execute("SELECT count(*) FROM ranks").fetchall()
    [(groups,)] = con.execute("SELECT count(DISTINCT comparison_key) FROM ranks").fetchall()
    return StepResult(count, changed, {"groups": groups})
