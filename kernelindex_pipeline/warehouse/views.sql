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
    list_transform(string_split(regexp_extract(r.liger_version, '^[0-9]+(\.[0-9]+)*'), '.'),
                   lambda x: TRY_CAST(x AS INTEGER)) AS version_key,
    r.observed_at, r.median_value, r.p20_value, r.p80_value, r.unit,
    round(r.median_value / lag(r.median_value) OVER s, 4) AS ratio_to_previous,
    r.withdrawn_upstream, r.evidence_level, r.run_id, r.comparison_key,
    r.comparison_key || '/' || r.provider AS series_key, r.gpu AS gpu_model, r.form_factor
FROM runs r LEFT JOIN {protocol_names} pn USING (protocol_digest)
WINDOW s AS (PARTITION BY comparison_key, provider ORDER BY observed_at, run_id);

-- A change between two Liger releases of one of Liger's own series counts when it stands out from the
-- series' own run-to-run variation (the way conbench and Bencher judge a result against its history): the
-- step between the two releases' medians (of their runs' medians, in logs) exceeds REGRESSION_Z times the
-- series' noise, the larger of two robust spreads (1.4826 x the median absolute deviation): of runs around
-- their own release's median, and of the steps between consecutive releases. Noise is estimated from three
-- measurements at least; the two releases' p20-p80 intervals must not overlap either. Baselines' series are
-- left out: a Liger release does not change their code.
CREATE OR REPLACE VIEW regressions AS
WITH liger_runs AS (
    SELECT h.*, ln(h.median_value) AS y
    FROM history h JOIN runs r USING (run_id)
    WHERE r.project = 'Liger-Kernel' AND h.liger_version IS NOT NULL AND h.median_value > 0
), releases AS (
    SELECT series_key, liger_version, any_value(version_key) AS version_key, median(y) AS y, count(*) AS runs,
        median(median_value) AS median_value, min(p20_value) AS p20_value, max(p80_value) AS p80_value,
        arg_max(run_id, (observed_at, run_id)) AS run_id, max(observed_at) AS observed_at,
        any_value(kernel) AS kernel, any_value(operation_mode) AS operation_mode, any_value(metric) AS metric,
        any_value(implementation) AS implementation, any_value(workload_slug) AS workload_slug,
        any_value(gpu) AS gpu, any_value(protocol) AS protocol, any_value(unit) AS unit,
        any_value(comparison_key) AS comparison_key, any_value(gpu_model) AS gpu_model,
        any_value(form_factor) AS form_factor
    FROM liger_runs GROUP BY series_key, liger_version
), steps AS (
    SELECT *, y - lag(y) OVER v AS step,
        lag(liger_version) OVER v AS from_version, lag(run_id) OVER v AS from_run_id,
        lag(observed_at) OVER v AS from_observed_at, lag(median_value) OVER v AS from_median,
        lag(p20_value) OVER v AS from_p20, lag(p80_value) OVER v AS from_p80, lag(runs) OVER v AS from_runs
    FROM releases
    WINDOW v AS (PARTITION BY series_key ORDER BY version_key, observed_at, liger_version)
), deviations AS (
    SELECT series_key, 'run' AS kind, abs(l.y - r.y) AS deviation
    FROM liger_runs l JOIN releases r USING (series_key, liger_version) WHERE r.runs > 1
    UNION ALL
    SELECT series_key, 'step', abs(step) FROM steps WHERE step IS NOT NULL
), noise AS (
    SELECT series_key, 1.4826 * greatest(coalesce(median(deviation) FILTER (WHERE kind = 'run'), 0),
                                         coalesce(median(deviation) FILTER (WHERE kind = 'step'), 0)) AS noise,
        count(*) AS measurements
    FROM deviations GROUP BY series_key
)
SELECT kernel, operation_mode, metric, implementation, workload_slug, gpu, protocol,
    from_version, liger_version AS to_version, from_median, median_value AS to_median, unit,
    round(100.0 * (median_value - from_median) / from_median, 2) AS change_pct,
    CASE WHEN step > 0 THEN 'regression' ELSE 'improvement' END AS direction,
    round(100.0 * (exp(n.noise) - 1), 2) AS noise_pct, round(abs(step) / n.noise, 2) AS z,
    from_runs, runs AS to_runs,
    (from_p80 - from_p20) AS from_spread, (p80_value - p20_value) AS to_spread,
    from_p20, from_p80, p20_value AS to_p20, p80_value AS to_p80,
    from_observed_at, observed_at AS to_observed_at, from_run_id, run_id AS to_run_id, comparison_key,
    gpu_model, form_factor
