"""Asset checks on the warehouse: identity, referential integrity, digests, quarantine, unknown kernels.

`warehouse_tables` declares every check here (and the verdict rules' checks in `verdict_reports`) and runs
them in its own step, on the generation it has just made live: a check costs its query, not a step."""

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass

import dagster as dg
import duckdb

from kernelindex_pipeline.defs.keys import COMPARISON_RANKS, RUN_MANIFESTS, RUNS
from kernelindex_pipeline.core.identity import digest
from kernelindex_pipeline.publish.audit import (DUPLICATE_IDS_SQL, MANIFESTS_WITHOUT_RUN_SQL, MISSING_MANIFESTS_SQL,
                                                ORPHAN_RANKS_SQL, WRONG_GROUP_SIZES_SQL)
from kernelindex_pipeline.warehouse.schema import manifests_sql, rows_of_runs

UNIQUE_RUN_IDS = "unique_run_ids"
NO_ORPHAN_RANKS = "no_orphan_ranks"
EVERY_RUN_HAS_MANIFEST = "every_run_has_manifest"
DIGESTS_RECOMPUTE = "digests_recompute"
QUARANTINE_RATE = "quarantine_rate_below_threshold"
UNKNOWN_KERNELS = "no_unknown_kernels"
QUARANTINE_RATE_LIMIT = 0.02


