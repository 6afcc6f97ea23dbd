CREATE TABLE IF NOT EXISTS snapshots (
    revision_key VARCHAR, source VARCHAR, stream VARCHAR, source_file VARCHAR, commit VARCHAR,
    committed_at TIMESTAMPTZ, sha256 VARCHAR, bytes BIGINT, location VARCHAR, state VARCHAR, problem VARCHAR,
    publication BIGINT, benchmarked_commit VARCHAR, release VARCHAR);
CREATE TABLE IF NOT EXISTS observations (
    run_id VARCHAR, dim_key UBIGINT, revision_key VARCHAR, line_number BIGINT, observed_at TIMESTAMP,
    liger_version VARCHAR, median_value BIGINT, p20_value BIGINT, p80_value BIGINT,
    source_p20 DOUBLE, source_p50 DOUBLE, source_p80 DOUBLE);
CREATE TABLE IF NOT EXISTS run_keys (
    dim_key UBIGINT, kernel_name VARCHAR, kernel_provider VARCHAR, kernel_operation_mode VARCHAR,
    metric_name VARCHAR, metric_unit VARCHAR, x_name VARCHAR, x_value VARCHAR, extra_benchmark_config_str VARCHAR,
    gpu_name VARCHAR, workload_slug VARCHAR, workload_digest VARCHAR, kernel_title VARCHAR, known_kernel BOOLEAN,
    gpu VARCHAR, form_factor VARCHAR, architecture VARCHAR, environment_digest VARCHAR, implementation VARCHAR,
    project VARCHAR, implementation_digest VARCHAR, metric VARCHAR, gpu_slug VARCHAR, protocol_digest VARCHAR,
    id_prefix VARCHAR, id_suffix VARCHAR, title VARCHAR, comparison_key VARCHAR, evidence_level VARCHAR,
    source VARCHAR, kernel VARCHAR);
CREATE TABLE IF NOT EXISTS snapshot_quarantine (
    revision_key VARCHAR, source VARCHAR, source_revision VARCHAR, line_number BIGINT, reason VARCHAR,
    raw_line VARCHAR);
CREATE TABLE IF NOT EXISTS workloads (
    workload_digest VARCHAR, kernel VARCHAR, workload_slug VARCHAR, definition VARCHAR,
    shapes_known BOOLEAN, digest_v1alpha1 VARCHAR);
CREATE TABLE IF NOT EXISTS protocols (protocol_digest VARCHAR, name VARCHAR, manifest VARCHAR, digest_v1alpha1 VARCHAR);
CREATE TABLE IF NOT EXISTS environments (
    environment_digest VARCHAR, name VARCHAR, manifest VARCHAR, digest_v1alpha1 VARCHAR);
CREATE TABLE IF NOT EXISTS implementations (
    implementation_digest VARCHAR, provider VARCHAR, manifest VARCHAR, digest_v1alpha1 VARCHAR);
CREATE TABLE IF NOT EXISTS controlled_runs (
    run_id VARCHAR, external_id VARCHAR, name VARCHAR, title VARCHAR, kernel VARCHAR,
    operation_mode VARCHAR, provider VARCHAR, implementation VARCHAR, project VARCHAR, metric VARCHAR, unit VARCHAR,
    median_value BIGINT, p20_value BIGINT, p80_value BIGINT, gpu VARCHAR, form_factor VARCHAR, architecture VARCHAR,
    workload_slug VARCHAR, observed_at TIMESTAMP, evidence_level VARCHAR, source VARCHAR, status VARCHAR,
    comparison_key VARCHAR, protocol_digest VARCHAR, workload_digest VARCHAR, environment_digest VARCHAR,
    implementation_digest VARCHAR, evidence_file VARCHAR, record JSON USING COMPRESSION zstd, family VARCHAR, samples DOUBLE[],
    status_reason VARCHAR, status_code VARCHAR, session VARCHAR, liger_version VARCHAR, tensor_dtype VARCHAR,
    compile_recorded BOOLEAN, launch_floor_ns DOUBLE, correctness JSON,
    code_revision VARCHAR);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR, external_id VARCHAR, name VARCHAR, title VARCHAR, kernel VARCHAR,
    operation_mode VARCHAR, provider VARCHAR, implementation VARCHAR, project VARCHAR, metric VARCHAR, unit VARCHAR,
    median_value BIGINT, p20_value BIGINT, p80_value BIGINT, gpu VARCHAR, form_factor VARCHAR, architecture VARCHAR,
    workload_slug VARCHAR, observed_at TIMESTAMP, evidence_level VARCHAR, source VARCHAR,
    first_seen_revision VARCHAR, last_seen_revision VARCHAR, withdrawn_upstream BOOLEAN, comparison_key VARCHAR,
    protocol_digest VARCHAR, workload_digest VARCHAR, environment_digest VARCHAR, implementation_digest VARCHAR,
    liger_version VARCHAR, status VARCHAR, known_kernel BOOLEAN, source_p20 DOUBLE, source_p50 DOUBLE,
    source_p80 DOUBLE, source_unit VARCHAR, benchmarked_commit VARCHAR, release VARCHAR);
