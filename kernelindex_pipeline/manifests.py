"""Canonical manifests: the BenchmarkRun of each run, with its BenchmarkProtocol and ExecutionEnvironment."""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow as pa

from kernelindex_pipeline import catalog
from kernelindex_pipeline.identity import API_VERSION, canonical_json, digest

_QUANTILES = (("p20", "p20_value", "source_p20", "20"), ("p80", "p80_value", "source_p80", "80"))


def _iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def run_manifest(run: dict, extra_spec: dict | None = None) -> dict:
    """The BenchmarkRun of one `runs` row."""
    latency = run["metric"] == "latency"
    primary = {"latencyNs" if latency else "peakMemoryBytes": {"median": run["median_value"]}, "primaryStatistic": "median"}
    spec = {
        "status": run["status"],
        "timing" if latency else "memory": primary,
        "observedAt": _iso(run["observed_at"]),
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


MANIFEST_INPUTS_SQL = """
SELECT r.*, p.manifest AS protocol, e.manifest AS environment, c.record AS controlled_record
FROM runs r
JOIN protocols p USING (protocol_digest)
JOIN environments e USING (environment_digest)
LEFT JOIN controlled_runs c USING (run_id)
ORDER BY r.run_id
"""


def controlled_spec(record: dict) -> dict:
    """What a controlled run adds to its BenchmarkRun: how it was checked, the ceilings its batch measured,
    and how close to them it came."""
    extra = {"correctness": record.get("correctness", {}), "evidenceLevel": catalog.CONTROLLED}
    if record["environment"]["spec"].get("ceilings"):
        extra["ceilings"] = record["environment"]["spec"]["ceilings"]
    if record.get("achieved"):
        extra["achieved"] = record["achieved"]
    if record.get("implementation_label"):
        extra["implementationLabel"] = record["implementation_label"]
    return extra


def build_manifests(con) -> pa.Table:
    """One canonical manifest per run, with the digest of its BenchmarkRun."""
    rows = con.sql(MANIFEST_INPUTS_SQL).to_arrow_table().to_pylist()
    run_ids, texts, digests = [], [], []
    for row in rows:
        extra = controlled_spec(json.loads(row["controlled_record"])) if row["controlled_record"] else None
        run = run_manifest(row, extra)
        manifest = {"run": run, "protocol": json.loads(row["protocol"]), "environment": json.loads(row["environment"])}
        run_ids.append(row["run_id"])
        texts.append(canonical_json(manifest))
        digests.append(digest(run))
    return pa.table({"run_id": run_ids, "manifest": texts, "run_digest": digests},
                    schema=pa.schema([("run_id", pa.string()), ("manifest", pa.string()), ("run_digest", pa.string())]))
