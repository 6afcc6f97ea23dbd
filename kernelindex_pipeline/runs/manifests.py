"""Canonical manifests: the BenchmarkRun of each run, with its BenchmarkProtocol and ExecutionEnvironment."""

from __future__ import annotations

import functools
import json

import pyarrow as pa

from kernelindex_pipeline.core import catalog
from kernelindex_pipeline.core.identity import (API_VERSION, API_VERSION_V1ALPHA2, Published, canonical_texts,
                                                 published)
from kernelindex_pipeline.warehouse.schema import rows_of_runs
from kernelindex_pipeline.warehouse.sql import registered

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


# The parts of the records of the controlled runs in `scope_runs` that their manifests carry (not their samples),
# read first on their own: few rows, each record's JSON parsed once.
CONTROLLED_PARTS_SQL = f"""
CREATE OR REPLACE TEMP TABLE _controlled_parts AS
SELECT run_id, correctness, parts[1] AS ceilings, parts[2] AS achieved,
    json_extract_string(parts[3], '$') AS implementation_label
FROM (SELECT run_id, correctness,
        json_extract(record, ['$.environment.spec.ceilings', '$.achieved', '$.implementation_label']) AS parts
    FROM {rows_of_runs("controlled_runs", "SELECT run_id FROM scope_runs")})
"""
# The runs in `scope_runs` (see history.py), numbered, with the columns a manifest is made of.
MANIFEST_INPUTS_SQL = """
CREATE OR REPLACE TEMP TABLE _manifest_inputs AS
SELECT row_number() OVER (ORDER BY r.run_id) AS n, r.run_id, r.external_id, r.name, r.title, r.kernel,
    r.operation_mode, r.metric, r.unit, r.median_value, r.p20_value, r.p80_value,
    strftime(r.observed_at, '%Y-%m-%dT%H:%M:%S.%gZ') AS observed_at, r.evidence_level, r.source,
    r.protocol_digest, r.workload_digest, r.environment_digest, r.implementation_digest, r.liger_version, r.status,
    r.source_p20, r.source_p50, r.source_p80, r.source_unit, c.run_id IS NOT NULL AS controlled,
    c.correctness, c.ceilings, c.achieved, c.implementation_label
FROM runs r LEFT JOIN _controlled_parts c USING (run_id)
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
    extra = {"correctness": _loaded(row["correctness"]) or {}, "evidenceLevel": catalog.CONTROLLED}
    for key in ("ceilings", "achieved"):
        value = _loaded(row[key])
        if value:
            extra[key] = value
    if row["implementation_label"]:
        extra["implementationLabel"] = row["implementation_label"]
    return extra


def _loaded(text: str | None):
    return json.loads(text) if text else None


# The members of a controlled run's spec that sort before "environmentDigest", as controlled_spec makes them.
_HEAD_MEMBERS = ("achieved", "ceilings", "correctness")


@functools.lru_cache(maxsize=4096)  # a batch's ceilings: one per session, not per run
def _member_texts(text: str | None) -> tuple[str, str] | None:
    """RFC 8785 and v1alpha1 texts of a JSON part given as text; None where controlled_spec leaves it out."""
    value = _loaded(text)
    return canonical_texts(value) if value else None


def controlled_heads(parts: pa.Table) -> pa.Table:
    """`_page_heads` (run_id, head, head_v1alpha1) of rows of `_manifest_inputs` (run_id and _HEAD_MEMBERS): each
    controlled run's members before "environmentDigest", written once as RFC 8785 and once as v1alpha1 (NULL
    where they cannot be written: the run is then left to Python)."""
    heads, heads_v1alpha1 = [], []
    for row in parts.to_pylist():
        written, written_v1alpha1 = [], []
        try:
            for key in _HEAD_MEMBERS:
                texts = _member_texts(row[key]) or (("{}", "{}") if key == "correctness" else None)
                if texts:
                    written.append(f'"{key}":{texts[0]},')
                    written_v1alpha1.append(f'"{key}":{texts[1]},')
        except (ValueError, TypeError):  # rfc8785 refuses what a double cannot hold
            written = written_v1alpha1 = None
        heads.append(None if written is None else "".join(written))
        heads_v1alpha1.append(None if written_v1alpha1 is None else "".join(written_v1alpha1))
    return pa.table({"run_id": parts.column("run_id"), "head": pa.array(heads, pa.string()),
                     "head_v1alpha1": pa.array(heads_v1alpha1, pa.string())})


def published_run(run: dict, aliases: dict[str, str]) -> Published:
    """The BenchmarkRun as published (identity.published); `aliases` maps the digests of v1alpha2 objects it
    may name to their v1alpha1 digests, which the run named as v1alpha1 published it."""
    spec = run["spec"]
    return published(run, {spec[key]: aliases[spec[key]] for key in _REFERENCES if spec[key] in aliases})


# ECMAScript's Number::toString (RFC 8785's numbers) of a double given as DuckDB writes it, which is
# Python's repr: shortest digits, an exponent below 1e-4 and from 1e16 ("2.177422004601313e-07", "722.0").
# ECMAScript writes "722", "0.0000125", "100000000000000000000", and exponents below 1e-6 and from 1e21,
# without a leading zero ("2.177422004601313e-7").
ECMASCRIPT_NUMBER_SQL = r"""
CREATE OR REPLACE TEMP MACRO ecmascript_number(s) AS CASE
    WHEN NOT contains(s, 'e') THEN regexp_replace(s, '\.0$', '')
    WHEN CAST(split_part(s, 'e', 2) AS INTEGER) NOT BETWEEN -6 AND 20
        THEN regexp_replace(s, 'e([+-])0*([0-9])', 'e\1\2')
    WHEN CAST(split_part(s, 'e', 2) AS INTEGER) < 0
        THEN (CASE WHEN starts_with(s, '-') THEN '-' ELSE '' END) || '0.'
            || repeat('0', -1 - CAST(split_part(s, 'e', 2) AS INTEGER))
            || replace(ltrim(split_part(s, 'e', 1), '-'), '.', '')
    ELSE (CASE WHEN starts_with(s, '-') THEN '-' ELSE '' END) || rpad(replace(ltrim(split_part(s, 'e', 1), '-'), '.', ''),
        1 + CAST(split_part(s, 'e', 2) AS INTEGER), '0')
