"""Runs across snapshots: one row per run ever seen, with when it was first and last listed upstream.

A run keeps the values of its first publication: listings are ordered by the publication that brought
their revision in, then by upstream commit time, so a revision that arrives late, however back-dated,
never changes a published value (its differing listings are conflicts). Withdrawal follows upstream's
own order: a run is withdrawn once no stream that listed it (a main-branch file or a gh-pages run) still
lists it in its newest usable listing (by commit time).

One measurement is one run, whichever publication listed it: the main-branch files and the gh-pages runs
are two publications of Liger-Kernel's benchmarks, so a run's id is the hash of `liger-kernel-bench:` and
its external id (kernel, pass, provider, GPU, workload, timestamp) in both. A main-branch row copied from a
gh-pages run therefore lands on the same run, ranked once; `source` names the publication that listed it
first, and `run_listings` every listing.

Both queries work on a scope, so that a publication costs what it adds: `scope_runs` (run_id), the runs
whose rows may change, and `scope_revisions` (revision_key), the revisions newly published. A run's row
depends only on its own listings and on each stream's newest listing, so recomputing the runs in scope
gives the same rows a rebuild of all history would (publish/derived.py decides the scope).
"""

from __future__ import annotations

# How a landed revision is recorded in `snapshots.state`.
LISTED = "listed"  # bytes fetched; parsed into observations and quarantine rows
DELETED = "deleted"  # the revision deleted the file: no rows, the file's runs are withdrawn from then on
UNLISTED = "unlisted"  # a registered revision upstream no longer lists: nothing fetched, nothing withdrawn
UNPARSEABLE = "unparseable"  # bytes that are not a CSV file at all: every line quarantined, nothing withdrawn
REFUSED = "refused"  # a revision the source cannot vouch for (`sources.screen_revisions`): nothing read, nothing withdrawn

RUNS_SQL = """
WITH o AS (
    SELECT o.*, s.stream, s.committed_at, coalesce(s.publication, 0) AS publication, s.source AS listed_by,
        s.benchmarked_commit, s.release
    FROM observations o JOIN snapshots s USING (revision_key)
    WHERE o.run_id IN (SELECT run_id FROM scope_runs)
), first_seen AS (
    SELECT * FROM o QUALIFY row_number() OVER (
        PARTITION BY run_id ORDER BY publication, committed_at, revision_key, line_number) = 1
), span AS (
    SELECT run_id, arg_max(revision_key, committed_at) AS last_seen_revision FROM o GROUP BY run_id
), latest AS (  -- the newest usable listing of each stream (file or gh-pages run)
    SELECT arg_max(revision_key, committed_at) AS revision_key FROM snapshots
    WHERE coalesce(state, 'listed') IN ('listed', 'deleted') GROUP BY stream
), listed_now AS (  -- runs some stream still lists in its newest listing
    SELECT DISTINCT run_id FROM observations SEMI JOIN latest USING (revision_key)
    WHERE run_id IN (SELECT run_id FROM scope_runs)
), source_native AS (
    SELECT f.run_id,
        k.id_prefix || strftime(f.observed_at, '%Y-%m-%d-%H-%M-%S') || k.id_suffix AS external_id,
        k.title, k.kernel, k.kernel_operation_mode AS operation_mode, k.kernel_provider AS provider,
        k.implementation, k.project, k.metric, CASE k.metric WHEN 'latency' THEN 'ns' ELSE 'bytes' END AS unit,
        f.median_value, f.p20_value, f.p80_value, k.gpu, k.form_factor, k.architecture, k.workload_slug,
        f.observed_at, k.evidence_level, coalesce(f.listed_by, k.source) AS source,
        f.revision_key AS first_seen_revision, s.last_seen_revision,
        f.run_id NOT IN (SELECT run_id FROM listed_now) AS withdrawn_upstream, k.comparison_key, k.protocol_digest,
        k.workload_digest,
        k.environment_digest, k.implementation_digest, f.liger_version, 'passed' AS status, k.known_kernel,
        f.source_p20, f.source_p50, f.source_p80, k.metric_unit AS source_unit, f.benchmarked_commit, f.release
    FROM first_seen f JOIN run_keys k USING (dim_key) JOIN span s USING (run_id)
)
SELECT run_id, external_id,
    left('liger-' || trim(regexp_replace(lower(external_id), '[^a-z0-9]+', '-', 'g'), '-'), 100) AS name,
    * EXCLUDE (run_id, external_id)
FROM source_native
UNION ALL BY NAME
SELECT run_id, external_id, name, title, kernel, operation_mode, provider, implementation, project, metric, unit,
    median_value, p20_value, p80_value, gpu, form_factor, architecture, workload_slug, observed_at, evidence_level,
    source, NULL AS first_seen_revision, NULL AS last_seen_revision, false AS withdrawn_upstream, comparison_key,
    protocol_digest, workload_digest, environment_digest, implementation_digest, NULL AS liger_version, status,
    true AS known_kernel, NULL::DOUBLE AS source_p20, NULL::DOUBLE AS source_p50, NULL::DOUBLE AS source_p80,
    NULL AS source_unit, NULL AS benchmarked_commit, NULL AS release
FROM controlled_runs WHERE run_id IN (SELECT run_id FROM scope_runs)
"""

# Later listings of a run whose values differ from the ones first published: refused, the first kept. A
# new revision is published after every earlier one, so only its own listings can be new conflicts.
CONFLICTS_SQL = """
WITH o AS (
    SELECT o.*, s.committed_at, s.source_file, s.commit, coalesce(s.publication, 0) AS publication
    FROM observations o JOIN snapshots s USING (revision_key)
    WHERE o.run_id IN (SELECT run_id FROM observations WHERE revision_key IN (SELECT revision_key FROM scope_revisions))
), first_seen AS (
    SELECT * FROM o QUALIFY row_number() OVER (
        PARTITION BY run_id ORDER BY publication, committed_at, revision_key, line_number) = 1
)
SELECT o.source_file AS source, o.commit AS source_revision, o.line_number,
    'conflicts with the values first published for this run at ' || f.revision_key AS reason,
    o.revision_key
FROM o JOIN first_seen f USING (run_id)
WHERE o.revision_key IN (SELECT revision_key FROM scope_revisions)
  AND (o.median_value, o.p20_value, o.p80_value, coalesce(o.liger_version, ''))
      IS DISTINCT FROM (f.median_value, f.p20_value, f.p80_value, coalesce(f.liger_version, ''))
"""
