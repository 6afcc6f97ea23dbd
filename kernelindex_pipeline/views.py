"""Analyst views over the warehouse tables (documented in docs/warehouse.md).

Plain DuckDB views, recreated in every write transaction, so they always read the current tables.
A *series* is one implementation (provider) in one comparison group: the same kernel, pass, metric,
workload, environment and protocol family, followed across Liger releases and dates.

Every view names a card as `claim_checks` does, model and form factor (`gpu`: 'NVIDIA H100 80GB HBM3'; the
model alone is `gpu_model`, as `runs.gpu` has it), and the protocol by its one name (`protocol`).
"""

from kernelindex_pipeline.catalog import PROTOCOL_NAMES


def gpu_identity(runs: str) -> str:
    """The card of a row of `runs` (alias) as claim_checks names it: model, then form factor where known."""
    return f"{runs}.gpu || coalesce(' ' || {runs}.form_factor, '')"


# Each protocol digest with its protocol's name (catalog.PROTOCOL_NAMES), joined USING (protocol_digest).
PROTOCOL_NAMES_SQL = f"""(
    SELECT protocol_digest, CASE family {" ".join(f"WHEN '{f}' THEN '{n}'" for f, n in PROTOCOL_NAMES.items())}
        ELSE family END AS protocol
    FROM (SELECT protocol_digest, any_value(json_extract_string(manifest, '$.spec.comparability.family')) AS family
          FROM protocols GROUP BY ALL))"""

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

