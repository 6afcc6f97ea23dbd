"""Listing-time claims: what a source run claimed when upstream first listed it, re-checked.

A source run that a newer run of its implementation has replaced in `ranks` takes part in no current claim
(verdicts/claims.py), yet a reader who arrives from a citation of it wants the answer for the claims it made when
it was published. Those are the claims of its listing-time group that name it: the group as it stood at
the commit time of its first listing (`listing_ranks.listed_at`; each implementation by its newest run
listed then, as runs/ranking.py builds listing ranks), ordered by the medians listed then.

They are re-checked by the reruns of the same workload. What the reruns say of a claim depends on its
group and its ordered pair of implementations, not on which of their runs the source listed: so the
newest listing-time claim of each (group, a, b) is checked by `claims.claim_checks` itself, and every
other claim of that pair takes its rerun pair, interval and reasons, with the verdict its own source ratio
gives (`verdicts.verdict`). A history's listing-time claims are many times its current ones, but only a
few thousand distinct pairs.
"""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa

from kernelindex_pipeline.verdicts import claims, rule
from kernelindex_pipeline.core import reasons
from kernelindex_pipeline.core.catalog import SOURCE_NATIVE
from kernelindex_pipeline.warehouse.sql import registered, table_exists
from kernelindex_pipeline.runs.ranking import LISTED_SQL, MEMBERS_STEPS, drop_temporary

# The moments whose groups are wanted: the first listing of each replaced source run in scope that ranked then
# (`{restrict}`: of some runs only).
MOMENTS_SQL = """
CREATE OR REPLACE TEMP TABLE _moments AS
SELECT DISTINCT comparison_key, listed_at AS moment FROM listing_ranks
WHERE comparison_key IN (SELECT comparison_key FROM scope_groups) AND rank IS NOT NULL
  AND run_id NOT IN (SELECT run_id FROM ranks) {restrict}
"""

# Each claim of a listing-time group that names a run first listed then and replaced since: a ahead of b by
# the medians listed then (a tie: the provider first by name), as verdicts/claims.py orders current claims.
PAIRS_SQL = """
CREATE OR REPLACE TEMP TABLE _listing_pairs AS
WITH members AS (
    SELECT m.comparison_key, m.moment, m.run_id, m.median_value, r.provider,
        rank() OVER (PARTITION BY m.comparison_key, m.moment ORDER BY m.median_value) AS rank,
        l.run_id IS NOT NULL AS claimant
    FROM _members m JOIN runs r USING (run_id)
    LEFT JOIN listing_ranks l ON l.run_id = m.run_id AND l.listed_at = m.moment AND l.rank IS NOT NULL
        AND l.run_id NOT IN (SELECT run_id FROM ranks)
)
SELECT a.comparison_key, a.moment AS listed_at, a.run_id AS a_run_id, b.run_id AS b_run_id,
    a.provider AS a_provider, b.provider AS b_provider, a.median_value = b.median_value AS tie
FROM members a JOIN members b ON a.comparison_key = b.comparison_key AND a.moment = b.moment
    AND a.run_id <> b.run_id AND (a.rank < b.rank OR (a.rank = b.rank AND a.provider < b.provider))
WHERE (a.claimant OR b.claimant) {restrict}
"""

# The claim that stands for each (group, a, b): its newest listing.
REPRESENTATIVES_SQL = """
SELECT comparison_key || ' ' || a_provider || ' ' || b_provider AS group_key, run_id,
    CASE WHEN side = 'b' AND NOT tie THEN 2 ELSE 1 END AS rank
FROM (SELECT * FROM _listing_pairs
      QUALIFY row_number() OVER (PARTITION BY comparison_key, a_provider, b_provider
                                 ORDER BY listed_at DESC, a_run_id, b_run_id) = 1)
CROSS JOIN LATERAL (VALUES ('a', a_run_id), ('b', b_run_id)) s(side, run_id)
"""

# On a cursor of its own (whose temporary views no other session sees), `ranks`, `runs` and
# `scope_groups` are the representatives' two-run groups, so that claims.claim_checks reads them as it
# reads current groups. A run can stand for several pairs: within these views its id is suffixed with its
# group's key.
SHADOW_SQL = """
CREATE TEMP VIEW ranks AS
SELECT run_id || '#' || group_key AS run_id, group_key AS comparison_key, rank, '{source_native}' AS evidence_level
FROM _representatives;
CREATE TEMP VIEW runs AS
SELECT r.* REPLACE (r.run_id || '#' || m.group_key AS run_id, m.group_key AS comparison_key)
FROM "{database}".main.runs r JOIN _representatives m USING (run_id);
CREATE TEMP VIEW scope_groups AS SELECT DISTINCT group_key AS comparison_key FROM _representatives;
"""

# Every listing-time claim under each protocol: its own source side (as verdicts/claims.py writes it), its
# representative's rerun side.
RESULT_SQL = """
SELECT c.* REPLACE (p.comparison_key AS comparison_key, a.implementation AS a_implementation,
        p.a_run_id AS a_run_id, b.implementation AS b_implementation, p.b_run_id AS b_run_id,
        a.median_value AS source_a_median, b.median_value AS source_b_median,
        b.median_value / nullif(a.median_value, 0) AS source_ratio,
        CASE WHEN p.tie THEN 'parity' ELSE p.a_provider || ' < ' || p.b_provider END AS source_order),
    p.listed_at
FROM _listing_pairs p
JOIN runs a ON a.run_id = p.a_run_id JOIN runs b ON b.run_id = p.b_run_id
JOIN _representative_checks c
  ON c.comparison_key = p.comparison_key || ' ' || p.a_provider || ' ' || p.b_provider
ORDER BY p.comparison_key, p.listed_at, p.a_run_id, p.b_run_id, c.protocol
"""


