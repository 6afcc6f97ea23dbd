"""The warehouse tables (the contract's and the pipeline's own), and the columns added since a home was
first written.

The contract's `manifests` is a view (MANIFESTS_VIEW_SQL): each run's BenchmarkRun is stored once in
`run_manifests`, and each protocol and environment once in its own table, all as canonical JSON; the view
joins them into the canonical text of {"environment", "protocol", "run"} (its keys sort in that order).
The `digest_aliases` view lists the v1alpha1 digest of every object published as v1alpha2 (core/identity.py).
"""

from kernelindex_pipeline.warehouse.sql import load_sql, table_exists


# A run's canonical text is most of the warehouse: zstd keeps it about a fifth of the size DuckDB's default
# string compression does (every publication copies, and fsyncs, the whole file).
RUN_MANIFESTS_COLUMNS = ("run_id VARCHAR, run VARCHAR USING COMPRESSION zstd, run_digest VARCHAR, protocol_digest VARCHAR, "
                         "environment_digest VARCHAR, run_digest_v1alpha1 VARCHAR")

# One session's own interval and verdict, where a claim pooled several (claim_checks.session_intervals).
SESSION_INTERVALS_TYPE = ("STRUCT(session VARCHAR, evidence_file VARCHAR, rerun_a_run_id VARCHAR, "
                          "rerun_b_run_id VARCHAR, rerun_ratio DOUBLE, ci_low DOUBLE, ci_high DOUBLE, n_a BIGINT, "
                          "n_b BIGINT, spread_a DOUBLE, spread_b DOUBLE, verdict VARCHAR, reason_code VARCHAR)")

SCHEMA_SQL = load_sql(__file__, "schema.sql").format(RUN_MANIFESTS_COLUMNS=RUN_MANIFESTS_COLUMNS)

MIGRATIONS_SQL = f"""
ALTER TABLE snapshots ADD COLUMN IF NOT EXISTS state VARCHAR;
ALTER TABLE snapshots ADD COLUMN IF NOT EXISTS problem VARCHAR;
ALTER TABLE snapshots ADD COLUMN IF NOT EXISTS publication BIGINT;
ALTER TABLE snapshots ADD COLUMN IF NOT EXISTS benchmarked_commit VARCHAR;
ALTER TABLE snapshots ADD COLUMN IF NOT EXISTS release VARCHAR;
ALTER TABLE publications ADD COLUMN IF NOT EXISTS source VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS benchmarked_commit VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS release VARCHAR;
ALTER TABLE claim_checks ADD COLUMN IF NOT EXISTS awaiting_rerun BOOLEAN;
ALTER TABLE controlled_runs ADD COLUMN IF NOT EXISTS family VARCHAR;
ALTER TABLE controlled_runs ADD COLUMN IF NOT EXISTS samples DOUBLE[];
ALTER TABLE controlled_runs ADD COLUMN IF NOT EXISTS status_reason VARCHAR;
ALTER TABLE controlled_runs ADD COLUMN IF NOT EXISTS status_code VARCHAR;
ALTER TABLE controlled_runs ADD COLUMN IF NOT EXISTS session VARCHAR;
ALTER TABLE controlled_runs ADD COLUMN IF NOT EXISTS liger_version VARCHAR;
ALTER TABLE controlled_runs ADD COLUMN IF NOT EXISTS tensor_dtype VARCHAR;
ALTER TABLE controlled_runs ADD COLUMN IF NOT EXISTS compile_recorded BOOLEAN;
ALTER TABLE controlled_runs ADD COLUMN IF NOT EXISTS launch_floor_ns DOUBLE;
ALTER TABLE controlled_runs ADD COLUMN IF NOT EXISTS correctness JSON;
ALTER TABLE controlled_runs ADD COLUMN IF NOT EXISTS code_revision VARCHAR;
ALTER TABLE run_manifests ADD COLUMN IF NOT EXISTS run_digest_v1alpha1 VARCHAR;
ALTER TABLE protocols ADD COLUMN IF NOT EXISTS digest_v1alpha1 VARCHAR;
ALTER TABLE environments ADD COLUMN IF NOT EXISTS digest_v1alpha1 VARCHAR;
ALTER TABLE implementations ADD COLUMN IF NOT EXISTS digest_v1alpha1 VARCHAR;
ALTER TABLE workloads ADD COLUMN IF NOT EXISTS digest_v1alpha1 VARCHAR;
ALTER TABLE run_keys ADD COLUMN IF NOT EXISTS kernel VARCHAR;
ALTER TABLE claim_checks ADD COLUMN IF NOT EXISTS spread_a DOUBLE;
ALTER TABLE claim_checks ADD COLUMN IF NOT EXISTS spread_b DOUBLE;
ALTER TABLE claim_checks ADD COLUMN IF NOT EXISTS claim_type VARCHAR;
ALTER TABLE claim_checks ADD COLUMN IF NOT EXISTS reason_code VARCHAR;
ALTER TABLE claim_checks ADD COLUMN IF NOT EXISTS source_artifact VARCHAR;
ALTER TABLE claim_checks ADD COLUMN IF NOT EXISTS sessions INTEGER;
ALTER TABLE claim_checks ADD COLUMN IF NOT EXISTS session_intervals {SESSION_INTERVALS_TYPE}[];
ALTER TABLE claim_checks ADD COLUMN IF NOT EXISTS between_session_sd DOUBLE;
ALTER TABLE claim_checks ADD COLUMN IF NOT EXISTS rerun_release VARCHAR;
ALTER TABLE claim_checks ADD COLUMN IF NOT EXISTS card_match VARCHAR;
ALTER TABLE verdict_history ADD COLUMN IF NOT EXISTS card_match VARCHAR;
ALTER TABLE version_checks ADD COLUMN IF NOT EXISTS rerun_gpu VARCHAR;
ALTER TABLE version_checks ADD COLUMN IF NOT EXISTS card_match VARCHAR;
ALTER TABLE version_checks ADD COLUMN IF NOT EXISTS awaiting_rerun BOOLEAN;
"""