@dataclass(frozen=True)
class WarehouseCheck:
    """An asset check of a warehouse table: `measure` reads a connection to the live generation and says
    whether it passed, with what it found."""

    spec: dg.AssetCheckSpec
    measure: Callable[[duckdb.DuckDBPyConnection], tuple[bool, dict]]
    severity: dg.AssetCheckSeverity

    @property
    def name(self) -> str:
        return self.spec.name

    def __call__(self, con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
        passed, metadata = self.measure(con)
        return dg.AssetCheckResult(asset_key=self.spec.asset_key, check_name=self.spec.name, passed=passed,
                                   metadata=metadata, severity=self.severity)


def warehouse_check(asset: dg.AssetKey, name: str, *, blocking: bool = False,
                    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR):
    """Declare `measure` as the check `name` on `asset` (its docstring is the check's description)."""
    def declare(measure: Callable[[duckdb.DuckDBPyConnection], tuple[bool, dict]]) -> WarehouseCheck:
        spec = dg.AssetCheckSpec(name, asset=asset, blocking=blocking, description=inspect.getdoc(measure))
        return WarehouseCheck(spec, measure, severity)
    return declare


def _count(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    return int(con.execute(sql).fetchone()[0])


@warehouse_check(RUNS, UNIQUE_RUN_IDS, blocking=True)
def unique_run_ids(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict]:
    """No run id or external id appears twice in `runs` (looked up for the runs the latest publication wrote;
    the publication's own audit refused any generation that broke it)."""
    dupes = _count(con, DUPLICATE_IDS_SQL)
    return dupes == 0, {"duplicates": dupes}


@warehouse_check(COMPARISON_RANKS, NO_ORPHAN_RANKS)
def no_orphan_ranks(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict]:
    """Every ranked run exists in `runs`, and group sizes match their groups."""
    orphans = _count(con, ORPHAN_RANKS_SQL)
    bad_sizes = _count(con, WRONG_GROUP_SIZES_SQL)
    return orphans == 0 and bad_sizes == 0, {"orphans": orphans, "wrong_group_sizes": bad_sizes}


@warehouse_check(RUN_MANIFESTS, EVERY_RUN_HAS_MANIFEST)
def every_run_has_manifest(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict]:
    """Each run has a manifest and no manifest lacks its run (looked up for the runs the latest publication
    touched)."""
    missing = _count(con, MISSING_MANIFESTS_SQL)
    extra = _count(con, MANIFESTS_WITHOUT_RUN_SQL)
    return missing == 0 and extra == 0, {"missing": missing, "without_run": extra}


# The manifests a digest check reads: those the latest publication wrote (a random WRITTEN_SAMPLE of them
# when it wrote more, as a backfill or a nightly does: that many find a fault touching one written manifest
# in 200, 99 times in 100), and a stretch of DIGEST_SAMPLE stored ones from a random place, so a check costs
# what a publication changed and still looks at old records now and then. (A stretch, not scattered rows:
# each row read costs the whole compressed block of text it sits in.)
CHECKED_RUN_IDS_SQL = """
SELECT run_id FROM (SELECT key AS run_id FROM publication_changes WHERE table_name = 'run_manifests')
    USING SAMPLE reservoir({written} ROWS)
UNION (SELECT run_id FROM run_manifests
       WHERE rowid >= (SELECT (random() * (max(rowid) - {sample}))::BIGINT FROM run_manifests)
       ORDER BY rowid LIMIT {sample})
"""
DIGEST_SAMPLE = 200
WRITTEN_SAMPLE = 1_000


def recompute_digests(con, sample: int | None = DIGEST_SAMPLE) -> tuple[list[str], int]:
    """(run ids whose stored digests differ from the ones recomputed from their manifests, manifests
    checked); `sample` None checks every manifest."""
    if sample is None:
        manifests, runs, params = "manifests", "runs", []
    else:
        checked = [r for (r,) in con.execute(CHECKED_RUN_IDS_SQL.format(written=WRITTEN_SAMPLE,
                                                                          sample=int(sample))).fetchall()]
        ids = "SELECT unnest($ids::VARCHAR[])"
        manifests = f"({manifests_sql(rows_of_runs('run_manifests', ids))})"
        runs, params = rows_of_runs("runs", ids), {"ids": checked}
    # On a cursor of its own, so that a result the caller has not finished reading does not stand in the way.
    batches = con.cursor().sql(
        "SELECT m.run_id, m.manifest, m.run_digest, r.protocol_digest, r.environment_digest "
        f"FROM {manifests} m JOIN {runs} r USING (run_id)", params=params).to_arrow_reader(5000)
    bad, checked = [], 0
    # A protocol or environment is stored once (the view joins it by digest): its digest is recomputed once.
    recomputed: dict[str, bool] = {}

    def recomputes(obj: dict, stored: str) -> bool:
        if stored not in recomputed:
            recomputed[stored] = digest(obj) == stored
        return recomputed[stored]

    for batch in batches:  # streamed a batch at a time: a backfill checks all of history
        checked += batch.num_rows
        for rid, text, run_digest, protocol_digest, environment_digest in zip(*batch.to_pydict().values()):
            manifest = json.loads(text)
            spec = manifest["run"]["spec"]
            if (digest(manifest["run"]) != run_digest or not recomputes(manifest["protocol"], protocol_digest)
                    or not recomputes(manifest["environment"], environment_digest)
                    or spec["protocolDigest"] != protocol_digest or spec["environmentDigest"] != environment_digest):
                bad.append(rid)
    return bad, checked


@warehouse_check(RUN_MANIFESTS, DIGESTS_RECOMPUTE)
def digests_recompute(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict]:
    """Run, protocol and environment digests recompute from the manifests' canonical JSON: the manifests
    the latest publication wrote (every one up to 1,000, a random 1,000 beyond), and a stretch of the others."""
    bad, checked = recompute_digests(con)
    return not bad, {"mismatches": len(bad), "checked": checked, "examples": ", ".join(bad[:5])}


@warehouse_check(RUNS, QUARANTINE_RATE, severity=dg.AssetCheckSeverity.WARN)
def quarantine_rate(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict]:
    """Warn when more than 2% of upstream rows were quarantined."""
    quarantined, accepted = con.execute(
        "SELECT (SELECT count(*) FROM snapshot_quarantine), (SELECT count(*) FROM observations)").fetchone()
    reasons = con.execute("SELECT reason, count(*) FROM quarantine GROUP BY 1 ORDER BY 2 DESC LIMIT 5").fetchall()
    total = quarantined + accepted
    rate = quarantined / total if total else 0.0
    return rate <= QUARANTINE_RATE_LIMIT, {
        "rate": round(rate, 6), "quarantined": quarantined,
        "top_reasons": dg.MetadataValue.md("\n".join(f"- {n} × {r}" for r, n in reasons) or "none")}


@warehouse_check(RUNS, UNKNOWN_KERNELS, severity=dg.AssetCheckSeverity.WARN)
def unknown_kernels(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict]:
    """Warn on kernels that ingested with a generic workload because `kernels/` does not know them."""
    names = [k for (k,) in con.execute("SELECT DISTINCT kernel FROM runs WHERE NOT known_kernel ORDER BY 1").fetchall()]
    return not names, {"unknown_kernels": ", ".join(names) or "none"}


CHECKS = [unique_run_ids, no_orphan_ranks, every_run_has_manifest, digests_recompute, quarantine_rate, unknown_kernels]
