"""Upstream CSV bytes -> run observations and quarantine rows, in Arrow and DuckDB SQL.

Every record of a snapshot (a data line, or several where a quoted field holds line breaks; `csvfile` reads
them) ends in exactly one place: an accepted observation (one run as one revision lists it) or a quarantine
row with the reason it was refused. Row-level work is columnar;
Python only touches the small dimension tables (distinct workloads, GPUs, implementations, protocols).

Long because it is one data flow (parse, check, dimensions, identities, duplicates) whose SQL stages
read each other's relations by name; split, one pipeline would be read across files.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import rfc8785

import kernels
from kernelindex_pipeline.core import catalog
from kernelindex_pipeline.ingest import csvfile
from kernelindex_pipeline.core.documents import gpu_environment, implementation_digest, slug_safe, source_protocol, workload_definition
from kernelindex_pipeline.core.identity import published
from kernelindex_pipeline.ingest.sources import Revision
from kernelindex_pipeline.warehouse.sql import registered

UPSTREAM_COLUMNS: tuple[str, ...] = (
    "kernel_name", "kernel_provider", "kernel_operation_mode", "metric_name", "metric_unit", "x_name", "x_label",
    "x_value", "y_value_50", "y_value_20", "y_value_80", "extra_benchmark_config_str", "gpu_name", "timestamp",
    "liger_version",
)
MAX_LATENCY_MS = 3.6e6  # an hour per pass is a broken measurement, not a slow kernel
MAX_MEMORY_MB = 2.0**20  # a tebibyte of device memory
# Latencies are CUDA-event timings (about 0.5 µs resolution) reported by do_bench in ms; anything under 1 µs
# is below what the timer can tell apart from zero. The shipped snapshots' smallest latency is
# 0.00512 ms (5,120 ns; softmax forward, torch, x = 128, RTX 3090), well above it.
MIN_LATENCY_NS = 1_000

QUARANTINE_SCHEMA = pa.schema(
    [("revision_key", pa.string()), ("source", pa.string()), ("source_revision", pa.string()),
     ("line_number", pa.int64()), ("reason", pa.string()), ("raw_line", pa.string())]
)


@dataclass
class Snapshot:
    revision: Revision
    data: bytes


@dataclass
class Normalized:
    observations: pa.Table  # one narrow row per accepted line
    dims: pa.Table  # what each dim_key of the observations means
    quarantine: pa.Table
    workloads: pa.Table
    rows_in: int  # data lines taken in (plus one per unparseable revision without any): observations + quarantine
    unparseable: dict[str, str]  # revision_key -> why that revision cannot be read as a whole


@dataclass
class _Parsed:
    table: pa.Table | None  # accepted records, upstream columns + line_number
    rejected: list[tuple[int, str]]  # (line number, reason)
    lines: csvfile.Lines | None  # the file's physical lines (None for an empty file)
    width: int = 0  # the header's number of fields: records are read to it
    has_replacement: bool = False
    unparseable: str | None = None  # why the whole file was refused


def _unreadable(lines: csvfile.Lines) -> str | None:
    """Why the file as a whole cannot be read, or None."""
    try:
        head = lines.raw(0).decode("utf-8")
    except UnicodeDecodeError:
        return "header is not valid UTF-8"
    if "\x00" in head:
        return "header is not valid UTF-8 text: it holds NUL bytes (UTF-16?)"
    if not head.strip():
        return "no header line: the first line is blank"
    return None


def _refused(reason: str, lines: csvfile.Lines | None) -> _Parsed:
    """A file refused as a whole: each non-blank data line, or a line-0 row where there is none."""
    rejected = [(n, reason) for n in (csvfile.data_lines(lines) if lines is not None else [])]
    return _Parsed(None, rejected or [(0, reason)], lines, unparseable=reason)


def _parse_snapshot(data: bytes) -> _Parsed:
    if not data:
        return _refused("empty file: no header and no rows", None)
    lines = csvfile.Lines.of(data)
    reason = _unreadable(lines)
    if reason is not None:
        return _refused(reason, lines)
    head = lines.text(0)
    header = csvfile.lenient_fields(head)[0] or []
    missing = [c for c in UPSTREAM_COLUMNS if c not in header]
    if missing or len(set(header)) != len(header):
        why = f"missing column(s) {', '.join(missing)}" if missing else "duplicate column names"
        return _refused(f"schema drift: {why}; header is {head[:200]!r}", lines)
    clean = csvfile.read_clean(lines, header, list(UPSTREAM_COLUMNS))
    if clean is not None:
        return _Parsed(clean, [], lines, len(header))
    damaged = csvfile.read_damaged(lines, header, list(UPSTREAM_COLUMNS))
    return _Parsed(damaged.table, damaged.rejected, lines, len(header), damaged.has_replacement)


def _raw_table(snapshots: Sequence[Snapshot]) -> tuple[pa.Table, list[tuple[str, int, str]], dict[str, _Parsed], bool]:
    parts, rejected, parsed, replacement = [], [], {}, False
    for snap in snapshots:
        key = snap.revision.key
        result = parsed[key] = _parse_snapshot(snap.data)
        rejected += [(key, n, reason) for n, reason in result.rejected]
        replacement |= result.has_replacement
        if result.table is not None and result.table.num_rows:
            parts.append(result.table.append_column("revision_key", pa.DictionaryArray.from_arrays(pa.repeat(pa.scalar(0, pa.int32()), result.table.num_rows), pa.array([key]))))
    return (pa.concat_tables(parts) if parts else _empty_raw()), rejected, parsed, replacement


# ---------------------------------------------------------------------------------------------------
# Dimension tables, one row per distinct value (a few thousand at most), built in Python.

def _number(text: str):
    try:
        value = float(text)
    except ValueError:
        return text
    if not math.isfinite(value):
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


# A number written with thousands separators ("16,384"): no float parser reads it, and "1,500" reads as 1.5
# in half the world's locales, so a parameter written so is refused rather than taken as a name.
GROUPED_NUMBER = re.compile(r"\s*[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?\s*")


def _grouped(name: str, value) -> str | None:
    """Why a parameter value written with thousands separators is refused (None for any other value)."""
    if isinstance(value, str) and GROUPED_NUMBER.fullmatch(value):
        return (f"{name} {value.strip()!r} is a number written with thousands separators; "
                f"write it without them ({value.replace(',', '').strip()})")
    return None


# Upstream names some benchmarks by kernel and one setting: "dyt_beta=True" is kernel dyt with beta true.
KERNEL_SETTING = re.compile(r"(?P<kernel>[a-z0-9_]+)_(?P<name>[A-Za-z0-9]+)=(?P<value>[A-Za-z0-9_.+-]+)")


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def split_kernel_name(kernel_name: str) -> tuple[str, tuple[str, object] | None]:
    """(kernel, its setting as (name, value), or None): "dyt_beta=True" is kernel dyt with beta true."""
    named = KERNEL_SETTING.fullmatch(kernel_name)
    if named is None:
        return kernel_name, None
    value = named["value"]
    return named["kernel"], (named["name"], {"true": True, "false": False}.get(value.lower(), _number(value)))


def workload_of(kernel_name: str, x_name: str, x_value: str, config: str) -> dict:
    """Canonical workload of one upstream (kernel name, x, config) triple, or {'reason': ...}; a setting in
    the kernel name is one of the workload's parameters."""
    try:
        cfg = json.loads(config, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return {"reason": "extra_benchmark_config_str is not valid JSON"}
    if not isinstance(cfg, dict):
        return {"reason": "extra_benchmark_config_str is not a JSON object"}
    kernel, setting = split_kernel_name(kernel_name)
    spec = kernels.lookup(kernel)
    params, dtype, implied = {}, None, {}
    for key, value in cfg.items():
        if value is None:  # e.g. the swept parameter, which the x column gives
            continue
        if isinstance(value, (dict, list)):
            return {"reason": f"config parameter {key!r} is not a scalar"}
        if isinstance(value, float) and not math.isfinite(value):
            return {"reason": f"config parameter {key!r} is not a finite number"}
        if grouped := _grouped(f"config parameter {key!r}", value):
            return {"reason": grouped}
        name = spec.canonical(key)
        if name == "dtype":
            dtype = kernels.DTYPE_NAMES.get(str(value), slug_safe(str(value).removeprefix("torch.")))
        elif key in spec.implied or name in spec.implied:
            implied[name] = value
        else:
            params[name] = value
    if grouped := _grouped("x_value", x_value):
        return {"reason": grouped}
    params[spec.canonical(x_name)] = _number(x_value)  # the swept parameter wins over a config default
    if setting is not None:
        name, value = spec.canonical(setting[0]), setting[1]
        if name in params and (type(params[name]), params[name]) != (type(value), value):
            return {"reason": f"kernel_name sets {name} = {json.dumps(value)} where extra_benchmark_config_str "
                              f"has {json.dumps(params[name])[:40]}"}
        params[name] = value
    try:
        return workload_definition(kernel, params, dtype, implied)
    except rfc8785.IntegerDomainError:  # RFC 8785 numbers are doubles (a parameter or a shape derived from one)
        return {"reason": "workload has an integer beyond 2**53, which JSON cannot hold exactly"}
    except rfc8785.CanonicalizationError as exc:
        return {"reason": f"workload has no canonical JSON: {exc}"}


def _workload_dimension(con: duckdb.DuckDBPyConnection) -> pa.Table:
    keys = con.sql("SELECT DISTINCT kernel_name, x_name, x_value, extra_benchmark_config_str FROM keys "
                   "WHERE json_valid(extra_benchmark_config_str)").fetchall()
    rows = []
    for kernel_name, x_name, x_value, config in keys:
        w = workload_of(kernel_name, x_name, x_value, config)
        kernel, _ = split_kernel_name(kernel_name)
        rows.append({
            "kernel_name": kernel_name, "kernel": kernel, "x_name": x_name, "x_value": x_value,
            "extra_benchmark_config_str": config,
            "workload_reason": w.get("reason"), "workload_slug": w.get("workload_slug"),
            "workload_digest": w.get("workload_digest"), "digest_v1alpha1": w.get("digest_v1alpha1"),
            "definition": json.dumps(w["definition"], ensure_ascii=False) if "definition" in w else None,
            "kernel_title": kernels.lookup(kernel).title, "known_kernel": w.get("known_kernel"),
            "shapes_known": w.get("shapes_known"),
        })
    schema = pa.schema([("kernel_name", pa.string()), ("kernel", pa.string()), ("x_name", pa.string()),
                        ("x_value", pa.string()),
                        ("extra_benchmark_config_str", pa.string()), ("workload_reason", pa.string()),
                        ("workload_slug", pa.string()), ("workload_digest", pa.string()),
                        ("digest_v1alpha1", pa.string()), ("definition", pa.string()),
                        ("kernel_title", pa.string()), ("known_kernel", pa.bool_()), ("shapes_known", pa.bool_())])
    return pa.Table.from_pylist(rows, schema=schema)


def _gpu_dimension() -> pa.Table:
    rows = []
    for g in catalog.GPUS.values():
        env = published(gpu_environment(g))
        rows.append({"gpu_name": g.source_name, "gpu": g.product, "form_factor": g.form_factor,
                     "architecture": g.architecture, "environment_digest": env.digest,
                     "digest_v1alpha1": env.alias, "environment": env.text})
    return pa.Table.from_pylist(rows)


def _implementation_dimension(con: duckdb.DuckDBPyConnection) -> pa.Table:
    providers = [p for (p,) in con.sql("SELECT DISTINCT kernel_provider FROM keys").fetchall()]
    rows = []
    for p in providers:
        impl = catalog.implementation(p)
        rows.append({"kernel_provider": p, "implementation": impl.name, "project": impl.project,
                     "implementation_digest": implementation_digest(p), "known_provider": p in catalog.IMPLEMENTATIONS})
    return pa.Table.from_pylist(rows, schema=pa.schema([("kernel_provider", pa.string()), ("implementation", pa.string()),
                                                         ("project", pa.string()), ("implementation_digest", pa.string()),
                                                         ("known_provider", pa.bool_())]))


def _protocol_dimension() -> pa.Table:
    rows = []
    for mode in catalog.MODES:
        for metric in ("latency", "peak_memory"):
            p = published(source_protocol(mode, metric))
            rows.append({"mode": mode, "metric": metric, "protocol_digest": p.digest, "protocol": p.text})
    return pa.Table.from_pylist(rows)


# ---------------------------------------------------------------------------------------------------
# Row-level SQL.

# The columns that say what was measured, where and how; everything but when and how fast. Checks and
# identity work on these run once per distinct combination, not once per row.
DIMENSION_COLUMNS = ("kernel_name", "kernel_provider", "kernel_operation_mode", "metric_name", "metric_unit", "x_name",
                     "x_value", "extra_benchmark_config_str", "gpu_name")
_DIM_KEY = f"hash({', '.join(DIMENSION_COLUMNS)})"
_UTF8_CHECK = f"""WHEN concat({", ".join(DIMENSION_COLUMNS)}, y_value_50, y_value_20, y_value_80, timestamp, liger_version)
         LIKE '%' || chr(65533) || '%'
        THEN 'invalid UTF-8 bytes in the line'"""

CHECK_SQL = f"""
CREATE OR REPLACE TEMP TABLE checked AS
WITH typed AS (
    SELECT revision_key, line_number, {_DIM_KEY} AS dim_key,
        try_cast(y_value_50 AS DOUBLE) AS y50, try_cast(y_value_20 AS DOUBLE) AS y20,
        try_cast(y_value_80 AS DOUBLE) AS y80, metric_unit = 'ms' AS is_latency, metric_unit = 'MB' AS is_memory,
        try_strptime(timestamp, '%Y-%m-%d %H:%M:%S') AS observed_at, timestamp,
        NULLIF(liger_version, '') AS liger_version {{utf8_columns}}
    FROM raw
)
SELECT revision_key, line_number, dim_key, y20, y50, y80, observed_at, liger_version, CASE
    {{utf8_check}}
    WHEN y50 IS NULL OR y20 IS NULL OR y80 IS NULL THEN 'y_value_20/50/80 is not a number'
    WHEN isnan(y50) OR isnan(y20) OR isnan(y80) OR isinf(y50) OR isinf(y20) OR isinf(y80)
        THEN 'y_value_20/50/80 is NaN or infinite'
    WHEN least(y20, y50, y80) <= 0 THEN 'y_value_20/50/80 is zero or negative'
    WHEN (is_latency AND y80 > {MAX_LATENCY_MS}) OR (NOT is_latency AND y80 > {MAX_MEMORY_MB})
        THEN 'absurd value: over ' || CASE WHEN is_latency THEN 'an hour per pass' ELSE 'a TiB' END
    WHEN is_latency AND round(least(y20, y50, y80) * 1e6) < {MIN_LATENCY_NS}
        THEN 'latency ' || CAST(least(y20, y50, y80) AS VARCHAR)
            || ' ms is below the timer''s resolution ({MIN_LATENCY_NS / 1000:g} µs)'
    WHEN is_memory AND round(least(y20, y50, y80) * 1048576) < 1
        THEN 'memory ' || CAST(least(y20, y50, y80) AS VARCHAR) || ' MB rounds to 0 bytes'
    WHEN NOT (y20 <= y50 AND y50 <= y80) THEN 'quantiles out of order: p20 <= p50 <= p80 does not hold'
    WHEN observed_at IS NULL THEN 'timestamp is not YYYY-MM-DD HH:MM:SS: ' || timestamp
END AS reason
FROM typed
"""

KEYS_SQL = f"""
CREATE OR REPLACE TEMP TABLE keys AS
SELECT {_DIM_KEY} AS dim_key, {", ".join(f"any_value({c}) AS {c}" for c in DIMENSION_COLUMNS)} FROM raw GROUP BY 1
"""

# Everything about a run but its timestamp and values, once per distinct upstream key.
DIMENSIONS_SQL = f"""
CREATE OR REPLACE TEMP TABLE dims AS
WITH checked_keys AS (
    SELECT *, CASE
        WHEN kernel_name = '' OR kernel_provider = '' OR kernel_operation_mode = '' OR x_name = '' OR x_value = ''
            THEN 'missing value in kernel_name, kernel_provider, kernel_operation_mode, x_name or x_value'
        WHEN NOT regexp_full_match(kernel_name, '[a-z0-9_]+|{KERNEL_SETTING.pattern}')
            THEN 'kernel_name is not a lower-case identifier (with at most one _setting=value): ' || kernel_name
        WHEN NOT regexp_full_match(kernel_provider, '[A-Za-z0-9_.-]+') THEN 'kernel_provider is not an identifier: ' || kernel_provider
        WHEN kernel_operation_mode NOT IN ({", ".join(f"'{m}'" for m in catalog.MODES)})
            THEN 'unknown operation mode: ' || kernel_operation_mode
        WHEN NOT ((metric_name = 'speed' AND metric_unit = 'ms') OR (metric_name = 'memory' AND metric_unit = 'MB'))
            THEN 'unknown metric or unit: ' || metric_name || ' in ' || metric_unit
        WHEN NOT json_valid(extra_benchmark_config_str) THEN 'extra_benchmark_config_str is not valid JSON'
    END AS key_reason
    FROM keys
), j AS (
    SELECT k.*, w.kernel, w.workload_reason, w.workload_slug, w.workload_digest, w.kernel_title, w.known_kernel,
        g.gpu, g.form_factor, g.architecture, g.environment_digest,
        i.implementation, i.project, i.implementation_digest,
        -- a comparison group keeps its key: it names the workload and environment by their v1alpha1 digests
        coalesce(w.digest_v1alpha1, w.workload_digest) AS key_workload, coalesce(g.digest_v1alpha1, g.environment_digest) AS key_environment,
        CASE k.metric_name WHEN 'speed' THEN 'latency' ELSE 'peak_memory' END AS metric,
        trim(regexp_replace(lower(k.gpu_name), '[^a-z0-9]+', '-', 'g'), '-') AS gpu_slug
    FROM checked_keys k
    LEFT JOIN workloads w USING (kernel_name, x_name, x_value, extra_benchmark_config_str)
    LEFT JOIN gpus g USING (gpu_name)
    LEFT JOIN implementations i USING (kernel_provider)
), p AS (
    SELECT j.*, p.protocol_digest,
        concat_ws('/', kernel, kernel_operation_mode, kernel_provider, gpu_slug, workload_slug) || '/' AS id_prefix,
        CASE WHEN metric = 'peak_memory' THEN '/peak_memory' ELSE '' END AS id_suffix
    FROM j LEFT JOIN (SELECT mode AS kernel_operation_mode, metric, protocol_digest FROM protocols) p
        USING (kernel_operation_mode, metric)
)
SELECT *,
    coalesce(key_reason, CASE WHEN gpu IS NULL THEN 'unknown GPU: ' || gpu_name END, workload_reason) AS dim_reason,
    kernel_title || ' · ' || kernel_provider || ' · ' || kernel_operation_mode
        || CASE WHEN metric = 'peak_memory' THEN ' · peak memory' ELSE '' END AS title,
    -- the RFC 8785 text of the comparison: its keys in order, every value a plain identifier (nothing to escape)
    'sha256:' || sha256('{{"environment":"' || key_environment || '","family":"{catalog.SOURCE_FAMILY}","kernel":"'
        || kernel || '","metric":"' || metric || '","mode":"' || kernel_operation_mode || '","workload":"'
        || key_workload || '"}}') AS comparison_key,
    '{catalog.SOURCE_NATIVE}' AS evidence_level, '{catalog.SOURCE}' AS source,
    hash(id_prefix, id_suffix) AS identity_key
FROM p
"""

# One narrow row per accepted line: the run it observes, when, and its values.
OBSERVATIONS_SQL = f"""
CREATE OR REPLACE TEMP TABLE identified AS
SELECT substr(sha256('{catalog.SOURCE}:' || d.id_prefix || strftime(c.observed_at, '%Y-%m-%d-%H-%M-%S') || d.id_suffix),
              1, 16) AS run_id,
    c.dim_key, c.revision_key, c.line_number, c.observed_at, c.liger_version,
    CAST(round(c.y50 * CASE d.metric WHEN 'latency' THEN 1e6 ELSE 1048576 END) AS BIGINT) AS median_value,
    CAST(round(c.y20 * CASE d.metric WHEN 'latency' THEN 1e6 ELSE 1048576 END) AS BIGINT) AS p20_value,
    CAST(round(c.y80 * CASE d.metric WHEN 'latency' THEN 1e6 ELSE 1048576 END) AS BIGINT) AS p80_value,
    c.y20 AS source_p20, c.y50 AS source_p50, c.y80 AS source_p80,
    hash(d.identity_key, c.observed_at) AS identity_hash
FROM checked c JOIN dims d USING (dim_key)
WHERE c.reason IS NULL AND d.dim_reason IS NULL;

-- Rows sharing a run identity within one revision: an integer hash of (identity, time) finds the suspects,
-- the exact (revision, run id) decides.
CREATE OR REPLACE TEMP TABLE duplicates AS
WITH suspects AS (SELECT identity_hash FROM identified GROUP BY 1 HAVING count(*) > 1)
SELECT revision_key, run_id, min(line_number) AS first_line FROM identified
WHERE identity_hash IN (SELECT identity_hash FROM suspects) GROUP BY ALL HAVING count(*) > 1;

CREATE OR REPLACE TEMP TABLE rejected AS
SELECT revision_key, line_number, reason FROM checked WHERE reason IS NOT NULL
UNION ALL
SELECT c.revision_key, c.line_number, d.dim_reason FROM checked c JOIN dims d USING (dim_key)
WHERE c.reason IS NULL AND d.dim_reason IS NOT NULL
UNION ALL
SELECT i.revision_key, i.line_number, 'duplicate of line ' || d.first_line || ' (same run identity)'
FROM identified i JOIN duplicates d USING (revision_key, run_id) WHERE i.line_number <> d.first_line;
"""

_OBSERVATIONS = """
SELECT * EXCLUDE (identity_hash) FROM identified
WHERE NOT EXISTS (SELECT 1 FROM duplicates d WHERE d.revision_key = identified.revision_key
                  AND d.run_id = identified.run_id AND d.first_line <> identified.line_number)
"""


def normalize(snapshots: Sequence[Snapshot], con: duckdb.DuckDBPyConnection | None = None) -> Normalized:
    """Normalize snapshots into observations (one row per accepted line) and quarantine rows.

    A revision that cannot be read as a whole (empty, header not UTF-8 or blank, schema drift) lands no observations, is named in `unparseable`, and has every data line
    quarantined with that reason (one line-0 row where it has none).
    """
    con = con or duckdb.connect()
    raw, malformed, parsed, replacement = _raw_table(snapshots)
    tables = {
        "raw": raw,
        "gpus": _gpu_dimension(),
        "protocols": _protocol_dimension(),
        "malformed": pa.table({"revision_key": pa.array([r[0] for r in malformed], pa.string()),
                               "line_number": pa.array([r[1] for r in malformed], pa.int64()),
                               "reason": pa.array([r[2] for r in malformed], pa.string())}),
    }
    with registered(con, **tables):
        con.execute(CHECK_SQL.format(
            utf8_check=_UTF8_CHECK if replacement else "",
            utf8_columns=(", " + ", ".join(["y_value_50", "y_value_20", "y_value_80", *DIMENSION_COLUMNS])) if replacement else "",
        ))
        con.execute(KEYS_SQL)
        with registered(con, workloads=_workload_dimension(con), implementations=_implementation_dimension(con)):
            con.execute(DIMENSIONS_SQL)
            con.execute(OBSERVATIONS_SQL)
            ((duplicated,),) = con.sql("SELECT count(*) FROM duplicates").fetchall()
            observations = con.sql(_OBSERVATIONS if duplicated else "SELECT * EXCLUDE (identity_hash) FROM identified").to_arrow_table()
            dims = con.sql("SELECT * EXCLUDE (key_reason, workload_reason, dim_reason, identity_key, key_workload, key_environment) "
                           "FROM dims WHERE dim_reason IS NULL").to_arrow_table()
            rejected = con.sql("SELECT * FROM malformed UNION ALL SELECT * FROM rejected ORDER BY revision_key, line_number").to_arrow_table()
            workloads = con.sql("SELECT DISTINCT workload_digest, kernel, workload_slug, definition, shapes_known, "
                                "digest_v1alpha1 "
                                "FROM workloads WHERE workload_digest IS NOT NULL").to_arrow_table()
    rows_in = raw.num_rows + len(malformed)
    unparseable = {key: p.unparseable for key, p in parsed.items() if p.unparseable is not None}
    return Normalized(observations, dims, _with_raw_lines(rejected, snapshots, parsed), workloads, rows_in, unparseable)


def _with_raw_lines(rejected: pa.Table, snapshots: Sequence[Snapshot], parsed: dict[str, _Parsed]) -> pa.Table:
    """Quarantine rows: each refused line with its source, revision and raw text (a record spanning lines in full)."""
    revisions = {s.revision.key: s for s in snapshots}
    keys, numbers, reasons = (rejected.column(c).to_pylist() for c in ("revision_key", "line_number", "reason"))
    raw = [""] * len(keys)
    by_revision: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        by_revision.setdefault(key, []).append(i)
    for key, rows in by_revision.items():
        if parsed[key].lines is not None:
            texts = csvfile.raw_lines(parsed[key].lines, [numbers[i] for i in rows], parsed[key].width)
            for i, text in zip(rows, texts):
                raw[i] = text
    rows = {
        "revision_key": keys,
        "source": [revisions[k].revision.path for k in keys],
        "source_revision": [revisions[k].revision.commit for k in keys],
        "line_number": numbers,
        "reason": reasons,
        "raw_line": raw,
    }
    return pa.table(rows, schema=QUARANTINE_SCHEMA)


def _empty_raw() -> pa.Table:
    names = [*UPSTREAM_COLUMNS, "line_number", "revision_key"]
    return pa.schema([(n, pa.int64() if n == "line_number" else pa.string()) for n in names]).empty_table()
