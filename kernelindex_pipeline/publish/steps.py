"""The warehouse steps, as plain functions (no Dagster here).

Fetching lands revisions: their bytes go to the content-addressed raw store and a small record of each
goes to `landing/`. Publishing turns every landed revision not yet in the warehouse, and the committed
rerun evidence, into the next generation of the warehouse in one go (`Warehouse.publish`): snapshots,
observations, runs, manifests, ranks and their Parquet copies change together or not at all. What a
publication derives from them (runs, manifests, ranks, claim checks) is in publish/derived.py.

Long because publication is one transaction: each step it runs is here, in the order it runs them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from kernelindex_pipeline.core import catalog

from kernelindex_pipeline.ingest import evidence
from kernelindex_pipeline.verdicts import claims
from kernelindex_pipeline.publish.audit import audit
from kernelindex_pipeline.publish.derived import (
    StepResult,
    load_attestation_files,
    mark_scope,
    update_claims,
    update_manifests,
    update_published_identifiers,
    update_ranks,
    update_runs,
)
from kernelindex_pipeline.runs.history import DELETED, LISTED, REFUSED, UNLISTED, UNPARSEABLE  # noqa: F401 - the states callers land with
from kernelindex_pipeline.core.documents import gpu_environment, implementation_manifest, source_protocol
from kernelindex_pipeline.core.identity import Published, published
from kernelindex_pipeline.ingest.normalize import QUARANTINE_SCHEMA, Snapshot, normalize
from kernelindex_pipeline.ingest.references import record_references
from kernelindex_pipeline.ingest.sources import SOURCE_NAME, Revision
from kernelindex_pipeline.warehouse.store import Warehouse
from kernelindex_pipeline.warehouse.sql import registered, replace_if_changed

# ingest_state keys holding the fingerprints of the evidence files and of the attestation files the warehouse
# was built from: new evidence re-checks claims, new attestations touch only the attestations.
EVIDENCE_KEY = "evidence"
ATTESTATIONS_KEY = "attestations"
# ingest_state key and value naming how the derived tables (runs, manifests, ranks, ...) were computed: a
# home built otherwise has them recomputed from all of history once, then publication by publication.
DERIVED_KEY = "derived"
DERIVED_VERSION = "rerun-facts-6"
# Snapshot bytes normalized together (one revision larger than this is normalized alone).
NORMALIZE_BATCH_BYTES = 32 * 2**20

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
    claims: StepResult


# -- landing ----------------------------------------------------------------------------------------

def land_revision(wh: Warehouse, revision: Revision, data: bytes | None, state: str = LISTED) -> None:
    """Store a fetched revision's bytes, then its record, for the next publication to take in. A refused
    revision lands as its record and reason alone, without a commit time: it takes no place in upstream's
    history (its reason gives the time it claims)."""
    if revision.refused:
        state, data = REFUSED, None
    sha = wh.store_raw(data) if data is not None else None
    wh.land({"revision_key": revision.key, "source": revision.source, "stream": revision.stream,
             "source_file": revision.path, "commit": revision.commit,
             "committed_at": None if revision.refused else revision.committed_at,
             "sha256": sha, "bytes": len(data) if data is not None else 0, "location": revision.location,
             "state": state, "benchmarked_commit": revision.benchmarked_commit, "release": revision.release,
             "problem": revision.refused})


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


@dataclass(frozen=True)
class News:
    """What an ingest has to do, against the warehouse as it stands: the revisions upstream lists whose bytes
    are not stored yet (``to_fetch``), landed revisions not published yet (``to_publish``), whether the evidence
    or the attestation files changed since the last publication, and whether the derived tables were computed
    another way (``recompute``)."""

    to_fetch: list[str]
    to_publish: set[str]
    evidence_changed: bool
    attestations_changed: bool
    recompute: bool
    published: dict[str, str]

    @property
    def anything(self) -> bool:
        return bool(self.to_fetch or self.to_publish or self.evidence_changed or self.attestations_changed
                    or self.recompute)

    def run_keys(self, keys: list[str]) -> list[str]:
        """The revision keys (partitions, in order) one ingest run covers: from the first not published yet
        to the last; the last alone when every one is published."""
        unpublished = still_to_fetch(keys, self.published)
        return keys[keys.index(unpublished[0]):] if unpublished else keys[-1:]


def news(wh: Warehouse, listed: Sequence[str], evidence_dir: Path, attestations_dir: Path | None = None) -> News:
    """What is new for the warehouse ``wh``, given the revision keys upstream lists and the evidence and
    attestation folders a publication would read."""
    published, state = {}, {}
    if wh.exists():
        with wh.reader() as con:
            published = dict(con.execute("SELECT revision_key, state FROM snapshots").fetchall())
            state = dict(con.execute("SELECT key, any_value(value) FROM ingest_state WHERE list_contains(?, key) "
                                     "GROUP BY 1", [[EVIDENCE_KEY, ATTESTATIONS_KEY, DERIVED_KEY]]).fetchall())
    return News(
        to_fetch=still_to_fetch(listed, published),
        to_publish={r["revision_key"] for r in wh.landed()} - set(published),
        evidence_changed=state.get(EVIDENCE_KEY) != fingerprint(file_digests(evidence_files(evidence_dir))),
        attestations_changed=state.get(ATTESTATIONS_KEY) != fingerprint(file_digests(attestation_files(attestations_dir))),
        recompute=wh.exists() and state.get(DERIVED_KEY) != DERIVED_VERSION,
        published=published,
    )


# -- one publication --------------------------------------------------------------------------------

def evidence_files(directory: Path) -> list[Path]:
    return sorted(Path(directory).glob("*.jsonl.gz"))


def attestation_files(directory: Path | None) -> list[Path]:
    return [] if directory is None else sorted(Path(directory).glob("*.json"))


def file_digests(files: Sequence[Path]) -> dict[str, str]:
    """Each file's sha256, by name, in the files' order."""
    return {path.name: sha256_of(path) for path in files}


def fingerprint(digests: dict[str, str]) -> str:
    """A digest of files' names and bytes (`file_digests`): a change to any republishes."""
    h = hashlib.sha256()
    for name, sha in digests.items():
        h.update(name.encode() + b"\0" + bytes.fromhex(sha))
    return h.hexdigest()


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def publish(wh: Warehouse, evidence_dir: Path, attestations_dir: Path | None = None) -> Publication:
    """Take every landed revision not yet published, the evidence files and the attestation files into the
    next generation. The derived tables change only where the new revisions or evidence reach (`mark_scope`)."""
    with wh.publish() as staging:
        con = staging.con
        con.execute("DELETE FROM publication_changes")
        snapshots = record_snapshots(con, wh.landed())
        everything = _state(con, DERIVED_KEY) != DERIVED_VERSION
        if everything:  # identities (workload digests, comparison keys) come from normalization too
            con.execute("DELETE FROM workloads")
            [(keys,)] = con.execute("SELECT coalesce(list(revision_key), []) FROM snapshots").fetchall()
        else:
            keys = snapshots.details["keys"]
        observations = normalize_snapshots(con, wh, keys)
        references = record_references(con, wh, wh.landed_references())
        files = evidence_files(evidence_dir)
        digests = file_digests(files)
        evidence_changed = everything or _state(con, EVIDENCE_KEY) != fingerprint(digests)
        evidence_kernels, spread = None, None  # every claim's; read when the claims are checked
        if evidence_changed:
            before = claims.EvidenceState.read(con)
            loaded = load_controlled_evidence(con, files, digests, everything)
            _set_state(con, EVIDENCE_KEY, fingerprint(digests))
            if not loaded.details["reload"]:
                after = claims.EvidenceState.read(con)
                evidence_kernels, spread = claims.kernels_to_recheck(con, before, after), after.spread
        else:
            loaded = StepResult(0, False, {"refused": 0, "files": 0})
        attested = fingerprint(file_digests(attestation_files(attestations_dir)))
        attestations_changed = everything or _state(con, ATTESTATIONS_KEY) != attested
        if attestations_changed:
            _set_state(con, ATTESTATIONS_KEY, attested)
        if everything:
            _set_state(con, DERIVED_KEY, DERIVED_VERSION)
        staging.changed |= bool(snapshots.changed or references or evidence_changed or attestations_changed
                                or everything)
        if staging.changed:
            in_scope = mark_scope(con, snapshots.details["keys"] + references, evidence_changed, everything,
                                  evidence_kernels)
            runs = update_runs(con, wh)
            runs.details["in_scope"] = in_scope
            manifests = update_manifests(con)
            runs.details["attestations"] = load_attestation_files(con, attestations_dir)
            update_published_identifiers(con)
            ranks = update_ranks(con)
            verdicts = update_claims(con, evidence_changed, spread)
            audit(con)
        else:
            runs = manifests = ranks = verdicts = StepResult(0, False)
        return Publication(staging.changed, snapshots, observations, loaded, runs, manifests, ranks, verdicts)


