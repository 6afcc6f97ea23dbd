"""Evidence files read in batches, in SQL: each line's fields read by DuckDB, each part of a run (protocol,
environment, workload, comparison key, ...) made once per distinct value as `evidence.controlled_run` makes it; a
line DuckDB might read otherwise than Python, or a part not made, goes to `controlled_run`, which says why."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

import kernels
from kernelindex_pipeline.core import catalog, reasons
from kernelindex_pipeline.core.documents import implementation_digest
from kernelindex_pipeline.core.identity import Published, digest, slugify
from kernelindex_pipeline.ingest.evidence import (REFUSED, RERUN_SOURCE, EvidenceError, controlled_run, launch_floor_ns_of,
                                                  published_text, stack_environment, workload_of_text)
from kernelindex_pipeline.warehouse.sql import registered


def read_lines(path: Path) -> list[str]:
    """The records of an evidence file as committed (what `controlled_runs.record` keeps): its non-blank
    lines, stripped."""
    text = gzip.decompress(path.read_bytes()).decode("utf-8")
    return [line for line in map(str.strip, text.replace("\r\n", "\n").replace("\r", "\n").split("\n")) if line]


@dataclass
class EvidenceFile:
    """What one evidence file gives: its controlled runs (an Arrow table of `controlled_runs`'s columns, None where
    the file was refused whole), their protocols and environments (as published) and workloads (by digest), and
    the records refused, each with its reason."""

    runs: pa.Table | None = None
    protocols: dict[str, Published] = field(default_factory=dict)
    environments: dict[str, Published] = field(default_factory=dict)
    workloads: dict[str, dict] = field(default_factory=dict)
    refused: list[dict] = field(default_factory=list)


# Each line of a batch (`_lines`: file, n, line) with the fields a controlled run is made of read out of it, and
# whether the set-based path may take it (`regular`): JSON that Python's parser reads alike (no NaN,
# Infinity or trailing comma, top-level keys once each), an object whose fields have the types controlled_run
# reads. Any other line goes to controlled_run, which makes it a run or refuses it with its reason.
STRINGS = ("kernel", "provider", "mode", "metric", "unit", "status", "observed_at", "dtype", "reason", "reason_code",
           "session", "tensor_dtype", "implementation.code_revision")
OBJECTS = ("params", "protocol", "environment", "implied", "correctness")
NUMBERS = ("median", "p20", "p80")
TYPED = STRINGS + OBJECTS + NUMBERS + ("samples", "compile", "implementation")
_T = {name: f"types[{i + 1}]" for i, name in enumerate(TYPED)}
_S = {name: f"strings[{i + 1}]" for i, name in enumerate(STRINGS)}
_O = {name: f"objects[{i + 1}]" for i, name in enumerate(OBJECTS)}
_NUMBER = "['BIGINT', 'UBIGINT', 'DOUBLE']"


def _paths(names) -> str:
    return "[" + ", ".join(f"'$.{name}'" for name in names) + "]"


def _is(name: str, types: str, maybe: bool = False) -> str:
    test = f"list_contains({types}, {_T[name]})"
    return f"({_T[name]} IS NULL OR {_T[name]} = 'NULL' OR {test})" if maybe else f"coalesce({test}, false)"


PARSED_SQL = rf"""
CREATE OR REPLACE TEMP TABLE _parsed AS
WITH parsed AS (
    -- DuckDB's parser also takes trailing commas and numbers Python's does not ('+1', 'nan', 'inf'): those lines
    -- (and any that merely look so) go to Python's
    SELECT file, n, line FROM _lines
    WHERE json_valid(line) AND NOT regexp_matches(line, ',\s*[}}\]]|[:,\[]\s*(\+|-?(?i:nan|inf))')
), typed AS MATERIALIZED (
    SELECT file, n, line, json_type(line, {_paths(TYPED)}) AS types, json_type(line) = 'OBJECT' AS object,
        json_keys(line) AS keys
    FROM parsed
), regular AS (
    SELECT file, n, line, types FROM typed
    WHERE object AND len(keys) = len(list_distinct(keys))
        {" ".join(f"AND {_is(name, '[' + repr('VARCHAR') + ']')}" for name in STRINGS[:7])}
        {" ".join(f"AND {_is(name, '[' + repr('OBJECT') + ']')}" for name in OBJECTS[:3])}
        {" ".join(f"AND {_is(name, '[' + repr('VARCHAR') + ']', maybe=True)}" for name in STRINGS[7:])}
        {" ".join(f"AND {_is(name, _NUMBER, maybe=True)}" for name in NUMBERS)}
        AND {_is("implied", "['OBJECT']", maybe=True)} AND {_is("implementation", "['OBJECT']", maybe=True)}
), values AS MATERIALIZED (
    SELECT file, n, line, types, json_extract_string(line, {_paths(STRINGS)}) AS strings,
        json_extract(line, {_paths(OBJECTS)}) AS objects,
        CASE WHEN {_T["samples"]} = 'ARRAY' AND list_has_all({_NUMBER}, json_type(line, '$.samples[*]')) THEN
            TRY_CAST(json_extract(line, '$.samples') AS DOUBLE[]) END AS samples,
        from_json(line, '{{"median": "DOUBLE", "p20": "DOUBLE", "p80": "DOUBLE"}}') AS numbers
    FROM regular
)
SELECT file, n, line, {_S["kernel"]} AS kernel, {_S["provider"]} AS provider, {_S["mode"]} AS operation_mode,
    {_S["metric"]} AS metric, {_S["unit"]} AS unit, {_S["status"]} AS status, {_S["observed_at"]} AS observed_text,
    {_O["params"]}::VARCHAR AS params, {_O["protocol"]}::VARCHAR AS protocol,
    {_O["environment"]}::VARCHAR AS environment, {_S["dtype"]} AS dtype,
    CASE WHEN {_T["implied"]} = 'OBJECT' THEN {_O["implied"]}::VARCHAR END AS implied,
    numbers.median AS median_value, numbers.p20 AS p20_value, numbers.p80 AS p80_value, samples,
    {_S["reason"]} AS status_reason, nullif({_S["reason_code"]}, '') AS reason_code,
    nullif({_S["session"]}, '') AS session,
    coalesce(nullif({_S["tensor_dtype"]}, ''), nullif({_S["dtype"]}, ''), 'fp32') AS tensor_dtype,
    coalesce({_T["compile"]} <> 'NULL', false) AS compile_recorded,
    CASE WHEN coalesce({_T["correctness"]} <> 'NULL', false) THEN {_O["correctness"]}::VARCHAR END AS correctness,
    {_S["implementation.code_revision"]} AS code_revision
