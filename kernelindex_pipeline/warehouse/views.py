"""Analyst views over the warehouse tables (documented in docs/warehouse.md).

Plain DuckDB views, recreated in every write transaction, so they always read the current tables.
A *series* is one implementation (provider) in one comparison group: the same kernel, pass, metric,
workload, environment and protocol family, followed across Liger releases and dates.

Every view names a card as `claim_checks` does, model and form factor (`gpu`: 'NVIDIA H100 80GB HBM3'; the
model alone is `gpu_model`, as `runs.gpu` has it), and the protocol by its one name (`protocol`).

The views themselves are views.sql (filled in with the pieces below); here are the queries the claim checks
share with the views (the spread between sessions, reruns of another dtype, source artifacts, rank changes).
"""

import kernels
from kernelindex_pipeline.core.catalog import COMPILED_PROVIDERS, PROTOCOL_NAMES, PROTOCOLS_VALUES, SCRIPT_ARTIFACTS, SOURCE_NATIVE, gpu_label_sql, release_bounds
from kernelindex_pipeline.warehouse.sql import load_sql


# Each protocol digest with its protocol's name (catalog.PROTOCOL_NAMES), joined USING (protocol_digest).
PROTOCOL_NAMES_SQL = f"""(
    SELECT protocol_digest, CASE family {" ".join(f"WHEN '{f}' THEN '{n}'" for f, n in PROTOCOL_NAMES.items())}
        ELSE family END AS protocol
    FROM (SELECT protocol_digest, any_value(json_extract_string(manifest, '$.spec.comparability.family')) AS family
          FROM protocols GROUP BY ALL))"""


# Reruns that built their tensors in another dtype than the source's script builds for their workload (its
# own, or where the source's runs state none `KernelSpec.script_dtype`): they measured another workload.
OTHER_DTYPE_RERUNS_SQL = f"""
SELECT c.run_id, c.tensor_dtype, s.script_dtype FROM controlled_runs c
JOIN (SELECT DISTINCT w.workload_digest, coalesce(json_extract_string(w.definition, '$.spec.dtype'), k.script_dtype, 'fp32')
          AS script_dtype
      FROM workloads w
      LEFT JOIN (VALUES {", ".join(f"('{k}', '{spec.script_dtype}')" for k, spec in kernels.REGISTRY.items())})
          k(kernel, script_dtype) USING (kernel)) s USING (workload_digest)
WHERE c.tensor_dtype <> s.script_dtype
"""

# How far apart independent rerun sessions put the same ratio: for each pair of providers (and
# implementation revision) measured on one workload, stack and protocol in two or more sessions, the sample
# standard deviation over sessions of log(median b / median a); per kernel and protocol, the median and the
# 90th percentile of those, and (kernel NULL) over every kernel.
SESSION_SPREAD_SQL = f"""
WITH protocols AS (
    SELECT * FROM (VALUES {PROTOCOLS_VALUES}) p(protocol, family)
), per_session AS (
    SELECT c.kernel, p.protocol, c.operation_mode, c.workload_digest, c.environment_digest, c.protocol_digest,
        c.tensor_dtype, c.session, c.provider,
        c.code_revision AS revision, median(c.median_value) AS m
    FROM controlled_runs c JOIN protocols p ON p.family = c.family
    WHERE c.status = 'passed' AND c.metric = 'latency' AND c.median_value > 0
    GROUP BY ALL
), pairs AS (
    SELECT a.kernel, a.protocol, a.operation_mode, a.workload_digest, a.environment_digest, a.protocol_digest,
        a.tensor_dtype, a.provider AS a_provider, a.revision AS a_revision, b.provider AS b_provider, b.revision AS b_revision,
        -- rounded: a parallel aggregate sums in no fixed order, and the last bits would differ between builds
        count(*) AS sessions, round(stddev_samp(ln(b.m / a.m)), 12) AS sd
    FROM per_session a JOIN per_session b USING (kernel, protocol, operation_mode, workload_digest,
                                                environment_digest, protocol_digest, tensor_dtype, session)
    WHERE a.provider < b.provider
    GROUP BY ALL HAVING count(*) >= 2
)
SELECT kernel, protocol, count(*) AS pairs, max(sessions) AS most_sessions, median(sd) AS between_session_sd,
    quantile_cont(sd, 0.9) AS between_session_sd_p90
FROM pairs GROUP BY GROUPING SETS ((kernel, protocol), (protocol))
"""

def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _artifact_row(a: dict) -> str:
    """A script artifact (catalog.SCRIPT_ARTIFACTS) as a row of SOURCE_ARTIFACTS_SQL's VALUES list."""
    low, high = release_bounds(a["releases"])
    providers = "NULL::VARCHAR[]" if a["providers"] == "*" else f"{a['providers']}::VARCHAR[]"
    metric = "NULL::VARCHAR" if a["metric"] == "*" else _sql_text(a["metric"])
    bounds = "NULL::INTEGER[], NULL::INTEGER[]" if low is None else f"{low}::INTEGER[], {high}::INTEGER[]"
    return (f"({_sql_text(a['kernel'])}, {a['modes']}::VARCHAR[], {metric}, {providers}, {bounds}, "
            f"{_sql_text(a['code'])}, {_sql_text(a['reason'])})")


