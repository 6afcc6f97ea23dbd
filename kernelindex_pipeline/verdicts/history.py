"""What each source claim's verdict was, and since when (`verdict_history`).

A claim is named by its comparison group, protocol and ordered pair of implementations (a ahead of b), so
it keeps its name when a newer run of a or b takes the older one's place. A row holds its verdict and how near
the card that decided it is to the claim's own (`card_match`). A publication closes the open row of each claim
in its scope whose verdict or card match changed or that is no longer claimed (`until`), and opens a row for
each claim with none open (`since`), both at the publication's time. Rows are never
deleted: a home recomputed from all of history keeps its history.
"""

from __future__ import annotations

import duckdb

CLAIM = "comparison_key, protocol, a_provider, b_provider"
SAME_CLAIM = ("h.comparison_key = c.comparison_key AND h.protocol = c.protocol AND h.a_provider = c.a_provider "
              "AND h.b_provider = c.b_provider")

CLOSE_SQL = f"""
UPDATE verdict_history h SET until = $now
WHERE h.until IS NULL AND h.comparison_key IN (SELECT comparison_key FROM scope_groups)
  AND NOT EXISTS (SELECT 1 FROM claim_checks c WHERE {SAME_CLAIM} AND c.verdict = h.verdict
                  AND c.card_match IS NOT DISTINCT FROM h.card_match)
"""

OPEN_SQL = f"""
INSERT INTO verdict_history BY NAME
SELECT DISTINCT {CLAIM}, verdict, card_match, $now AS since, NULL::TIMESTAMPTZ AS until FROM claim_checks c
WHERE c.comparison_key IN (SELECT comparison_key FROM scope_groups)
  AND NOT EXISTS (SELECT 1 FROM verdict_history h WHERE {SAME_CLAIM} AND h.until IS NULL)
"""

# The claims whose verdict (or the card deciding it) this publication changed: a row it opened where it closed
# another.
CHANGED_SQL = f"""
SELECT c.comparison_key, c.protocol, c.a_provider, c.b_provider, p.verdict AS previous, c.verdict AS current
FROM verdict_history c JOIN verdict_history p USING ({CLAIM})
WHERE c.since = $now AND c.until IS NULL AND p.until = $now
"""


def record_verdicts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Bring `verdict_history` up to `claim_checks` for the groups in scope; the changed claims' keys go to
    `publication_changes`. Returns how many claims changed verdict and how many were claimed for the first time."""
    [(now,)] = con.execute("SELECT date_trunc('second', get_current_timestamp())").fetchall()
    con.execute(CLOSE_SQL, {"now": now})
    [(opened,)] = con.execute(OPEN_SQL, {"now": now}).fetchall()
    [(changed,)] = con.execute(
        f"INSERT INTO publication_changes SELECT 'verdict_history', concat_ws(' ', {CLAIM}) FROM ({CHANGED_SQL})",
        {"now": now}).fetchall()
    return {"verdicts_changed": changed, "claims_new": opened - changed}