END
"""


def _spec_sql(number: str, digest: str, head: str) -> str:
    """The RFC 8785 text of a run's spec, from a row of `_manifest_inputs` (keys in order); `number` writes a
    double given as VARCHAR, `digest` names a referenced digest column, `head` is the column of a controlled
    run's members that sort first (written by `controlled_heads`)."""
    def metric(q: str) -> str:
        return f"""'"' || source_unit || '_{q}":' || {number.format(f"CAST(source_p{q} AS VARCHAR)")}"""
    measurement = """'{{"metric":"' || metric || '","statistic":"{stat}","unit":"' || unit || '","value":' || {column} || '}}'"""
    primary = """'{{"{name}":{{"median":' || coalesce(CAST(median_value AS VARCHAR), 'null')
        || '}},"primaryStatistic":"median"}}'"""
    return f"""'{{' || CASE WHEN controlled THEN {head} ELSE '' END
        || '"environmentDigest":"' || {digest.format("environment_digest")}
        || CASE WHEN controlled THEN '","evidenceLevel":"{catalog.CONTROLLED}' ELSE '' END
        || '","implementationDigest":"' || {digest.format("implementation_digest")} || '"'
        || CASE WHEN controlled AND implementation_label <> ''
            THEN ',"implementationLabel":' || to_json(implementation_label)::VARCHAR ELSE '' END
        || ',"measurements":[' || concat_ws(',',
            CASE WHEN p20_value IS NOT NULL THEN {measurement.format(stat="p20", column="p20_value")} END,
            CASE WHEN p80_value IS NOT NULL THEN {measurement.format(stat="p80", column="p80_value")} END) || ']'
        || CASE WHEN metric <> 'latency' THEN ',"memory":' || {primary.format(name="peakMemoryBytes")} ELSE '' END
        || ',"observedAt":"' || observed_at || '","protocolDigest":"' || {digest.format("protocol_digest")} || '"'
        || CASE WHEN controlled THEN '' ELSE ',"sourceNative":{{"benchmark":' || to_json(kernel || '/' || operation_mode)::VARCHAR
            || ',"externalId":' || to_json(external_id)::VARCHAR || ',"metrics":{{' || {metric("20")} || ','
            || {metric("50")} || ',' || {metric("80")} || '}},"source":' || to_json(source)::VARCHAR || '}}' END
        || ',"status":' || to_json(status)::VARCHAR
        || CASE WHEN metric = 'latency' THEN ',"timing":' || {primary.format(name="latencyNs")} ELSE '' END
        || ',"workloadDigest":"' || {digest.format("workload_digest")} || '"}}'"""


