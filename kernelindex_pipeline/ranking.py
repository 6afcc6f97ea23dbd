"""Comparison groups and current ranks.

A group holds runs with the same kernel, operation mode, metric, workload, environment and protocol
family (its comparison key). Each implementation is represented by its newest run that upstream still
lists; rank 1 is the lowest median, and ties share a rank. Ranks are recomputed per group, for the groups
a publication touched (`scope_groups`: comparison_key).
"""

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