def _state(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
    [(value,)] = con.execute("SELECT any_value(value) FROM ingest_state WHERE key = ?", [key]).fetchall()
    return value


def _set_state(con: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    con.execute("DELETE FROM ingest_state WHERE key = ?", [key]).fetchall()
    con.execute("INSERT INTO ingest_state VALUES (?, ?)", [key, value]).fetchall()


def record_snapshots(con: duckdb.DuckDBPyConnection, landed: Sequence[dict]) -> StepResult:
    """List every landed revision that is not published yet in `snapshots`, as one publication.

    The first publication of a revision is final: a revision landed again is ignored, except one recorded
    as unlisted, which its bytes replace once upstream lists it again. `publication` numbers the order in
    which revisions were first published, which decides whose values a run keeps (see runs/history.py)."""
    if not landed:
        return StepResult(0, False, {"keys": [], "bytes": 0})
    rows = pa.Table.from_pylist([{**r, "committed_at": r.get("committed_at")} for r in landed], schema=pa.schema([
        ("revision_key", pa.string()), ("source", pa.string()), ("stream", pa.string()), ("source_file", pa.string()),
        ("commit", pa.string()), ("committed_at", pa.string()), ("sha256", pa.string()), ("bytes", pa.int64()),
        ("location", pa.string()), ("state", pa.string()), ("benchmarked_commit", pa.string()),
        ("release", pa.string()), ("problem", pa.string())]))
    with registered(con, landed=rows):
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
                    sha256, bytes, location, state, problem, ? AS publication, benchmarked_commit, release
                FROM landed WHERE list_contains(?, revision_key)""", [publication, keys]).fetchall()
        [(total,)] = con.execute("SELECT coalesce(sum(bytes), 0) FROM landed WHERE list_contains(?, revision_key)",
                                 [keys]).fetchall()
    return StepResult(len(keys), bool(keys), {"keys": keys, "bytes": int(total)})


def normalize_snapshots(con: duckdb.DuckDBPyConnection, wh: Warehouse, keys: Sequence[str]) -> StepResult:
    """Normalize newly listed snapshots into observations and quarantine rows, a batch of about
    NORMALIZE_BATCH_BYTES at a time (so memory follows the largest revision, not a backfill); a file that
    cannot be parsed at all is marked unparseable (its lines quarantined), so it withdraws nothing."""
    listed = con.execute(
        "SELECT stream, commit, source_file, CAST(committed_at AS VARCHAR), location, sha256, source, "
        "benchmarked_commit, release, bytes "
        f"FROM snapshots WHERE list_contains(?, revision_key) AND state = '{LISTED}' ORDER BY revision_key",
        [list(keys)]).fetchall()
    totals = {"rows_in": 0, "quarantined": 0, "unparseable": 0, "observations": 0}
    parsed: list[str] = []
    batch: list[tuple] = []
    for row in listed:
        if batch and sum(r[-1] for r in batch) + row[-1] > NORMALIZE_BATCH_BYTES:
            parsed += _normalize_batch(con, wh, batch, totals)
            batch = []
        batch.append(row)
    if batch:
        parsed += _normalize_batch(con, wh, batch, totals)
    return StepResult(totals.pop("observations"), bool(parsed), {**totals, "snapshots": len(parsed), "keys": parsed})


def _normalize_batch(con: duckdb.DuckDBPyConnection, wh: Warehouse, listed: list[tuple], totals: dict) -> list[str]:
    snapshots = [Snapshot(Revision(at, stream, commit, path, location, source, benchmarked, release), wh.load_raw(sha))
                 for stream, commit, path, at, location, sha, source, benchmarked, release, _ in listed]
    result = normalize(snapshots)
    parsed = [s.revision.key for s in snapshots]
    with registered(con, o_new=result.observations, k_new=result.dims, q_new=result.quarantine,
                    w_new=result.workloads):
        con.execute("DELETE FROM observations WHERE list_contains(?, revision_key)", [parsed]).fetchall()
        con.execute("INSERT INTO observations BY NAME SELECT * FROM o_new")
        con.execute("DELETE FROM snapshot_quarantine WHERE list_contains(?, revision_key)", [parsed]).fetchall()
        con.execute("INSERT INTO snapshot_quarantine BY NAME SELECT * FROM q_new")
        con.execute("DELETE FROM run_keys WHERE dim_key IN (SELECT dim_key FROM k_new)")
        con.execute("INSERT INTO run_keys BY NAME SELECT * FROM k_new")
        con.execute("DELETE FROM workloads WHERE workload_digest IN (SELECT workload_digest FROM w_new)")
        # one row per digest: sources may list one workload's parameters in different orders
        con.execute("INSERT INTO workloads BY NAME SELECT * FROM w_new "
                    "QUALIFY row_number() OVER (PARTITION BY workload_digest ORDER BY definition) = 1")
    for key, reason in result.unparseable.items():
        con.execute(f"UPDATE snapshots SET state = '{UNPARSEABLE}', problem = ? WHERE revision_key = ?", [reason, key]).fetchall()
    totals["rows_in"] += result.rows_in
    totals["quarantined"] += result.quarantine.num_rows
    totals["unparseable"] += len(result.unparseable)
    totals["observations"] += result.observations.num_rows
    return parsed


def _reference_rows() -> tuple[list[Published], list[Published], list[Published]]:
    protocols = [published(source_protocol(m, metric)) for m in catalog.MODES for metric in ("latency", "peak_memory")]
    environments = [published(gpu_environment(g)) for g in catalog.GPUS.values()]
    implementations = [published(implementation_manifest(i)) for i in catalog.IMPLEMENTATIONS.values()]
    return protocols, environments, implementations


def _manifest_table(manifests: list[Published], key: str, extra: str, extra_of) -> pa.Table:
    rows = {m.digest: m for m in manifests}
    return pa.table({key: list(rows), extra: [extra_of(m.obj) for m in rows.values()],
                     "manifest": [m.text for m in rows.values()], "digest_v1alpha1": [m.alias for m in rows.values()]},
                    schema=pa.schema([(key, pa.string()), (extra, pa.string()), ("manifest", pa.string()),
                                      ("digest_v1alpha1", pa.string())]))


_WORKLOAD_ROWS = pa.schema([("workload_digest", pa.string()), ("kernel", pa.string()), ("workload_slug", pa.string()),
                            ("definition", pa.string()), ("shapes_known", pa.bool_()), ("digest_v1alpha1", pa.string())])


def load_controlled_evidence(con: duckdb.DuckDBPyConnection, files: list[Path], digests: dict[str, str],
                             everything: bool = False) -> StepResult:
    """Controlled runs from committed rerun records (`files`, their sha256 in `digests`), with their protocols,
    environments and workloads; and each evidence file's sha256 (`evidence_files`, what a verdict statement
    cites).

    Evidence files are committed once and then only added to: a publication reads the files it has not
    read before, and every file again only where one it read was edited or removed (or with `everything`).
    Files are taken in name order: a run id in several files keeps its record in the last."""
    read = dict(con.execute("SELECT file, sha256 FROM evidence_files").fetchall())
    reload = everything or any(digests.get(name) != sha for name, sha in read.items())
    new = files if reload else [p for p in files if p.name not in read]
    if reload:
        con.execute("DELETE FROM controlled_runs")
        con.execute("DELETE FROM evidence_quarantine")
    # Read all again, the files go straight into the emptied table (holding them aside would hold every
    # record in memory); new files are held aside, then take the place of what earlier files said.
    staged = "controlled_runs" if reload else "c_new"
    if not reload:
        con.execute("CREATE OR REPLACE TEMP TABLE c_new AS SELECT * FROM controlled_runs WHERE false")
    protocols, environments, workloads = {}, {}, {}
    for found in evidence.load_evidence(new):
        if found.runs:
            with registered(con, c_file=pa.Table.from_pylist(found.runs)):
                con.execute(f"DELETE FROM {staged} WHERE run_id IN (SELECT run_id FROM c_file)")
                con.execute(f"INSERT INTO {staged} BY NAME SELECT * REPLACE (record::JSON AS record, "
                            "correctness::JSON AS correctness) FROM c_file")
        if found.refused:
            refused = pa.Table.from_pylist(
                [{**r, "source_revision": None, "revision_key": f"evidence/{r['source']}"} for r in found.refused],
                schema=QUARANTINE_SCHEMA)
            with registered(con, r_file=refused):
                con.execute("INSERT INTO evidence_quarantine BY NAME SELECT * FROM r_file")
        protocols.update(found.protocols)
        environments.update(found.environments)
        workloads.update(found.workloads)
    con.execute(f"CREATE OR REPLACE TEMP TABLE c_loaded AS SELECT run_id, kernel FROM {staged}")
    if not reload:
        con.execute("DELETE FROM controlled_runs USING c_new WHERE controlled_runs.run_id = c_new.run_id "
                    "AND controlled_runs.evidence_file < c_new.evidence_file")
        con.execute("INSERT INTO controlled_runs SELECT * FROM c_new "
                    "WHERE run_id NOT IN (SELECT run_id FROM controlled_runs)")  # else a later file's record stands
        con.execute("DROP TABLE c_new")
    changed = bool(new) or reload
    if reload:
        src_protocols, src_environments, implementations = _reference_rows()
        protocols.update((p.digest, p) for p in src_protocols)
        environments.update((e.digest, e) for e in src_environments)
        tables = {"implementations": _manifest_table(implementations, "implementation_digest", "provider",
                                                     lambda m: m["spec"]["provider"])}
    else:
        tables = {}
    tables["protocols"] = _manifest_table(list(protocols.values()), "protocol_digest", "name",
                                          lambda m: m["metadata"]["name"])
    tables["environments"] = _manifest_table(list(environments.values()), "environment_digest", "name",
                                             lambda m: m["metadata"]["name"])
    for name, table in tables.items():
        with registered(con, **{f"{name}_new": table}):
            if reload:
                changed |= replace_if_changed(con, name, f"SELECT * FROM {name}_new")
            else:  # a new file's protocols and environments join the others
                key = table.column_names[0]
                con.execute(f"INSERT INTO {name} SELECT * FROM {name}_new WHERE {key} NOT IN (SELECT {key} FROM {name})")
    files_table = pa.table({"file": list(digests), "sha256": list(digests.values())},
                           schema=pa.schema([("file", pa.string()), ("sha256", pa.string())]))
    with registered(con, f_new=files_table):
        changed |= replace_if_changed(con, "evidence_files", "SELECT * FROM f_new ORDER BY file")
    [(loaded,)] = con.execute("SELECT count(*) FROM controlled_runs").fetchall()
    if workloads:
        workload_rows = pa.Table.from_pylist([
            {"workload_digest": w["workload_digest"], "kernel": w["definition"]["spec"]["kernel"],
             "workload_slug": w["workload_slug"], "definition": json.dumps(w["definition"], ensure_ascii=False),
             "shapes_known": w["shapes_known"], "digest_v1alpha1": w["digest_v1alpha1"]} for w in workloads.values()],
            schema=_WORKLOAD_ROWS)
        with registered(con, w_new=workload_rows):
            con.execute("INSERT INTO workloads BY NAME SELECT * FROM w_new "
                        "WHERE workload_digest NOT IN (SELECT workload_digest FROM workloads)")
    [(refused,)] = con.execute("SELECT count(*) FROM evidence_quarantine").fetchall()
    return StepResult(loaded, changed, {"refused": refused, "files": len(files), "read": len(new), "reload": reload})