VIEWS_SQL = """
CREATE OR REPLACE VIEW leaderboard AS
SELECT r.kernel, r.operation_mode, r.metric, r.workload_slug, {gpu_r} AS gpu, pn.protocol, k.rank, k.group_size,
    r.implementation, r.provider, r.median_value, r.p20_value, r.p80_value, r.unit,
    round(r.median_value / first_value(r.median_value) OVER w, 4) AS ratio_to_best,
    r.liger_version, r.observed_at, r.evidence_level, r.run_id, r.title, k.comparison_key,
    r.gpu AS gpu_model, r.form_factor
FROM ranks k JOIN runs r USING (run_id) LEFT JOIN {protocol_names} pn USING (protocol_digest)
WINDOW w AS (PARTITION BY k.comparison_key ORDER BY k.rank, r.median_value, r.run_id
             ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING);

CREATE OR REPLACE VIEW speedups AS
SELECT l.kernel, l.operation_mode, l.metric, l.workload_slug, l.gpu, l.protocol,
    l.implementation AS liger_implementation, b.implementation AS baseline_implementation,
    l.median_value AS liger_median, b.median_value AS baseline_median, l.unit,
    round(b.median_value / l.median_value, 4) AS speedup,
    l.run_id AS liger_run_id, b.run_id AS baseline_run_id, l.comparison_key, l.gpu_model, l.form_factor
FROM leaderboard l JOIN leaderboard b
    ON b.comparison_key = l.comparison_key AND b.run_id <> l.run_id
JOIN runs lr ON lr.run_id = l.run_id
JOIN runs br ON br.run_id = b.run_id
WHERE lr.project = 'Liger-Kernel' AND br.project <> 'Liger-Kernel' AND l.median_value > 0;

CREATE OR REPLACE VIEW history AS
SELECT r.kernel, r.operation_mode, r.metric, r.implementation, r.provider, r.workload_slug, {gpu_r} AS gpu,
    pn.protocol, r.liger_version,
    list_transform(string_split(regexp_extract(r.liger_version, '^[0-9]+(\\.[0-9]+)*'), '.'),
                   lambda x: TRY_CAST(x AS INTEGER)) AS version_key,
    r.observed_at, r.median_value, r.p20_value, r.p80_value, r.unit,
    round(r.median_value / lag(r.median_value) OVER s, 4) AS ratio_to_previous,
    r.withdrawn_upstream, r.evidence_level, r.run_id, r.comparison_key,
    r.comparison_key || '/' || r.provider AS series_key, r.gpu AS gpu_model, r.form_factor
FROM runs r LEFT JOIN {protocol_names} pn USING (protocol_digest)
WINDOW s AS (PARTITION BY comparison_key, provider ORDER BY observed_at, run_id);

CREATE OR REPLACE VIEW regressions AS
WITH per_version AS (
    SELECT * FROM history WHERE liger_version IS NOT NULL AND median_value > 0
    QUALIFY row_number() OVER (PARTITION BY series_key, liger_version ORDER BY observed_at DESC, run_id) = 1
), paired AS (
    SELECT *,
        lag(liger_version) OVER v AS from_version, lag(run_id) OVER v AS from_run_id,
        lag(observed_at) OVER v AS from_observed_at, lag(median_value) OVER v AS from_median,
        lag(p20_value) OVER v AS from_p20, lag(p80_value) OVER v AS from_p80
    FROM per_version
    WINDOW v AS (PARTITION BY series_key ORDER BY version_key, observed_at, run_id)
)
SELECT kernel, operation_mode, metric, implementation, workload_slug, gpu, protocol,
    from_version, liger_version AS to_version, from_median, median_value AS to_median, unit,
    round(100.0 * (median_value - from_median) / from_median, 2) AS change_pct,
    CASE WHEN median_value > from_median THEN 'regression' ELSE 'improvement' END AS direction,
    (from_p80 - from_p20) AS from_spread, (p80_value - p20_value) AS to_spread,
    from_p20, from_p80, p20_value AS to_p20, p80_value AS to_p80,
    from_observed_at, observed_at AS to_observed_at, from_run_id, run_id AS to_run_id, comparison_key,
    gpu_model, form_factor
FROM paired
WHERE from_run_id IS NOT NULL
  AND (p20_value > from_p80 OR p80_value < from_p20)
  AND abs(median_value - from_median) > greatest(from_p80 - from_p20, p80_value - p20_value);

CREATE OR REPLACE VIEW rank_confidence AS
WITH ordered AS (
    SELECT *, row_number() OVER (PARTITION BY comparison_key ORDER BY rank, median_value, run_id) AS position
    FROM leaderboard WHERE group_size > 1
), top2 AS (
    SELECT comparison_key,
        any_value(kernel) AS kernel, any_value(operation_mode) AS operation_mode, any_value(metric) AS metric,
        any_value(workload_slug) AS workload_slug, any_value(gpu) AS gpu, any_value(protocol) AS protocol,
        any_value(gpu_model) AS gpu_model, any_value(form_factor) AS form_factor,
        any_value(group_size) AS group_size, any_value(unit) AS unit,
        any_value(implementation) FILTER (WHERE position = 1) AS first_implementation,
        any_value(implementation) FILTER (WHERE position = 2) AS second_implementation,
        any_value(rank) FILTER (WHERE position = 1) AS first_rank,
        any_value(rank) FILTER (WHERE position = 2) AS second_rank,
        any_value(median_value) FILTER (WHERE position = 1) AS first_median,
        any_value(p80_value) FILTER (WHERE position = 1) AS first_p80,
        any_value(median_value) FILTER (WHERE position = 2) AS second_median,
        any_value(p20_value) FILTER (WHERE position = 2) AS second_p20,
        any_value(run_id) FILTER (WHERE position = 1) AS first_run_id,
        any_value(run_id) FILTER (WHERE position = 2) AS second_run_id
    FROM ordered WHERE position <= 2 GROUP BY comparison_key
)
SELECT kernel, operation_mode, metric, workload_slug, gpu, protocol, group_size,
    first_implementation, first_median, first_p80, second_implementation, second_median, second_p20, unit,
    round(second_median / nullif(first_median, 0), 4) AS margin,
    first_rank < second_rank AND first_p80 < second_p20 AS separated,
    CASE WHEN first_rank = second_rank THEN 'tied'
         WHEN first_p80 < second_p20 THEN 'separated'
         ELSE 'overlapping' END AS confidence,
    first_run_id, second_run_id, comparison_key, gpu_model, form_factor
FROM top2;

CREATE OR REPLACE VIEW run_listings AS
SELECT o.run_id, s.source, s.stream, s.source_file, s.commit, s.committed_at, s.benchmarked_commit, s.release,
    o.revision_key, o.line_number
FROM observations o JOIN snapshots s USING (revision_key);

-- Each withdrawn run with the revision that withdrew it: of each stream that listed it, the first usable
-- revision after its last listing there (which no longer lists it); the run is withdrawn by the last of those.
CREATE OR REPLACE VIEW withdrawals AS
WITH usable AS (
    SELECT revision_key, stream, committed_at FROM snapshots WHERE coalesce(state, 'listed') IN ('listed', 'deleted')
), last_listed AS (
    SELECT o.run_id, s.stream, max(s.committed_at) AS last_listed_at
    FROM observations o JOIN usable s USING (revision_key)
    WHERE o.run_id IN (SELECT run_id FROM runs WHERE withdrawn_upstream)
    GROUP BY ALL
), dropped AS (
    SELECT l.run_id, arg_min(u.revision_key, u.committed_at) AS withdrawn_in_revision, min(u.committed_at) AS withdrawn_at
    FROM last_listed l JOIN usable u ON u.stream = l.stream AND u.committed_at > l.last_listed_at
    GROUP BY l.run_id, l.stream
    QUALIFY row_number() OVER (PARTITION BY l.run_id ORDER BY min(u.committed_at) DESC, withdrawn_in_revision) = 1
)
SELECT r.run_id, r.external_id, r.kernel, r.operation_mode, r.metric, r.provider, r.workload_slug, {gpu_r} AS gpu,
    d.withdrawn_in_revision, s.source, s.source_file, s.commit AS withdrawn_in_commit, s.state AS revision_state,
    d.withdrawn_at, r.last_seen_revision, r.observed_at, r.comparison_key
FROM runs r JOIN dropped d USING (run_id) JOIN snapshots s ON s.revision_key = d.withdrawn_in_revision;

CREATE OR REPLACE VIEW verdicts_by_kernel AS
SELECT kernel, protocol, count(DISTINCT comparison_key) AS groups,
    count(DISTINCT comparison_key) FILTER (WHERE verdict <> 'not re-checked') AS groups_rechecked,
    count(*) AS claims, count(*) FILTER (WHERE verdict = 'held') AS held,
    count(*) FILTER (WHERE verdict = 'reversed') AS reversed,
    count(*) FILTER (WHERE verdict = 'indistinguishable') AS indistinguishable,
    count(*) FILTER (WHERE verdict = 'not re-checked') AS not_rechecked,
    count(*) FILTER (WHERE host_bound) AS host_bound
FROM claim_checks GROUP BY ALL;

CREATE OR REPLACE VIEW claims_not_held AS
SELECT kernel, operation_mode, metric, workload_slug, source_gpu, source_order, round(source_ratio, 4) AS source_ratio,
    protocol, rerun_gpu, round(rerun_ratio, 4) AS rerun_ratio, round(ci_low, 4) AS ci_low, round(ci_high, 4) AS ci_high,
    verdict, reason, host_bound, a_run_id, b_run_id, evidence_file, comparison_key
FROM claim_checks WHERE verdict IN ('reversed', 'indistinguishable');

CREATE OR REPLACE VIEW rank_changes AS
{rank_changes};

-- Each kernel's reference run (its golden commit, else the file's default) against its newest gh-pages run,
-- per implementation, pass, metric, workload and GPU: the comparison Liger's dashboard draws. A golden key
-- with a setting ("dyt_beta=False") names the runs whose workload has that parameter value.
CREATE OR REPLACE VIEW golden_vs_newest AS
WITH gh AS (
    SELECT r.run_id, r.kernel, r.provider, r.operation_mode, r.metric, r.workload_slug, r.workload_digest, {gpu_r} AS gpu,
        r.unit, r.median_value, l.benchmarked_commit, max(l.committed_at) AS listed_at
    FROM runs r JOIN run_listings l USING (run_id)
    WHERE l.source = 'liger-kernel-gh-pages' AND l.benchmarked_commit IS NOT NULL
    GROUP BY ALL
),
by_setting AS (
    SELECT gh.run_id, any_value(g.benchmarked_commit) AS golden_commit
    FROM gh JOIN golden_commits g ON g.kernel = gh.kernel AND g.setting IS NOT NULL
    JOIN (SELECT DISTINCT workload_digest, definition FROM workloads) w USING (workload_digest)
    WHERE lower(json_extract_string(w.definition, '$.spec.parameters.' || split_part(g.setting, '=', 1)))
        = lower(split_part(g.setting, '=', 2))
    GROUP BY 1
),
golden AS (
    SELECT gh.*, coalesce(s.golden_commit, g.benchmarked_commit, d.default_commit) AS golden_commit
    FROM gh LEFT JOIN by_setting s USING (run_id)
    LEFT JOIN (SELECT * FROM golden_commits WHERE setting IS NULL) g USING (kernel)
    CROSS JOIN (SELECT any_value(default_commit) AS default_commit FROM golden_commits) d
),
ref AS (
    SELECT * FROM golden WHERE starts_with(benchmarked_commit, golden_commit)
    QUALIFY row_number() OVER (PARTITION BY kernel, provider, operation_mode, metric, workload_slug, gpu
                               ORDER BY listed_at DESC, run_id) = 1
),
newest AS (
    SELECT * FROM gh
    QUALIFY row_number() OVER (PARTITION BY kernel, provider, operation_mode, metric, workload_slug, gpu
                               ORDER BY listed_at DESC, run_id) = 1
)
SELECT n.kernel, n.provider, n.operation_mode, n.metric, n.workload_slug, n.gpu, n.unit,
    r.golden_commit, r.run_id AS golden_run_id, r.median_value AS golden_median,
    n.benchmarked_commit AS newest_commit, n.run_id AS newest_run_id, n.median_value AS newest_median,
    round(n.median_value / r.median_value, 4) AS newest_over_golden
FROM newest n JOIN ref r USING (kernel, provider, operation_mode, metric, workload_slug, gpu);
""".format(rank_changes=RANK_CHANGES_SQL.format(groups="TRUE"), gpu_r=gpu_identity("r"),
           protocol_names=PROTOCOL_NAMES_SQL)