def manifests_sql(run_manifests: str = "run_manifests") -> str:
    """The `manifests` view's query, over `run_manifests` or a relation narrowing it."""
    return f"""
SELECT m.run_id, '{{"environment":' || e.manifest || ',"protocol":' || p.manifest || ',"run":' || m.run || '}}'
        AS manifest,
    m.run_digest
FROM {run_manifests} m JOIN protocols p USING (protocol_digest) JOIN environments e USING (environment_digest)
"""


MANIFESTS_VIEW_SQL = f"CREATE OR REPLACE VIEW manifests AS {manifests_sql()}"


def rows_of_runs(table: str, run_ids: str) -> str:
    """A relation of `table`'s rows whose run_id `run_ids` (a query) names, found by their row ids: a scan
    of the run ids alone, then only the row groups that hold those rows (rows written together sit together),
    where a join would read every column of every row (every run's text, in `run_manifests`)."""
    return f"(SELECT * FROM {table} WHERE rowid IN (SELECT rowid FROM {table} WHERE run_id IN ({run_ids})))"

# Each object published as v1alpha2, by kind, with the digest v1alpha1 gave it (so that digest stays
# findable); run_id names the run of a BenchmarkRun.
DIGEST_ALIASES_VIEW_SQL = """
CREATE OR REPLACE VIEW digest_aliases AS
SELECT 'BenchmarkRun' AS kind, run_digest AS digest, run_digest_v1alpha1 AS v1alpha1_digest, run_id
FROM run_manifests WHERE run_digest_v1alpha1 IS NOT NULL
UNION ALL SELECT 'BenchmarkProtocol', protocol_digest, digest_v1alpha1, NULL FROM protocols WHERE digest_v1alpha1 IS NOT NULL
UNION ALL SELECT 'ExecutionEnvironment', environment_digest, digest_v1alpha1, NULL FROM environments
    WHERE digest_v1alpha1 IS NOT NULL
UNION ALL SELECT 'Implementation', implementation_digest, digest_v1alpha1, NULL FROM implementations
    WHERE digest_v1alpha1 IS NOT NULL
UNION ALL SELECT DISTINCT 'WorkloadDefinition', workload_digest, digest_v1alpha1, NULL FROM workloads
    WHERE digest_v1alpha1 IS NOT NULL
"""


def apply_schema(con) -> None:
    """Bring a warehouse's tables up to date: create what is missing, add new columns, turn a `manifests`
    table (homes written before it was a view) into the view, and store the runs' text zstd-compressed."""
    con.execute(SCHEMA_SQL)
    con.execute(MIGRATIONS_SQL)
    if table_exists(con, "manifests"):
        con.execute("DROP TABLE manifests")
    [(declared,)] = con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = 'run_manifests'").fetchall()
    if "COMPRESSION ZSTD" not in declared.upper():  # a home written before the runs' text was zstd-compressed
        con.execute(f"CREATE TABLE run_manifests_zstd ({RUN_MANIFESTS_COLUMNS}); "
                    "INSERT INTO run_manifests_zstd SELECT * FROM run_manifests; DROP TABLE run_manifests; "
                    "ALTER TABLE run_manifests_zstd RENAME TO run_manifests")
    con.execute(MANIFESTS_VIEW_SQL)
    con.execute(DIGEST_ALIASES_VIEW_SQL)
    _follow_claim_checks(con)


def _follow_claim_checks(con) -> None:
    """`listing_claim_checks` has the columns of `claim_checks`, whatever columns that gains, and `listed_at`."""
    con.execute("CREATE TABLE IF NOT EXISTS listing_claim_checks AS "
                "SELECT *, NULL::TIMESTAMPTZ AS listed_at FROM claim_checks WHERE false")
    have = {name for (name,) in con.execute("SELECT column_name FROM duckdb_columns() "
                                            "WHERE table_name = 'listing_claim_checks'").fetchall()}
    for name, kind in con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = "
                                  "'claim_checks' ORDER BY column_index").fetchall():
        if name not in have:
            con.execute(f'ALTER TABLE listing_claim_checks ADD COLUMN "{name}" {kind}')