CREATE TABLE IF NOT EXISTS run_manifests ({RUN_MANIFESTS_COLUMNS});
CREATE TABLE IF NOT EXISTS ranks (
    run_id VARCHAR, comparison_key VARCHAR, rank BIGINT, group_size BIGINT, evidence_level VARCHAR);
CREATE TABLE IF NOT EXISTS quarantine (
    source VARCHAR, source_revision VARCHAR, line_number BIGINT, reason VARCHAR, raw_line VARCHAR,
    revision_key VARCHAR);
CREATE TABLE IF NOT EXISTS evidence_quarantine (
    revision_key VARCHAR, source VARCHAR, source_revision VARCHAR, line_number BIGINT, reason VARCHAR,
    raw_line VARCHAR);
CREATE TABLE IF NOT EXISTS ingest_state (key VARCHAR, value VARCHAR);
-- Bootstrap intervals by the digest of their inputs (verdicts/claims.py): computed once, whatever brings a claim
-- into a publication's scope.
CREATE TABLE IF NOT EXISTS bootstrap_intervals (
    input_digest VARCHAR, rerun_ratio DOUBLE, ci_low DOUBLE, ci_high DOUBLE, n_a BIGINT, n_b BIGINT,
    spread_a DOUBLE, spread_b DOUBLE, sessions INTEGER, method VARCHAR);
CREATE TABLE IF NOT EXISTS claim_checks (
    comparison_key VARCHAR, kernel VARCHAR, operation_mode VARCHAR, metric VARCHAR, workload_slug VARCHAR,
    source_gpu VARCHAR, a_implementation VARCHAR, a_provider VARCHAR, a_run_id VARCHAR, b_implementation VARCHAR,
    b_provider VARCHAR, b_run_id VARCHAR, source_a_median BIGINT, source_b_median BIGINT, source_ratio DOUBLE,
    source_order VARCHAR, protocol VARCHAR, rerun_gpu VARCHAR, evidence_file VARCHAR, rerun_a_run_id VARCHAR,
    rerun_b_run_id VARCHAR, rerun_ratio DOUBLE, ci_low DOUBLE, ci_high DOUBLE, n_a BIGINT, n_b BIGINT,
    verdict VARCHAR, reason VARCHAR, host_bound BOOLEAN, awaiting_rerun BOOLEAN);
CREATE TABLE IF NOT EXISTS version_checks (
    comparison_key VARCHAR, kernel VARCHAR, operation_mode VARCHAR, metric VARCHAR, workload_slug VARCHAR,
    a_provider VARCHAR, a_run_id VARCHAR, b_provider VARCHAR, b_run_id VARCHAR, protocol VARCHAR,
    source_liger_version VARCHAR, rerun_liger_version VARCHAR, verdict_at_source_version VARCHAR,
    verdict_at_rerun_version VARCHAR, version_effect VARCHAR, reason VARCHAR, evidence_file VARCHAR,
    rerun_ratio DOUBLE, ci_low DOUBLE, ci_high DOUBLE);
CREATE TABLE IF NOT EXISTS reference_files (
    source VARCHAR, path VARCHAR, sha256 VARCHAR, state VARCHAR, problem VARCHAR);
CREATE TABLE IF NOT EXISTS golden_commits (
    source VARCHAR, golden_key VARCHAR, kernel VARCHAR, setting VARCHAR, benchmarked_commit VARCHAR,
    default_commit VARCHAR, file_sha256 VARCHAR);
CREATE TABLE IF NOT EXISTS attestations (
    attestation_id VARCHAR, run_id VARCHAR, type VARCHAR, author VARCHAR, attested_on DATE, note VARCHAR,
    metric VARCHAR, median_value DOUBLE, p20_value DOUBLE, p80_value DOUBLE, environment VARCHAR, command VARCHAR,
    file VARCHAR);
CREATE TABLE IF NOT EXISTS publications (run_id VARCHAR, published_at TIMESTAMPTZ, source VARCHAR);
CREATE TABLE IF NOT EXISTS published_identifiers (
    identifier VARCHAR, kind VARCHAR, current VARCHAR, run_id VARCHAR, published_at DATE, origin VARCHAR);
CREATE TABLE IF NOT EXISTS listing_ranks (run_id VARCHAR, comparison_key VARCHAR, rank BIGINT, group_size BIGINT,
    leader_run_id VARCHAR, listed_at TIMESTAMPTZ);
CREATE TABLE IF NOT EXISTS publication_changes (table_name VARCHAR, key VARCHAR);
CREATE TABLE IF NOT EXISTS evidence_files (file VARCHAR, sha256 VARCHAR);
CREATE TABLE IF NOT EXISTS verdict_history (
    comparison_key VARCHAR, protocol VARCHAR, a_provider VARCHAR, b_provider VARCHAR, verdict VARCHAR,
    since TIMESTAMPTZ, until TIMESTAMPTZ);
CREATE TABLE IF NOT EXISTS reproductions (
    controlled_run_id VARCHAR, source_run_id VARCHAR, kernel VARCHAR, operation_mode VARCHAR, metric VARCHAR,
    provider VARCHAR, workload_slug VARCHAR, source_gpu VARCHAR, controlled_median BIGINT, source_median BIGINT,
    ratio_of_medians DOUBLE, source_order VARCHAR, controlled_order VARCHAR, order_held BOOLEAN);
