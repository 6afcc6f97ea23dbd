-- One row per source claim and protocol, with the rerun batch that re-checks it (if any) and why not, the
-- sessions its verdict pools, and how many samples each side of the batch kept (the samples themselves are read
-- only where they are needed). Reruns count only at the claim's `rerun_release` of Liger-Kernel: the release
-- placeholder, an expression over a claim row `cl` (the newest release the reruns used, or the claim's own).
-- Filled in by claims._checked_claims (str.format): release, current_release, claim_filter, protocols, other_dtype_reruns, compiled,
-- gpu_a, source_native, cards, card_matches.
--
-- A claim is checked on its own card first (`card_match`): reruns on the source's card model and form factor
-- (same_card), else on its model (same_model), else on another card (other_card); sessions of different
-- cards never pool (a verdict pools one stack's sessions).
WITH source AS (
    SELECT r.*, k.rank FROM ranks k JOIN runs r USING (run_id)
    WHERE r.evidence_level = '{source_native}' AND k.comparison_key IN (SELECT comparison_key FROM scope_groups)
), current_release AS (
    {current_release}
), claims AS (
    SELECT a.comparison_key, a.kernel, a.operation_mode, a.metric, a.workload_slug, a.workload_digest,
        {gpu_a} AS source_gpu, a.gpu AS source_model, a.form_factor AS source_form_factor,
        a.provider AS a_provider, a.implementation AS a_implementation, a.run_id AS a_run_id,
        b.provider AS b_provider, b.implementation AS b_implementation, b.run_id AS b_run_id,
        a.median_value AS source_a_median, b.median_value AS source_b_median,
        coalesce(a.liger_version, b.liger_version) AS source_liger_version,
        coalesce((SELECT bool_or(w.shapes_known) FROM workloads w WHERE w.workload_digest = a.workload_digest), false)
            AS shapes_known
    FROM source a JOIN source b
      ON a.comparison_key = b.comparison_key AND a.run_id <> b.run_id
     AND (a.rank < b.rank OR (a.rank = b.rank AND a.provider < b.provider))
), claims_at AS (
    SELECT cl.*, {release} AS rerun_release FROM claims cl, current_release
    WHERE {claim_filter}
), protocols AS (
    SELECT * FROM (VALUES {protocols}) p(protocol, family)
), cards AS (
    -- a rerun's device name (torch.cuda.get_device_name) as the catalog's model and form factor
    SELECT * FROM (VALUES {cards}) c(device, model, form_factor)
), other_dtype_reruns AS (
    {other_dtype_reruns}
), built AS (
    -- the reruns of the claims' workloads (every record of a session carries the session's launch floor)
    SELECT c.* EXCLUDE (record, samples, compile_recorded, launch_floor_ns, correctness,
                      code_revision), len(c.samples) AS sample_count, p.protocol,
        NOT c.compile_recorded AND {compiled} AS compile_unrecorded,
        coalesce(cd.model, c.gpu) AS card_model, cd.form_factor AS card_form_factor, c.launch_floor_ns AS recorded_floor_ns
    FROM controlled_runs c JOIN protocols p ON p.family = c.family LEFT JOIN cards cd ON cd.device = c.gpu
    WHERE c.workload_digest IN (SELECT workload_digest FROM claims_at)
), controlled AS (
    -- a rerun of another dtype measured another workload
    SELECT * FROM built ANTI JOIN other_dtype_reruns USING (run_id)
), session_floors AS (
    -- each session's host launch floor, where it measured one (gpu/launch_floor.py)
    SELECT evidence_file, session, min(recorded_floor_ns) AS launch_floor_ns FROM built GROUP BY ALL
), other_dtypes AS (
    SELECT DISTINCT b.kernel, b.operation_mode, b.metric, b.workload_digest, b.protocol, b.liger_version,
        o.tensor_dtype, o.script_dtype
    FROM built b JOIN other_dtype_reruns o USING (run_id)
), sessions AS (
    -- every rerun session that measured a and b side by side; within one, records that passed, then the run
    -- ids, so that a rebuild picks the same
    SELECT cl.comparison_key, cl.a_run_id, cl.b_run_id, p.protocol, a.session, a.evidence_file,
        a.run_id AS rerun_a_run_id, b.run_id AS rerun_b_run_id, a.status AS a_status, b.status AS b_status,
        a.status_reason AS a_reason, b.status_reason AS b_reason, a.status_code AS a_code, b.status_code AS b_code,
        a.sample_count AS a_sample_count, b.sample_count AS b_sample_count,
        a.compile_unrecorded OR b.compile_unrecorded AS compile_unrecorded,
        a.median_value AS rerun_a_median, b.median_value AS rerun_b_median,
        {gpu_a} AS rerun_gpu, a.observed_at, a.environment_digest,
        CASE WHEN a.card_model = cl.source_model AND a.card_form_factor IS NOT DISTINCT FROM cl.source_form_factor
             THEN 'same_card' WHEN a.card_model = cl.source_model THEN 'same_model' ELSE 'other_card' END AS card_match,
        a.protocol_digest, a.implementation_digest AS a_implementation_digest,
        b.implementation_digest AS b_implementation_digest, f.launch_floor_ns, a.tensor_dtype
    FROM claims_at cl CROSS JOIN protocols p
    JOIN controlled a ON a.protocol = p.protocol AND a.kernel = cl.kernel AND a.operation_mode = cl.operation_mode
        AND a.metric = cl.metric AND a.workload_digest = cl.workload_digest AND a.provider = cl.a_provider
        AND a.liger_version = cl.rerun_release
    JOIN controlled b ON b.protocol = p.protocol AND b.evidence_file = a.evidence_file AND b.session = a.session
        AND b.kernel = a.kernel AND b.operation_mode = a.operation_mode AND b.metric = a.metric
        AND b.workload_digest = a.workload_digest AND b.provider = cl.b_provider
    LEFT JOIN session_floors f ON f.evidence_file = a.evidence_file AND f.session IS NOT DISTINCT FROM a.session
    QUALIFY row_number() OVER (PARTITION BY cl.comparison_key, cl.a_run_id, cl.b_run_id, p.protocol, a.evidence_file,
                                            a.session
                               ORDER BY a.status = 'passed' DESC, b.status = 'passed' DESC, a.observed_at DESC,
                                        a.run_id, b.run_id) = 1
), batches AS (
    -- the newest session on the nearest card to the claim's own
    SELECT * FROM sessions
    QUALIFY row_number() OVER (PARTITION BY comparison_key, a_run_id, b_run_id, protocol
                               ORDER BY list_position({card_matches}, card_match),
                                        observed_at DESC, evidence_file DESC, session DESC) = 1
), pooled AS (
    -- the sessions whose samples the verdict pools: every one that passed on the newest session's stack
    -- (environment), protocol and implementations, oldest first
    SELECT n.comparison_key, n.a_run_id, n.b_run_id, n.protocol,
        list(s.session ORDER BY s.observed_at, s.evidence_file, s.session) AS session_keys,
        list(s.evidence_file ORDER BY s.observed_at, s.evidence_file, s.session) AS session_files,
        list(s.rerun_a_run_id ORDER BY s.observed_at, s.evidence_file, s.session) AS session_a_run_ids,
        list(s.rerun_b_run_id ORDER BY s.observed_at, s.evidence_file, s.session) AS session_b_run_ids,
        bool_or(s.compile_unrecorded) AS pooled_compile_unrecorded
    FROM batches n JOIN sessions s USING (comparison_key, a_run_id, b_run_id, protocol)
    WHERE s.a_status = 'passed' AND s.b_status = 'passed' AND s.environment_digest = n.environment_digest
      AND s.protocol_digest = n.protocol_digest AND s.a_implementation_digest = n.a_implementation_digest
      AND s.b_implementation_digest = n.b_implementation_digest
    GROUP BY ALL
), measured AS (
    SELECT DISTINCT kernel, operation_mode, metric, workload_digest, provider, protocol, liger_version FROM controlled
), latest AS (
    SELECT kernel, operation_mode, metric, workload_digest, provider, protocol, liger_version, status, status_reason,
        status_code, observed_at, run_id, tensor_dtype, evidence_file, session
    FROM controlled
    QUALIFY row_number() OVER (PARTITION BY kernel, operation_mode, metric, workload_digest, provider, protocol,
                                            liger_version
                               ORDER BY observed_at DESC, evidence_file DESC, status = 'passed' DESC, run_id) = 1
), provider_built AS (
    -- when each provider last ran at each release, on any workload: a later `unavailable` is not the release's
    SELECT kernel, provider, liger_version, max(observed_at) AS built_at FROM controlled WHERE status = 'passed'
    GROUP BY ALL
), covered AS (
    SELECT DISTINCT kernel FROM controlled_runs
)
SELECT cl.*, p.protocol, b.* EXCLUDE (comparison_key, a_run_id, b_run_id, protocol, session, environment_digest,
                                      protocol_digest, a_implementation_digest, b_implementation_digest),
    po.* EXCLUDE (comparison_key, a_run_id, b_run_id, protocol),
    cl.kernel IN (SELECT kernel FROM covered) AS kernel_covered,
    EXISTS (SELECT 1 FROM measured m WHERE m.kernel = cl.kernel AND m.operation_mode = cl.operation_mode
            AND m.metric = cl.metric AND m.workload_digest = cl.workload_digest AND m.protocol = p.protocol
            AND m.liger_version = cl.rerun_release)
        AS workload_measured,
    (SELECT list(m.provider) FROM measured m WHERE m.kernel = cl.kernel AND m.operation_mode = cl.operation_mode
            AND m.metric = cl.metric AND m.workload_digest = cl.workload_digest AND m.protocol = p.protocol
            AND m.liger_version = cl.rerun_release)
        AS measured_providers,
    (SELECT {{'built': min(o.tensor_dtype), 'script': min(o.script_dtype)}} FROM other_dtypes o
     WHERE o.kernel = cl.kernel AND o.operation_mode = cl.operation_mode AND o.metric = cl.metric
       AND o.workload_digest = cl.workload_digest AND o.protocol = p.protocol AND o.liger_version = cl.rerun_release)
        AS other_dtype,
    la.status AS a_latest_status, la.status_reason AS a_latest_reason, la.status_code AS a_latest_code,
    la.observed_at AS a_latest_at,
    lb.status AS b_latest_status, lb.status_reason AS b_latest_reason, lb.status_code AS b_latest_code,
    lb.observed_at AS b_latest_at, la.run_id AS rerun_a_latest_run_id, lb.run_id AS rerun_b_latest_run_id,
    coalesce(la.tensor_dtype, lb.tensor_dtype) AS latest_tensor_dtype,
    coalesce(ua.built_at > la.observed_at, false) AS a_built_since,
    coalesce(ub.built_at > lb.observed_at, false) AS b_built_since
FROM claims_at cl CROSS JOIN protocols p
LEFT JOIN batches b ON b.comparison_key = cl.comparison_key AND b.a_run_id = cl.a_run_id
    AND b.b_run_id = cl.b_run_id AND b.protocol = p.protocol
LEFT JOIN pooled po ON po.comparison_key = cl.comparison_key AND po.a_run_id = cl.a_run_id
    AND po.b_run_id = cl.b_run_id AND po.protocol = p.protocol
LEFT JOIN latest la ON la.protocol = p.protocol AND la.kernel = cl.kernel AND la.operation_mode = cl.operation_mode
    AND la.metric = cl.metric AND la.workload_digest = cl.workload_digest AND la.provider = cl.a_provider
    AND la.liger_version = cl.rerun_release
LEFT JOIN latest lb ON lb.protocol = p.protocol AND lb.kernel = cl.kernel AND lb.operation_mode = cl.operation_mode
    AND lb.metric = cl.metric AND lb.workload_digest = cl.workload_digest AND lb.provider = cl.b_provider
    AND lb.liger_version = cl.rerun_release
LEFT JOIN provider_built ua ON ua.kernel = cl.kernel AND ua.provider = cl.a_provider
    AND ua.liger_version = cl.rerun_release
LEFT JOIN provider_built ub ON ub.kernel = cl.kernel AND ub.provider = cl.b_provider
    AND ub.liger_version = cl.rerun_release