# Source runs of a compiled provider that timed as its eager twin: within SOURCE_ARTIFACT_MATCH of it in the
# same comparison group, while the same sweep (kernel, pass, GPU, source) shows the two apart by more than
# SOURCE_ARTIFACT_APART elsewhere. A compiler that compiled produces other kernels than eager PyTorch, so
# timings a fraction of a percent apart at some shapes and far apart at others say it fell back to eager
# there (dynamo's recompile limit, as a script that compiles one module for many shapes hits it).
SOURCE_ARTIFACT_MATCH = 0.005
SOURCE_ARTIFACT_APART = 0.05
SOURCE_ARTIFACTS_SQL = f"""
WITH twins AS (
    SELECT * FROM (VALUES {{twins}}) t(kernel, compiled, eager)
), src AS (
    SELECT r.* FROM ranks k JOIN runs r USING (run_id)
    WHERE r.evidence_level = '{SOURCE_NATIVE}' AND r.metric = 'latency' AND r.median_value > 0
), pairs AS (
    SELECT c.run_id, c.kernel, c.operation_mode, c.gpu, coalesce(c.form_factor, '') AS form_factor, c.source,
        c.provider, t.eager, e.run_id AS eager_run_id, c.median_value / e.median_value AS ratio
    FROM src c JOIN twins t ON c.provider = t.compiled AND coalesce(t.kernel, c.kernel) = c.kernel
    JOIN src e ON e.comparison_key = c.comparison_key AND e.provider = t.eager
), sweeps AS (
    SELECT kernel, operation_mode, gpu, form_factor, source, provider, max(abs(ratio - 1)) AS widest
    FROM pairs GROUP BY ALL
)
SELECT p.run_id, p.eager_run_id, p.kernel, p.operation_mode, p.gpu, nullif(p.form_factor, '') AS form_factor,
    p.source, p.provider,
    p.ratio AS ratio_to_eager, s.widest AS widest_gap_in_sweep,
    'torch.compile fell back to eager in the source: ' || p.provider || ' timed within '
        || round(abs(p.ratio - 1) * 100, 2) || '% of ' || p.eager || ' here, and up to '
        || round(s.widest * 100, 1) || '% apart elsewhere in the same sweep' AS reason
FROM pairs p JOIN sweeps s USING (kernel, operation_mode, gpu, form_factor, source, provider)
WHERE abs(p.ratio - 1) <= {SOURCE_ARTIFACT_MATCH} AND s.widest > {SOURCE_ARTIFACT_APART}
UNION ALL
-- the series a script artifact reaches (catalog.SCRIPT_ARTIFACTS): kernel, pass, metric, provider, release
SELECT r.run_id, NULL, r.kernel, r.operation_mode, r.gpu, r.form_factor, r.source, r.provider, NULL, NULL,
    f.code || ': ' || f.reason
FROM ranks k JOIN runs r USING (run_id)
JOIN (VALUES {{artifacts}}) f(kernel, modes, metric, providers, low, high, code, reason)
  ON f.kernel = r.kernel AND list_contains(f.modes, r.operation_mode) AND (f.metric IS NULL OR f.metric = r.metric)
 AND (f.providers IS NULL OR list_contains(f.providers, r.provider))
 AND (f.low IS NULL OR list_transform(string_split(r.liger_version, '.'), lambda x: TRY_CAST(x AS INTEGER))
                       BETWEEN f.low AND f.high)
WHERE r.evidence_level = '{SOURCE_NATIVE}'
""".format(twins=", ".join(f"({'NULL::VARCHAR' if k is None else repr(k)}, '{c}', '{e}')"
                           for (k, c), e in COMPILED_PROVIDERS.items()),
           artifacts=", ".join(_artifact_row(a) for a in SCRIPT_ARTIFACTS))

