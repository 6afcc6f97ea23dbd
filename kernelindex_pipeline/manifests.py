"""Canonical manifests: the BenchmarkRun of each run, with its BenchmarkProtocol and ExecutionEnvironment."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa

from kernelindex_pipeline import catalog
from kernelindex_pipeline.identity import API_VERSION, Published, published

_QUANTILES = (("p20", "p20_value", "source_p20", "20"), ("p80", "p80_value", "source_p80", "80"))


def run_manifest(run: dict, extra_spec: dict | None = None) -> dict:
    """The BenchmarkRun of one `runs` row (its `observed_at` as MANIFEST_INPUTS_SQL writes it)."""
    latency = run["metric"] == "latency"
    primary = {"latencyNs" if latency else "peakMemoryBytes": {"median": run["median_value"]}, "primaryStatistic": "median"}
    spec = {
        "status": run["status"],
        "timing" if latency else "memory": primary,
        "observedAt": run["observed_at"],
        "measurements": [
            {"unit": run["unit"], "value": run[column], "metric": run["metric"], "statistic": stat}
            for stat, column, _, _ in _QUANTILES
            if run[column] is not None
        ],
        "protocolDigest": run["protocol_digest"],
        "workloadDigest": run["workload_digest"],
        "environmentDigest": run["environment_digest"],
        "implementationDigest": run["implementation_digest"],
    }
    if run["evidence_level"] == catalog.SOURCE_NATIVE:
        unit = run["source_unit"]
        spec["sourceNative"] = {
            "source": run["source"],
            "metrics": {f"{unit}_{q}": run[c] for q, c in (("20", "source_p20"), ("50", "source_p50"), ("80", "source_p80"))},
            "benchmark": f"{run['kernel']}/{run['operation_mode']}",
            "externalId": run["external_id"],
        }
    spec.update(extra_spec or {})
    metadata = {"name": run["name"], "title": run["title"]}
    if run.get("liger_version"):
        metadata["labels"] = {"liger_version": run["liger_version"]}
    return {"kind": "BenchmarkRun", "spec": spec, "metadata": metadata, "apiVersion": API_VERSION}


# The runs in `scope_runs` (see history.py), numbered, with the columns a manifest is made of and only the
# parts of a controlled run's record that its manifest carries (not its samples).
MANIFEST_INPUTS_SQL = """
CREATE OR REPLACE TEMP TABLE _manifest_inputs AS
SELECT row_number() OVER (ORDER BY r.run_id) AS n, r.run_id, r.external_id, r.name, r.title, r.kernel,
    r.operation_mode, r.metric, r.unit, r.median_value, r.p20_value, r.p80_value,
    strftime(r.observed_at, '%Y-%m-%dT%H:%M:%S.%gZ') AS observed_at, r.evidence_level, r.source,
    r.protocol_digest, r.workload_digest, r.environment_digest, r.implementation_digest, r.liger_version, r.status,
    r.source_p20, r.source_p50, r.source_p80, r.source_unit, c.run_id IS NOT NULL AS controlled,
    json_extract(c.record, '$.correctness') AS correctness,
    json_extract(c.record, '$.environment.spec.ceilings') AS ceilings, json_extract(c.record, '$.achieved') AS achieved,
    json_extract_string(c.record, '$.implementation_label') AS implementation_label
FROM runs r LEFT JOIN controlled_runs c USING (run_id)
WHERE r.run_id IN (SELECT run_id FROM scope_runs)
"""
MANIFEST_SCHEMA = pa.schema([("run_id", pa.string()), ("run", pa.string()), ("run_digest", pa.string()),
                             ("protocol_digest", pa.string()), ("environment_digest", pa.string()),
                             ("run_digest_v1alpha1", pa.string())])
# The objects a run names by digest that are v1alpha2, with the digests v1alpha1 gave them.
REFERENCE_ALIASES_SQL = """
SELECT protocol_digest, digest_v1alpha1 FROM protocols WHERE digest_v1alpha1 IS NOT NULL
UNION SELECT workload_digest, digest_v1alpha1 FROM workloads WHERE digest_v1alpha1 IS NOT NULL
UNION SELECT environment_digest, digest_v1alpha1 FROM environments WHERE digest_v1alpha1 IS NOT NULL
UNION SELECT implementation_digest, digest_v1alpha1 FROM implementations WHERE digest_v1alpha1 IS NOT NULL
"""
_REFERENCES = ("protocolDigest", "workloadDigest", "environmentDigest", "implementationDigest")


def controlled_spec(row: dict) -> dict:
    """What a controlled run adds to its BenchmarkRun (from its record's parts in MANIFEST_INPUTS_SQL): how
    it was checked, the ceilings its batch measured, and how close to them it came."""
    extra = {"correctness": json.loads(row["correctness"]) if row["correctness"] else {},
             "evidenceLevel": catalog.CONTROLLED}
    for key in ("ceilings", "achieved"):
        value = json.loads(row[key]) if row[key] else None
        if value:
            extra[key] = value
    if row["implementation_label"]:
        extra["implementationLabel"] = row["implementation_label"]
    return extra


def published_run(run: dict, aliases: dict[str, str]) -> Published:
    """The BenchmarkRun as published (identity.published); `aliases` maps the digests of v1alpha2 objects it
    may name to their v1alpha1 digests, which the run named as v1alpha1 published it."""
    spec = run["spec"]
    return published(run, {spec[key]: aliases[spec[key]] for key in _REFERENCES if spec[key] in aliases})


def build_manifests(con, page_rows: int = 5_000) -> Iterator[pa.Table]:
    """The canonical BenchmarkRun of each run in scope, with its digest (and the v1alpha1 one, for a
    v1alpha2 run) and those of its protocol and environment (`run_manifests`), a page at a time, so memory
    follows the page, not the history."""
    aliases = dict(con.execute(REFERENCE_ALIASES_SQL).fetchall())
    con.execute(MANIFEST_INPUTS_SQL)
    [(total,)] = con.execute("SELECT count(*) FROM _manifest_inputs").fetchall()
    for first in range(1, total + 1, page_rows):
        rows = con.sql("SELECT * FROM _manifest_inputs WHERE n >= $first AND n < $first + $rows ORDER BY n",
                       params={"first": first, "rows": page_rows}).to_arrow_table().to_pylist()
        runs = [published_run(run_manifest(row, controlled_spec(row) if row["controlled"] else None), aliases)
                for row in rows]
        yield pa.table({"run_id": [r["run_id"] for r in rows], "run": [p.text for p in runs],
                        "run_digest": [p.digest for p in runs],
                        "protocol_digest": [r["protocol_digest"] for r in rows],
                        "environment_digest": [r["environment_digest"] for r in rows],
                        "run_digest_v1alpha1": [p.alias for p in runs]}, schema=MANIFEST_SCHEMA)
    con.execute("DROP TABLE _manifest_inputs")