FROM values
"""
# The runs of the regular lines: each part computed once per distinct value in Python (`_protocols`,
# `_environments`, `_workloads`, `_observed`, `_providers`, `_titles`, `_codes`, `_comparisons`) joined back;
# a line any part of which Python could not make is left to controlled_run.
RUNS_SQL = f"""
CREATE OR REPLACE TEMP TABLE _runs AS
WITH joined AS (
    SELECT p.*, e.environment_digest, e.environment_v1alpha1, e.gpu, e.form_factor, e.architecture, e.gpu_slug,
        e.liger_version, e.launch_floor_ns, r.protocol_digest, r.family, w.workload_digest, w.workload_slug,
        w.workload_key, o.observed_at, o.stamp, v.implementation, v.project, v.implementation_digest, t.title,
        coalesce(p.reason_code, c.status_code) AS status_code,
        p.operation_mode || '/' || p.provider || '/' || e.gpu_slug || '/' || w.workload_slug || '/' || o.stamp
            || CASE WHEN p.metric = 'peak_memory' THEN '/peak_memory' ELSE '' END
            || CASE WHEN r.family = '{catalog.SOURCE_REPLICA_FAMILY}' THEN '/source-replica' ELSE '' END AS id_tail
    FROM _parsed p
    JOIN _environments e ON e.text = p.environment
    JOIN _protocols r ON r.text = p.protocol
    JOIN _workloads w ON w.kernel = p.kernel AND w.params = p.params AND w.dtype IS NOT DISTINCT FROM p.dtype
        AND w.implied IS NOT DISTINCT FROM p.implied
    JOIN _observed o ON o.text = p.observed_text
    JOIN _providers v ON v.provider = p.provider
    JOIN _titles t ON t.kernel = p.kernel AND t.provider = p.provider AND t.operation_mode = p.operation_mode
        AND t.metric = p.metric
    LEFT JOIN _codes c ON c.status = p.status AND c.reason IS NOT DISTINCT FROM p.status_reason
), identified AS (
    SELECT j.*, j.kernel || '/' || j.id_tail AS external_id, k.comparison_key
    FROM joined j JOIN _comparisons k ON k.environment = j.environment_v1alpha1 AND k.family = j.family
        AND k.kernel = j.kernel AND k.metric = j.metric AND k.operation_mode = j.operation_mode
        AND k.workload = j.workload_key
)
SELECT file, n, left(sha256('{RERUN_SOURCE}:' || external_id), 16) AS run_id, external_id,
    left('kernelindex-' || trim(regexp_replace(lower(external_id), '[^a-z0-9]+', '-', 'g'), '-'), 100) AS name,
    title, kernel, operation_mode, provider, implementation, project, metric, unit, median_value, p20_value,
    p80_value, gpu, form_factor, architecture, workload_slug, observed_at, '{catalog.CONTROLLED}' AS evidence_level,
    '{RERUN_SOURCE}' AS source, status, comparison_key, protocol_digest, workload_digest, environment_digest,
    implementation_digest, file AS evidence_file, line AS record, family, samples, status_reason, status_code,
    coalesce(session, file) AS session, liger_version, tensor_dtype, compile_recorded, launch_floor_ns,
    correctness, code_revision