def listing_claim_checks(con: duckdb.DuckDBPyConnection, spread: dict | None = None, runs: str | None = None) -> pa.Table:
    """The claim checks of the claims the replaced source runs of the groups in scope made when they were
    listed: `claim_checks`' columns, plus `listed_at` (`spread`: as `claims.claim_checks` takes it); with
    `runs` (a query of run ids), only the claims naming one of them. The rerun side of a claim depends on its group and pair of
    implementations, not on which listing stands for the pair, so the claims of some runs are those a
    computation of all would give them."""
    con.execute(LISTED_SQL)
    con.execute(MOMENTS_SQL.format(restrict=f"AND run_id IN ({runs})" if runs else ""))
    for step in MEMBERS_STEPS:
        con.execute(step)
    con.execute(PAIRS_SQL.format(restrict=f"AND (a.run_id IN ({runs}) OR b.run_id IN ({runs}))" if runs else ""))
    representatives = con.sql(REPRESENTATIVES_SQL).to_arrow_table()
    [(database,)] = con.execute("SELECT current_database()").fetchall()
    cursor = con.cursor()
    try:
        with registered(cursor, _representatives=representatives):
            cursor.execute(SHADOW_SQL.format(database=database, source_native=SOURCE_NATIVE))
            checked = claims.claim_checks(cursor, spread=spread)
    finally:
        cursor.close()
    with registered(con, _representative_checks=checked):
        rows = con.sql(RESULT_SQL).to_arrow_table()
    con.execute("DROP TABLE _listing_pairs")
    drop_temporary(con)
    return _with_own_verdicts(rows)


def _with_own_verdicts(rows: pa.Table) -> pa.Table:
    """Each claim's type, verdict, reason and code (and each session's verdict) from its own source ratio and
    its representative's interval (where it has one); `host_bound` from its own two verdicts (a claim's rows are adjacent, one
    per protocol, in name order). A source artifact names the representative's runs, not this claim's, so
    none is carried over."""
    columns = rows.select(["protocol", "metric", "source_ratio", "rerun_ratio", "ci_low", "ci_high", "n_a", "n_b",
                           "spread_a", "spread_b", "verdict", "sessions"]).to_pydict()
    verdict, reason = columns["verdict"], rows.column("reason").to_pylist()
    code = rows.column("reason_code").to_pylist()
    kind = [rule.claim_type(r) if r else None for r in columns["source_ratio"]]
    for i in range(len(verdict)):
        if columns["ci_low"][i] is None or code[i] == reasons.HOST_BOUND_HERE:  # the host decides for every claim
            continue
        interval = rule.RatioInterval(
            columns["rerun_ratio"][i], columns["ci_low"][i], columns["ci_high"][i], columns["n_a"][i],
            columns["n_b"][i], "", columns["spread_a"][i] or 0.0, columns["spread_b"][i] or 0.0,
            deterministic=columns["metric"][i] == "peak_memory", sessions=columns["sessions"][i] or 1)
        own = rule.verdict(columns["source_ratio"][i], interval)
        verdict[i], reason[i], code[i] = own.verdict, own.reason, own.code
    # Each session's verdict too, from the claim's own source ratio.
    sessions = rows.column("session_intervals").to_pylist()
    for ratio, each in zip(columns["source_ratio"], sessions):
        for s in each or []:
            if s["ci_low"] is not None:
                own = rule.verdict(ratio, rule.RatioInterval(s["rerun_ratio"], s["ci_low"], s["ci_high"], s["n_a"], s["n_b"],
                                                             rule.bootstrap_method(), s["spread_a"], s["spread_b"]))
                s["verdict"], s["reason_code"] = own.verdict, own.code
    assert columns["protocol"][0::2] == [claims.DEVICE_TIME] * (len(verdict) // 2)
    host = [rule.host_bound(device, replica) for device, replica in zip(verdict[0::2], verdict[1::2])]
    for name, values in (("verdict", verdict), ("reason", reason), ("reason_code", code), ("claim_type", kind),
                         ("source_artifact", [None] * len(verdict)), ("session_intervals", sessions),
                         ("host_bound", [h for h in host for _ in (0, 1)])):
        rows = rows.set_column(rows.schema.get_field_index(name), name, pa.array(values, rows.schema.field(name).type))
    return rows


def listing_claims_of_run(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict]:
    """The listing-time claim checks a source run takes part in (as a or b), for `kernelindex show` and
    record pages; none in a home written before they existed."""
    exists = table_exists(con, "listing_claim_checks")
    if not exists:
        return []
    cursor = con.execute("SELECT * FROM listing_claim_checks WHERE ? IN (a_run_id, b_run_id) "
                         "ORDER BY protocol, a_provider, b_provider", [run_id])
    names = [d[0] for d in cursor.description]
    return [json.loads(json.dumps(dict(zip(names, row)), default=str)) for row in cursor.fetchall()]
