"""Comparison groups and current ranks.

A group holds runs with the same kernel, operation mode, metric, workload, environment and protocol
family (its comparison key). Each implementation is represented by its newest run that upstream still
lists; rank 1 is the lowest median, and ties share a rank. Ranks are recomputed per group, for the groups
a publication touched (`scope_groups`: comparison_key).
"""

from kernelindex_pipeline.core.catalog import SOURCE_NATIVE

RANKS_SQL = """
WITH eligible AS (
    SELECT * FROM runs
    WHERE comparison_key IN (SELECT comparison_key FROM scope_groups)
      AND NOT withdrawn_upstream AND status = 'passed' AND median_value IS NOT NULL
), newest AS (
    SELECT * FROM eligible
    QUALIFY row_number() OVER (PARTITION BY comparison_key, provider ORDER BY observed_at DESC, run_id) = 1
)
SELECT run_id, comparison_key,
    rank() OVER (PARTITION BY comparison_key ORDER BY median_value) AS rank,
    count(*) OVER (PARTITION BY comparison_key) AS group_size,
    evidence_level
FROM newest
"""

# The rank each source-native run had when upstream first listed it: its group as it stood at the commit
# time of that listing (the runs listed then, each implementation by its newest), with the run that led it.
# Stamped once, for runs in scope that have none, and never changed: a record page cites it where a newer
# run of the same implementation has since taken the run's place in `ranks`. A run that was not the newest
# of its implementation when first listed has a row with no rank.
#
# A run first listed by its group's newest listing, with no run listed then withdrawn since, stood in the
# group `ranks` holds now. For the others, each implementation's newest run at a moment is a running
# arg-min over first listings, met by an as-of join, so the cost follows the runs, not their square; the
# few runs upstream withdrew are matched to the moments they were listed at directly. (Steps of temporary
# tables: DuckDB plans the as-of join over inlined window results far slower.)
LISTED_SQL = f"""
CREATE OR REPLACE TEMP TABLE _listed AS
SELECT r.run_id, r.comparison_key, r.provider, r.median_value, r.observed_at,
    f.committed_at AS first_at, CASE WHEN r.withdrawn_upstream THEN l.committed_at END AS last_at
FROM runs r
JOIN snapshots f ON f.revision_key = r.first_seen_revision
LEFT JOIN snapshots l ON l.revision_key = r.last_seen_revision
WHERE r.comparison_key IN (SELECT comparison_key FROM scope_groups) AND r.evidence_level = '{SOURCE_NATIVE}'
  AND r.status = 'passed' AND r.median_value IS NOT NULL AND f.committed_at IS NOT NULL
"""

# The groups as they stood at given moments (`_moments`: comparison_key, moment), from `_listed`:
# `_members` holds each implementation's newest run listed at each moment.
MEMBERS_STEPS = (
    """
    CREATE OR REPLACE TEMP TABLE _grid AS
    SELECT m.comparison_key, m.moment, p.provider
    FROM _moments m JOIN (SELECT DISTINCT comparison_key, provider FROM _listed) p USING (comparison_key)
    """,
    """
    CREATE OR REPLACE TEMP TABLE _still_listed AS
    -- newest first (then the smaller run id, as in `ranks`), among the runs first listed up to each row's time
    SELECT comparison_key, provider, first_at,
        arg_min(run_id, (-epoch_us(observed_at), run_id)) OVER (
            PARTITION BY comparison_key, provider ORDER BY first_at) AS run_id
    FROM _listed WHERE last_at IS NULL AND comparison_key IN (SELECT comparison_key FROM _grid)
    """,
    """
    CREATE OR REPLACE TEMP TABLE _members AS
    WITH candidates AS (
        SELECT g.comparison_key, g.moment, g.provider, s.run_id
        FROM _grid g ASOF JOIN _still_listed s
          ON s.comparison_key = g.comparison_key AND s.provider = g.provider AND s.first_at <= g.moment
        UNION ALL
        SELECT g.comparison_key, g.moment, g.provider, w.run_id
        FROM _grid g JOIN _listed w ON w.comparison_key = g.comparison_key AND w.provider = g.provider
            AND w.last_at IS NOT NULL AND w.first_at <= g.moment AND w.last_at >= g.moment
    )
    SELECT c.comparison_key, c.moment, l.run_id, l.median_value FROM candidates c JOIN _listed l USING (run_id)
    QUALIFY row_number() OVER (PARTITION BY c.comparison_key, c.moment, c.provider
                               ORDER BY l.observed_at DESC, l.run_id) = 1
    """,
)

LISTING_RANKS_STEPS = (
    LISTED_SQL,
    """
    CREATE OR REPLACE TEMP TABLE _unlisted AS
    WITH latest AS (
        SELECT comparison_key, max(first_at) AS latest_at,
            coalesce(max(last_at), '-infinity'::TIMESTAMPTZ) < max(first_at) AS as_then
        FROM _listed GROUP BY comparison_key
    )
    SELECT u.*, u.first_at = t.latest_at AND t.as_then AS as_now
    FROM _listed u JOIN latest t USING (comparison_key)
    WHERE u.run_id IN (SELECT run_id FROM scope_runs)
      AND u.run_id NOT IN (SELECT run_id FROM listing_ranks WHERE run_id IN (SELECT run_id FROM scope_runs))
    """,
    "CREATE OR REPLACE TEMP TABLE _moments AS "
    "SELECT DISTINCT comparison_key, first_at AS moment FROM _unlisted WHERE NOT as_now",
    *MEMBERS_STEPS,
    """
    INSERT INTO listing_ranks
    WITH ranked AS (
        SELECT run_id, comparison_key, moment,
            rank() OVER (PARTITION BY comparison_key, moment ORDER BY median_value) AS rank,
            count(*) OVER (PARTITION BY comparison_key, moment) AS group_size,
            first_value(run_id) OVER (PARTITION BY comparison_key, moment ORDER BY median_value, run_id
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS leader_run_id
        FROM _members
    ), leaders AS (
        SELECT comparison_key, min(run_id) FILTER (WHERE rank = 1) AS leader_run_id FROM ranks
        WHERE comparison_key IN (SELECT comparison_key FROM _unlisted WHERE as_now) GROUP BY comparison_key
    )
    SELECT u.run_id, u.comparison_key, k.rank, k.group_size,
        CASE WHEN k.rank IS NOT NULL THEN d.leader_run_id END, u.first_at
    FROM _unlisted u LEFT JOIN ranks k USING (run_id) LEFT JOIN leaders d ON d.comparison_key = u.comparison_key
    WHERE u.as_now
    UNION ALL
    SELECT u.run_id, u.comparison_key, k.rank, k.group_size, k.leader_run_id, u.first_at
    FROM _unlisted u LEFT JOIN ranked k ON k.run_id = u.run_id AND k.moment = u.first_at
    WHERE NOT u.as_now
    """,
)
TEMPORARY = ("_listed", "_unlisted", "_moments", "_grid", "_still_listed", "_members")


def add_listing_ranks(con) -> int:
    """Stamp the runs in scope that have no listing rank yet (`LISTING_RANKS_STEPS`); returns how many."""
    for step in LISTING_RANKS_STEPS[:-1]:
        con.execute(step)
    [(added,)] = con.execute(LISTING_RANKS_STEPS[-1]).fetchall()
    con.execute("INSERT INTO publication_changes SELECT 'listing_ranks', run_id FROM _unlisted")
    drop_temporary(con)
    return added


def drop_temporary(con) -> None:
    for table in TEMPORARY:
        con.execute(f"DROP TABLE IF EXISTS {table}")