# The manifests of the runs in `_manifest_inputs`, written in SQL: each run's RFC 8785 text, and its v1alpha1
# text (Python's float repr, the v1alpha1 digests of what it names) to tell whether it is v1alpha2 (as
# identity.published decides). A row any part of which is missing is left to Python.
SQL_PAGE_ROWS = 10_000
_SPEC = _spec_sql("ecmascript_number({})", "{}", "head")
_SPEC_V1ALPHA1 = _spec_sql("{}", "coalesce((SELECT v1alpha1 FROM aliases WHERE digest = {0}), {0})", "head_v1alpha1")
MANIFESTS_SQL = f"""
WITH aliases(digest, v1alpha1) AS ({REFERENCE_ALIASES_SQL}),
written AS MATERIALIZED (
    SELECT i.run_id, i.protocol_digest, i.environment_digest, {_SPEC} AS spec, {_SPEC_V1ALPHA1} AS spec_v1alpha1,
        '"metadata":{{' || CASE WHEN liger_version <> '' THEN '"labels":{{"liger_version":'
            || to_json(liger_version)::VARCHAR || '}},' ELSE '' END
            || '"name":' || to_json(name)::VARCHAR || ',"title":' || to_json(title)::VARCHAR || '}}' AS metadata
    FROM _manifest_inputs i LEFT JOIN _page_heads h USING (run_id)
    WHERE i.n BETWEEN $first AND $last
), versioned AS MATERIALIZED (
    SELECT *, CASE WHEN spec = spec_v1alpha1 THEN '{API_VERSION}' ELSE '{API_VERSION_V1ALPHA2}' END AS api
    FROM written WHERE spec IS NOT NULL AND spec_v1alpha1 IS NOT NULL AND metadata IS NOT NULL
)
SELECT run_id,
    '{{"apiVersion":"' || api || '","kind":"BenchmarkRun",' || metadata || ',"spec":' || spec || '}}' AS run,
    'sha256:' || sha256('{{"apiVersion":"' || api || '","kind":"BenchmarkRun","spec":' || spec || '}}') AS run_digest,
    protocol_digest, environment_digest,
    CASE WHEN api <> '{API_VERSION}' THEN 'sha256:' || sha256('{{"apiVersion":"{API_VERSION}","kind":"BenchmarkRun","spec":'
        || spec_v1alpha1 || '}}') END AS run_digest_v1alpha1
FROM versioned
"""


def write_manifests(con, into: str, page_rows: int = 5_000) -> None:
    """Insert into table `into` (empty) the canonical BenchmarkRun of each run in scope, with its digest (and the
    v1alpha1 one, for a v1alpha2 run) and those of its protocol and environment (`run_manifests`'s
    columns): in SQL, SQL_PAGE_ROWS a statement, and any run SQL could not write in Python, a page at a time,
    so memory follows the page, not the history."""
    aliases = dict(con.execute(REFERENCE_ALIASES_SQL).fetchall())
    con.execute(CONTROLLED_PARTS_SQL)
    con.execute(MANIFEST_INPUTS_SQL)
    con.execute(ECMASCRIPT_NUMBER_SQL)
    [(last,)] = con.execute("SELECT coalesce(max(n), 0) FROM _manifest_inputs").fetchall()
    for first in range(1, last + 1, SQL_PAGE_ROWS):  # a page per statement: its text is held whole while written
        page = {"first": first, "last": first + SQL_PAGE_ROWS - 1}
        parts = con.sql(f"SELECT run_id, {', '.join(_HEAD_MEMBERS)} FROM _manifest_inputs "
                        "WHERE controlled AND n BETWEEN $first AND $last", params=page).to_arrow_table()
        with registered(con, _page_heads=controlled_heads(parts)):
            con.execute(f"INSERT INTO {into} BY NAME {MANIFESTS_SQL}", page)
    con.execute("CREATE OR REPLACE TEMP TABLE _in_python AS SELECT row_number() OVER (ORDER BY n) AS n, * EXCLUDE (n) "
                f"FROM _manifest_inputs ANTI JOIN {into} USING (run_id)")
    [(total,)] = con.execute("SELECT count(*) FROM _in_python").fetchall()
    for first in range(1, total + 1, page_rows):
        rows = con.sql("SELECT * FROM _in_python WHERE n >= $first AND n < $first + $rows ORDER BY n",
                       params={"first": first, "rows": page_rows}).to_arrow_table().to_pylist()
        runs = [published_run(run_manifest(row, controlled_spec(row) if row["controlled"] else None), aliases)
                for row in rows]
        page = pa.table({"run_id": [r["run_id"] for r in rows], "run": [p.text for p in runs],
                         "run_digest": [p.digest for p in runs],
                         "protocol_digest": [r["protocol_digest"] for r in rows],
                         "environment_digest": [r["environment_digest"] for r in rows],
                         "run_digest_v1alpha1": [p.alias for p in runs]}, schema=MANIFEST_SCHEMA)
        with registered(con, _page=page):
            con.execute(f"INSERT INTO {into} BY NAME SELECT * FROM _page")
    for table in ("_controlled_parts", "_manifest_inputs", "_in_python"):
        con.execute(f"DROP TABLE {table}")