FROM steps JOIN noise n USING (series_key)
WHERE step IS NOT NULL AND n.measurements >= 3 AND n.noise > 0
  AND abs(step) > {regression_z} * n.noise
  AND (p20_value > from_p80 OR p80_value < from_p20);

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
    count(*) AS claims, count(*) FILTER (WHERE outcome = 'held') AS held,
    count(*) FILTER (WHERE outcome = 'reversed') AS reversed,
    count(*) FILTER (WHERE outcome = 'at parity') AS at_parity,
    count(*) FILTER (WHERE outcome = 'not at parity') AS not_at_parity,
    count(*) FILTER (WHERE verdict = 'indistinguishable') AS indistinguishable,
    count(*) FILTER (WHERE verdict = 'not re-checked') AS not_rechecked,
    count(*) FILTER (WHERE host_bound) AS host_bound
FROM (SELECT *, {outcome} AS outcome FROM claim_checks) GROUP BY ALL;

CREATE OR REPLACE VIEW source_artifacts AS
{source_artifacts};

CREATE OR REPLACE VIEW session_spread AS
{session_spread};

-- Claims measured in two or more independent sessions: whether each session alone gives the same label.
-- `kept`: every session agrees; `moved`: they differ without one saying held and another reversed;
-- `flipped`: one says held and another reversed. `decided_*` count the claims where some session says held
-- or reversed (the replication rate the README publishes). Per card: sessions on different cards never pool.
CREATE OR REPLACE VIEW verdict_replication AS
WITH claims AS (
    SELECT kernel, protocol, rerun_gpu AS card, verdict, coalesce(sessions, 0) >= 2 AS replicated,
        list_distinct(list_transform(session_intervals, lambda s: s.verdict)) AS labels
    FROM claim_checks WHERE rerun_gpu IS NOT NULL
), marked AS (
    SELECT *, replicated AND len(labels) = 1 AS kept,
        replicated AND list_has_any(labels, ['held', 'reversed']) AS decided_replicated,
        replicated AND list_contains(labels, 'held') AND list_contains(labels, 'reversed') AS flipped
    FROM claims
)
SELECT kernel, protocol, card, count(*) FILTER (WHERE verdict <> 'not re-checked') AS decided_claims,
    count(*) FILTER (WHERE replicated) AS replicated, count(*) FILTER (WHERE kept) AS kept,
    count(*) FILTER (WHERE replicated AND NOT kept AND NOT flipped) AS moved,
    count(*) FILTER (WHERE flipped) AS flipped,
    count(*) FILTER (WHERE decided_replicated) AS decided_replicated,
    count(*) FILTER (WHERE decided_replicated AND kept) AS decided_kept,
    round(100.0 * count(*) FILTER (WHERE decided_replicated AND kept)
          / nullif(count(*) FILTER (WHERE decided_replicated), 0), 1) AS decided_kept_pct
FROM marked GROUP BY ALL;

CREATE OR REPLACE VIEW claims_not_held AS
SELECT kernel, operation_mode, metric, workload_slug, source_gpu, source_order, round(source_ratio, 4) AS source_ratio,
    protocol, rerun_gpu, round(rerun_ratio, 4) AS rerun_ratio, round(ci_low, 4) AS ci_low, round(ci_high, 4) AS ci_high,
    verdict, reason, host_bound, a_run_id, b_run_id, evidence_file, comparison_key, claim_type, sessions,
    source_artifact, {outcome} AS outcome
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