FROM identified
WHERE regexp_full_match(external_id, '[\\x20-\\x7e]*')  -- Python's slug of other text may differ
"""


def _table(rows: list[dict], strings: str, **types: pa.DataType) -> pa.Table:
    """`rows` as a table of the columns named in `strings` (text), then those of `types`."""
    return pa.Table.from_pylist(rows, schema=pa.schema([(name, pa.string()) for name in strings.split()] + list(types.items())))


def _parts_of(con) -> tuple[dict, dict, dict]:
    """The distinct protocols, environments, workloads, timestamps, providers, titles, status codes and
    comparison keys of `_parsed`, each made once in Python (as controlled_run makes it) and registered on
    `con`; returns the Published protocols and environments and the workloads by their text."""
    protocols, environments, workloads = {}, {}, {}
    rows = []
    for (text,) in con.execute("SELECT DISTINCT protocol FROM _parsed").fetchall():
        try:
            protocol = published_text(json.dumps(json.loads(text), sort_keys=True))
            family = protocol.obj["spec"]["comparability"]["family"]
        except REFUSED:  # controlled_run says why
            continue
        if isinstance(family, str):
            protocols[text] = protocol
            rows.append({"text": text, "protocol_digest": protocol.digest, "family": family})
    con.register("_protocols", _table(rows, "text protocol_digest family"))
    rows = []
    for (text,) in con.execute("SELECT DISTINCT environment FROM _parsed").fetchall():
        try:
            recorded = json.loads(text)
            environment = published_text(json.dumps(stack_environment(recorded), sort_keys=True))
            hardware = environment.obj["spec"]["hardware"]
            product, form_factor, architecture = hardware["product"], hardware.get("formFactor"), hardware.get("architecture")
            liger = environment.obj["spec"].get("software", {}).get("ligerKernel")
            row = {"text": text, "environment_digest": environment.digest,
                   "environment_v1alpha1": environment.v1alpha1_digest, "gpu": product, "form_factor": form_factor,
                   "architecture": architecture, "gpu_slug": slugify(catalog.gpu_label(product, form_factor)),
                   "liger_version": liger, "launch_floor_ns": launch_floor_ns_of(recorded)}
        except REFUSED:  # controlled_run says why
            continue
        if all(v is None or isinstance(v, str) for k, v in row.items() if k != "launch_floor_ns"):
            environments[text] = environment
            rows.append(row)
    con.register("_environments", _table(rows, "text environment_digest environment_v1alpha1 gpu form_factor architecture "
                                               "gpu_slug liger_version", launch_floor_ns=pa.float64()))
    rows = []
    for kernel, params, dtype, implied in con.execute(
            "SELECT DISTINCT kernel, params, dtype, implied FROM _parsed").fetchall():
        try:
            workload = workload_of_text(kernel, json.dumps(json.loads(params), sort_keys=True), dtype,
                                 json.dumps(json.loads(implied) if implied else {}, sort_keys=True))
        except REFUSED:  # controlled_run says why
            continue
        workloads[workload["workload_digest"]] = workload
        rows.append({"kernel": kernel, "params": params, "dtype": dtype, "implied": implied,
                     "workload_digest": workload["workload_digest"], "workload_slug": workload["workload_slug"],
                     "workload_key": workload["digest_v1alpha1"] or workload["workload_digest"]})
    con.register("_workloads", _table(rows, "kernel params dtype implied workload_digest workload_slug workload_key"))
    rows = []
    for (text,) in con.execute("SELECT DISTINCT observed_text FROM _parsed").fetchall():
        try:
            observed = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)
        except REFUSED:  # controlled_run says why
            continue
        rows.append({"text": text, "observed_at": observed.replace(tzinfo=None), "stamp": observed.strftime("%Y-%m-%d-%H-%M-%S")})
    con.register("_observed", _table(rows, "text stamp", observed_at=pa.timestamp("us")))
    providers = [p for (p,) in con.execute("SELECT DISTINCT provider FROM _parsed").fetchall()]
    con.register("_providers", _table(
        [{"provider": p, "implementation": catalog.implementation(p).name, "project": catalog.implementation(p).project,
          "implementation_digest": implementation_digest(p)} for p in providers],
        "provider implementation project implementation_digest"))
    con.register("_titles", _table(
        [{"kernel": k, "provider": p, "operation_mode": m, "metric": metric,
          "title": f"{kernels.lookup(k).title} · {p} · {m}" + (" · peak memory" if metric == "peak_memory" else "")}
         for k, p, m, metric in con.execute("SELECT DISTINCT kernel, provider, operation_mode, metric FROM _parsed").fetchall()],
        "kernel provider operation_mode metric title"))
    con.register("_codes", _table(
        [{"status": status, "reason": reason, "status_code": reasons.legacy_code(status, reason)} for status, reason in
         con.execute("SELECT DISTINCT status, status_reason FROM _parsed WHERE reason_code IS NULL").fetchall()],
        "status reason status_code"))
    con.register("_comparisons", _table(
        [{"environment": e, "family": f, "kernel": k, "metric": m, "operation_mode": mode, "workload": w,
          "comparison_key": digest({"environment": e, "family": f, "kernel": k, "metric": m, "mode": mode, "workload": w})}
         for e, f, k, m, mode, w in con.execute(
             "SELECT DISTINCT e.environment_v1alpha1, r.family, p.kernel, p.metric, p.operation_mode, w.workload_key "
             "FROM _parsed p JOIN _environments e ON e.text = p.environment JOIN _protocols r ON r.text = p.protocol "
             "JOIN _workloads w ON w.kernel = p.kernel AND w.params = p.params "
             "AND w.dtype IS NOT DISTINCT FROM p.dtype AND w.implied IS NOT DISTINCT FROM p.implied").fetchall()],
        "environment family kernel metric operation_mode workload comparison_key"))
    return protocols, environments, workloads


def _batch_runs(con, batch: list[tuple[Path, list[str] | Exception]]) -> Iterator[EvidenceFile]:
    """What each file of `batch` (its lines, or why they could not be read) gives, in turn: its regular lines
    in SQL (PARSED_SQL, RUNS_SQL), the rest through controlled_run, a run id listed twice in a file keeping its
    last line. A file with a line that is not JSON is refused whole."""
    read = [(path, lines) for path, lines in batch if not isinstance(lines, Exception)]
    con.register("_lines", pa.table({
        "file": pa.array([path.name for path, lines in read for _ in lines], pa.string()),
        "n": pa.array([n for _, lines in read for n in range(1, len(lines) + 1)], pa.int64()),
        "line": pa.array([line for _, lines in read for line in lines], pa.string())}))
    con.execute(PARSED_SQL)
    protocols, environments, workloads = _parts_of(con)
    con.execute(RUNS_SQL)
    published = {**{p.digest: p for p in protocols.values()}, **{e.digest: e for e in environments.values()}}
    by_digest = {w["workload_digest"]: w for w in workloads.values()}
    firsts = {}
    for file, p, e, w, n in con.execute(
            "SELECT file, protocol_digest, environment_digest, workload_digest, n FROM _runs QUALIFY n = min(n) "
            "OVER (PARTITION BY file, protocol_digest, environment_digest, workload_digest)").fetchall():
        firsts.setdefault(file, []).append((n, published[p], published[e], by_digest[w]))
    taken = {}
    for file, n in con.execute("SELECT file, n FROM _runs").fetchall():
        taken.setdefault(file, set()).add(n)
    # each file's runs, a run id listed twice at its first line's place with its last line's values
    runs = con.sql("SELECT * FROM (SELECT *, min(n) OVER (PARTITION BY file, run_id) AS first FROM _runs) "
                   "QUALIFY n = max(n) OVER (PARTITION BY file, run_id) ORDER BY first").to_arrow_table()
    runs = runs.set_column(runs.schema.get_field_index("correctness"), "correctness",
                           pa.array(map(_as_python_writes, runs["correctness"].to_pylist()), pa.string()))
    for path, lines in batch:
        if isinstance(lines, Exception):
            yield _unreadable(path, lines)
            continue
        file_runs = runs.filter(pc.equal(runs["file"], path.name)).drop_columns(["file"])
        try:
            yield _file_runs(con, path, lines, taken.get(path.name, set()), firsts.get(path.name, []), file_runs)
        except EvidenceError as exc:
            yield _unreadable(path, exc)
    for name in ("_lines", "_protocols", "_environments", "_workloads", "_observed", "_providers", "_titles", "_codes",
                 "_comparisons"):
        con.unregister(name)


def _as_python_writes(text: str | None) -> str | None:
    """A record's part as controlled_run stores it (Python's json.dumps of it), from DuckDB's text of it."""
    return None if text is None else json.dumps(json.loads(text))