# Groups whose order changed between the previous upstream revision and the latest, among the comparison
# groups that `{groups}` (a condition on comparison_key) admits.
RANK_CHANGES_SQL = """
WITH revisions AS (
    SELECT revision_key, stream, committed_at,
        dense_rank() OVER (ORDER BY committed_at DESC) AS age
    FROM snapshots
), cutoff AS (
    SELECT max(committed_at) FILTER (WHERE age = 2) AS previous_at,
        any_value(revision_key) FILTER (WHERE age = 1) AS latest_revision,
        any_value(revision_key) FILTER (WHERE age = 2) AS previous_revision
    FROM revisions
), previous_listing AS (
    SELECT stream, arg_max(revision_key, committed_at) AS revision_key
    FROM revisions, cutoff WHERE committed_at <= previous_at GROUP BY stream
), previous_runs AS (
    SELECT DISTINCT run_id FROM observations JOIN previous_listing USING (revision_key)
    UNION SELECT run_id FROM controlled_runs
), previous_newest AS (
    SELECT r.run_id, r.comparison_key, r.provider, r.implementation, r.median_value, r.observed_at
    FROM runs r SEMI JOIN previous_runs p USING (run_id)
    WHERE r.status = 'passed' AND r.median_value IS NOT NULL AND {groups}
    QUALIFY row_number() OVER (PARTITION BY comparison_key, provider ORDER BY observed_at DESC, run_id) = 1
), previous_order AS (
    SELECT comparison_key, string_agg(implementation, ' < ' ORDER BY median_value, implementation) AS previous_order
    FROM previous_newest GROUP BY comparison_key
), current_order AS (
    SELECT comparison_key, any_value(kernel) AS kernel, any_value(operation_mode) AS operation_mode,
        any_value(metric) AS metric, any_value(workload_slug) AS workload_slug, any_value(gpu) AS gpu,
        any_value(protocol) AS protocol,
        string_agg(implementation, ' < ' ORDER BY median_value, implementation) AS current_order
    FROM leaderboard WHERE {groups} GROUP BY comparison_key
)
SELECT c.kernel, c.operation_mode, c.metric, c.workload_slug, c.gpu, c.protocol, p.previous_order, c.current_order,
    (SELECT previous_revision FROM cutoff) AS previous_revision,
    (SELECT latest_revision FROM cutoff) AS latest_revision, c.comparison_key
FROM current_order c JOIN previous_order p USING (comparison_key)
WHERE p.previous_order <> c.current_order
"""

# What a verdict says of its claim: a parity claim's `held` is "at parity", its `reversed` "not at parity".
OUTCOME_SQL = ("CASE WHEN claim_type = 'parity' AND verdict = 'held' THEN 'at parity' "
               "WHEN claim_type = 'parity' AND verdict = 'reversed' THEN 'not at parity' ELSE verdict END")

# How many times its series' noise a change between releases must be to be listed in `regressions`.
REGRESSION_Z = 3

VIEWS_SQL = load_sql(__file__, "views.sql").format(
    regression_z=REGRESSION_Z, outcome=OUTCOME_SQL, rank_changes=RANK_CHANGES_SQL.format(groups="TRUE"),
    gpu_r=gpu_label_sql("r"), protocol_names=PROTOCOL_NAMES_SQL, session_spread=SESSION_SPREAD_SQL, source_artifacts=SOURCE_ARTIFACTS_SQL)


# Each workload parameter's JSON types, over every workload definition.
PARAMETER_TYPES_SQL = """
SELECT name, list(DISTINCT json_type(definition, '$.spec.parameters."' || name || '"') ORDER BY 1)
FROM (SELECT unnest(json_keys(definition, '$.spec.parameters')) AS name, definition FROM workloads)
GROUP BY name ORDER BY name
"""
# The workload columns a parameter of the same name would shadow: such a parameter is `param_<name>`.
WORKLOAD_COLUMNS = ("workload_digest", "kernel", "workload_slug", "dtype")


def _sql_type(json_types: list[str]) -> str:
    """The SQL type of a parameter's values: integers, numbers, booleans, else their JSON text."""
    kinds = set(json_types)
    if kinds <= {"UBIGINT", "BIGINT"}:
        return "BIGINT"
    if kinds <= {"UBIGINT", "BIGINT", "DOUBLE"}:
        return "DOUBLE"
    return "BOOLEAN" if kinds == {"BOOLEAN"} else "VARCHAR"


def workload_params_view(con) -> str:
    """`workload_params`: each workload with one typed column per parameter any workload has (NULL where
    its kernel has no such parameter), built from the workloads the generation holds."""
    columns = []
    for name, json_types in con.execute(PARAMETER_TYPES_SQL).fetchall():
        path = f"'$.spec.parameters.\"{name}\"'"
        value = (f"json_extract_string(definition, {path})" if _sql_type(json_types) == "VARCHAR"
                 else f"CAST(json_extract(definition, {path}) AS {_sql_type(json_types)})")
        column = f"param_{name}" if name in WORKLOAD_COLUMNS else name
        columns.append(f'{value} AS "{column}"')
    return ("CREATE OR REPLACE VIEW workload_params AS SELECT workload_digest, "
            "json_extract_string(definition, '$.spec.kernel') AS kernel, workload_slug, "
            "json_extract_string(definition, '$.spec.dtype') AS dtype"
            + "".join(f", {c}" for c in columns)
            + " FROM (SELECT workload_digest, workload_slug, definition FROM workloads"
            " QUALIFY row_number() OVER (PARTITION BY workload_digest ORDER BY definition) = 1)")
