"""The audit of a staged generation: what must hold before it goes live (write, audit, publish). A failure
leaves the previous generation live and byte-identical; the Dagster asset checks report the same queries
on what is live."""

from __future__ import annotations

import duckdb

from kernelindex_pipeline.warehouse.store import WarehouseError

# Only a row a publication writes can repeat an id, and every earlier publication passed this audit: so the
# runs the latest one wrote are compared with all (a backfill writes them all).
DUPLICATE_IDS_SQL = """
WITH written AS (
    SELECT run_id, external_id FROM runs WHERE run_id IN (
        SELECT key FROM publication_changes WHERE table_name = 'runs')
)
SELECT (SELECT count(*) FROM runs WHERE run_id IN (SELECT run_id FROM written))
        - (SELECT count(DISTINCT run_id) FROM written)
     + (SELECT count(*) FROM runs WHERE external_id IN (SELECT external_id FROM written))
        - (SELECT count(DISTINCT external_id) FROM written)
"""
ORPHAN_RANKS_SQL = ("SELECT count(*) FROM ranks WHERE run_id NOT IN "
                    "(SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM ranks))")
WRONG_GROUP_SIZES_SQL = ("SELECT count(*) FROM (SELECT comparison_key, any_value(group_size) g, count(*) n "
                         "FROM ranks GROUP BY 1) WHERE g <> n")
# Only a publication that writes (or removes) a run or a manifest can leave one without the other, and every
# earlier publication passed this audit: so the runs the latest one touched are looked up (a backfill
# touches them all). run_manifests: the rows under the `manifests` view, without assembling their text.
TOUCHED_RUNS = "SELECT key FROM publication_changes WHERE table_name IN ('runs', 'run_manifests')"
MISSING_MANIFESTS_SQL = f"""
SELECT count(*) FROM runs WHERE run_id IN ({TOUCHED_RUNS})
    AND run_id NOT IN (SELECT run_id FROM run_manifests WHERE run_id IN ({TOUCHED_RUNS}))
"""
MANIFESTS_WITHOUT_RUN_SQL = f"""
SELECT count(*) FROM run_manifests WHERE run_id IN ({TOUCHED_RUNS})
    AND run_id NOT IN (SELECT run_id FROM runs WHERE run_id IN ({TOUCHED_RUNS}))
"""

# What a generation must not hold, each as a query counting its faults.
AUDIT = {
    "duplicate run or external ids": DUPLICATE_IDS_SQL,
    "ranked runs missing from runs": ORPHAN_RANKS_SQL,
    "comparison groups whose size is wrong": WRONG_GROUP_SIZES_SQL,
    "runs without a manifest": MISSING_MANIFESTS_SQL,
    "manifests without a run": MANIFESTS_WITHOUT_RUN_SQL,
}


class AuditFailed(WarehouseError):
    """The staged generation breaks a rule every published one keeps; it is not published."""


def faults(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """{rule: faults} of every audit rule on the generation `con` holds."""
    return {rule: int(con.execute(sql).fetchone()[0]) for rule, sql in AUDIT.items()}


def audit(con: duckdb.DuckDBPyConnection) -> None:
    """Raise `AuditFailed`, naming each broken rule, where the staged generation breaks any."""
    broken = {rule: n for rule, n in faults(con).items() if n}
    if broken:
        raise AuditFailed("the staged warehouse failed its audit, previous warehouse kept: "
                          + "; ".join(f"{n} {rule}" for rule, n in broken.items()))