def _unreadable(path: Path, exc: Exception) -> EvidenceFile:
    reason = str(exc) if isinstance(exc, EvidenceError) else f"unreadable evidence file: {exc}"
    return EvidenceFile(refused=[{"source": path.name, "line_number": 0, "reason": reason, "raw_line": ""}])


def _file_runs(con, path: Path, lines: list[str], taken: set[int], firsts: list[tuple], runs: pa.Table) -> EvidenceFile:
    """One file's runs: `runs` (made of its lines numbered in `taken`), and its other lines through
    controlled_run; its protocols, environments and workloads in the order its lines first name them."""
    found = EvidenceFile()
    rest, parts = [], list(firsts)
    for n, line in enumerate(lines, start=1):
        if n in taken:
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise EvidenceError(f"unreadable evidence file: {exc}") from exc
        try:
            row, protocol, environment, workload = controlled_run(record, path.name, line)
        except REFUSED as exc:
            found.refused.append({"source": path.name, "line_number": n,
                                  "reason": f"evidence record refused: {exc}", "raw_line": json.dumps(record)[:2000]})
            continue
        rest.append({"n": n, **row})
        parts.append((n, protocol, environment, workload))
    for _, protocol, environment, workload in sorted(parts, key=lambda part: part[0]):
        found.protocols.setdefault(protocol.digest, protocol)
        found.environments.setdefault(environment.digest, environment)
        found.workloads.setdefault(workload["workload_digest"], workload)
    if rest:
        with registered(con, _taken=runs, _rest=pa.Table.from_pylist([{**row, "first": row["n"]} for row in rest])):
            con.execute("CREATE OR REPLACE TEMP TABLE _file AS FROM _taken")
            con.execute("INSERT INTO _file BY NAME SELECT * FROM _rest")
        runs = con.sql("SELECT * REPLACE (min(first) OVER (PARTITION BY run_id) AS first) FROM _file "
                       "QUALIFY n = max(n) OVER (PARTITION BY run_id) ORDER BY first").to_arrow_table()
    found.runs = runs.drop_columns(["n", "first"])
    return found


# Lines read into one statement: enough that DuckDB's threads share the parsing, few enough that memory
# follows the batch, not the history.
BATCH_CHARS = 64 * 2**20


def load_evidence(paths: list[Path]) -> Iterator[EvidenceFile]:
    """Each evidence file in turn, its runs an Arrow table of `controlled_runs`'s columns (files are read in
    batches of about BATCH_CHARS characters); a run id listed twice in a file keeps its last record."""
    con = duckdb.connect()
    try:
        batch, size = [], 0
        for path in paths:
            try:
                lines = read_lines(path)
            except (OSError, EOFError, ValueError) as exc:
                lines = exc
            batch.append((path, lines))
            size += 0 if isinstance(lines, Exception) else sum(map(len, lines))
            if size >= BATCH_CHARS:
                yield from _batch_runs(con, batch)
                batch, size = [], 0
        if batch:
            yield from _batch_runs(con, batch)
    finally:
        con.close()
