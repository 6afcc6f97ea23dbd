"""The verdict tables as operators see them: what `claim_checks`, `listing_ranks` and `attestations` report
when `warehouse_tables` publishes them, and the checks on the rules the verdicts rest on."""

import dagster as dg

import duckdb

from kernelindex_pipeline.verdicts import rule
from kernelindex_pipeline.defs.checks import warehouse_check
from kernelindex_pipeline.defs.keys import CLAIM_CHECKS
from kernelindex_pipeline.defs.metadata import markdown_table, table_metadata
from kernelindex_pipeline.verdicts.history import CLAIM
from kernelindex_pipeline.warehouse.sql import table_columns


LABELS_MATCH_INTERVALS = "verdict_labels_match_intervals"
NO_FALLEN_BACK_PROVIDER = "no_verdict_on_a_fallen_back_provider"
EVERY_UNCHECKED_CLAIM_SAYS_WHY = "every_unchecked_claim_has_a_reason_code"
# The coded reason of a claim not re-checked, and the code of a provider that ran as something else (a
# compiled baseline that fell back to eager); the plain-text reason stands in where a home has no codes.
REASON_CODE = "reason_code"
FELL_BACK = "fell_back"

VERDICT_COUNTS = ", ".join(f"count(*) FILTER (WHERE verdict = '{v}') AS \"{v}\"" for v in rule.VERDICTS)
VERDICTS_SQL = f"SELECT protocol, {VERDICT_COUNTS}, count(*) AS claims FROM claim_checks GROUP BY protocol ORDER BY protocol"
# Per protocol, the source groups whose every claim has an answer (a verdict, or a settled reason).
GROUPS_ANSWERED_SQL = """
SELECT protocol, count(*) AS groups, count(*) FILTER (WHERE NOT awaiting) AS answered
FROM (SELECT comparison_key, protocol, bool_or(awaiting_rerun) AS awaiting FROM claim_checks GROUP BY ALL)
GROUP BY protocol ORDER BY protocol
"""
# The claims whose verdict the latest publication changed, with the verdict each had before.
CHANGES_SQL = f"""
SELECT c.kernel, c.operation_mode AS mode, c.workload_slug AS workload, c.source_gpu AS gpu, c.protocol,
    c.a_provider || ' < ' || c.b_provider AS claim, p.verdict AS previous, p.since AS previous_since,
    c.verdict AS current
FROM claim_checks c
JOIN (SELECT * FROM verdict_history WHERE until IS NOT NULL
      QUALIFY row_number() OVER (PARTITION BY {CLAIM} ORDER BY until DESC) = 1) p USING ({CLAIM})
WHERE concat_ws(' ', {CLAIM}) IN (SELECT key FROM publication_changes WHERE table_name = 'verdict_history')
ORDER BY ALL
"""


def claim_checks_metadata(con, details: dict) -> dict:
    """Claims by verdict and protocol, the groups answered, and the verdicts this publication changed."""
    metadata = table_metadata(con, "claim_checks")
    answered = con.execute(GROUPS_ANSWERED_SQL).fetchall()
    changed = int(details.get("verdicts_changed", 0))
    metadata.update({
        "verdicts": dg.MetadataValue.md(markdown_table(con, VERDICTS_SQL)),
        "groups_answered": dg.MetadataValue.md(markdown_table(con, GROUPS_ANSWERED_SQL)),
        **{f"groups_answered/{protocol}": int(n) for protocol, _, n in answered},
        "rechecked": int(details.get("rechecked", 0)), "verdicts_changed": changed,
        "claims_new": int(details.get("claims_new", 0)),
        "verdict_changes": dg.MetadataValue.md(markdown_table(con, CHANGES_SQL, limit=25) if changed
                                               else "No verdict changed in this publication."),
    })
    return metadata


VERSION_EFFECTS_SQL = ("SELECT protocol, version_effect, count(*) AS claims FROM version_checks "
                       "GROUP BY ALL ORDER BY ALL")
REPLICATION_SQL = """
SELECT protocol, card, sum(decided_claims) AS decided, sum(replicated) AS replicated, sum(kept) AS kept,
    sum(moved) AS moved, sum(flipped) AS flipped,
    round(100.0 * sum(decided_kept) / nullif(sum(decided_replicated), 0), 1) AS held_reversed_kept_pct,
    count(*) FILTER (WHERE replicated > 0) AS families
FROM verdict_replication GROUP BY protocol, card ORDER BY protocol, card
"""


def version_checks_metadata(con) -> dict:
    """The claims re-checked at the source's own Liger release, by protocol and version effect."""
    metadata = table_metadata(con, "version_checks")
    metadata["version_effects"] = dg.MetadataValue.md(markdown_table(con, VERSION_EFFECTS_SQL))
    return metadata


def verdict_replication_metadata(con) -> dict:
    """How many claims two or more sessions measured, and how many kept their verdict, per protocol and card."""
    rows = con.execute(REPLICATION_SQL).fetchall()
    return {"replication": dg.MetadataValue.md(markdown_table(con, REPLICATION_SQL)),
            **{f"held_reversed_kept_pct/{protocol}/{card}": float(pct) for protocol, card, *_, pct, _ in rows
               if pct is not None},
            **{f"flipped/{protocol}/{card}": int(flipped) for protocol, card, _, _, _, _, flipped, *_ in rows}}


def listing_ranks_metadata(con, details: dict) -> dict:
    metadata = table_metadata(con, "listing_ranks")
    metadata["stamped"] = int(details.get("listing_ranks", 0))
    return metadata


def attestations_metadata(con, accepted: int) -> dict:
    metadata = table_metadata(con, "attestations", "SELECT attestation_id, run_id, type, author, attested_on "
                                                   "FROM attestations ORDER BY attested_on DESC")
    (refused,) = con.execute("SELECT count(*) FROM quarantine WHERE revision_key LIKE 'attestations/%'").fetchone()
    metadata.update({"accepted": accepted, "refused": int(refused)})
    return metadata


def _has_column(con, table: str, column: str) -> bool:
    return column in {name for name, _ in table_columns(con, table)}


# A decided verdict is the one `verdicts.verdict` gives its interval (docs/verdict-consistency.sql): an
# ordered claim held or reversed only with the whole interval beyond the parity band on the claimed side, or
# the other; a parity claim held only with the interval inside the band, reversed only wholly outside it;
# indistinguishable only where the interval leaves the claim unsettled and the samples are steady; never on
# fewer repetitions than the thresholds ask (a peak-memory count is one exact measurement).
MISLABELLED_SQL = f"""
WITH decided AS (
    SELECT *, ci_low > 1 + $parity AS above, ci_high < 1 - $parity AS below,
        ci_low >= 1 - $parity AND ci_high <= 1 + $parity AS inside,
        abs(source_ratio - 1) <= $parity AS parity_claim,
        greatest(coalesce(spread_a, 0), coalesce(spread_b, 0)) > $spread AS noisy,
        metric = 'peak_memory' OR least(n_a, n_b) >= $min_samples AS enough
    FROM claim_checks WHERE verdict <> '{rule.NOT_RECHECKED}'
)
SELECT kernel, workload_slug, protocol, a_provider || ' < ' || b_provider AS claim, source_ratio, ci_low, ci_high,
    verdict
FROM decided
WHERE NOT coalesce(ci_low IS NOT NULL AND ci_high IS NOT NULL AND enough AND CASE
    WHEN parity_claim AND verdict = '{rule.HELD}' THEN inside
    WHEN parity_claim AND verdict = '{rule.REVERSED}' THEN above OR below
    WHEN parity_claim THEN verdict = '{rule.INDISTINGUISHABLE}' AND NOT inside AND NOT (above OR below) AND NOT noisy
    WHEN verdict = '{rule.HELD}' THEN CASE WHEN source_ratio > 1 THEN above ELSE below END
    WHEN verdict = '{rule.REVERSED}' THEN CASE WHEN source_ratio > 1 THEN below ELSE above END
    ELSE verdict = '{rule.INDISTINGUISHABLE}' AND NOT (above OR below) AND NOT noisy END, false)
ORDER BY ALL
"""


@warehouse_check(CLAIM_CHECKS, LABELS_MATCH_INTERVALS)
def verdict_labels_match_intervals(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict]:
    """Every held, reversed or indistinguishable verdict is the one its rerun interval, spreads and sample
    counts give under the published thresholds (`verdicts.Thresholds`)."""
    t = rule.DEFAULT_THRESHOLDS
    params = {"parity": t.parity, "spread": t.max_relative_spread, "min_samples": t.min_samples}
    (count,) = con.execute(f"SELECT count(*) FROM ({MISLABELLED_SQL})", params).fetchone()
    examples = markdown_table(con, MISLABELLED_SQL, limit=5, params=params) if count else "none"
    return count == 0, {"mislabelled": int(count), "examples": dg.MetadataValue.md(examples)}


@warehouse_check(CLAIM_CHECKS, NO_FALLEN_BACK_PROVIDER)
def no_verdict_on_a_fallen_back_provider(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict]:
    """No verdict rests on a rerun that did not pass as the provider it names: both reruns of every decided
    claim passed correctness and ran, and none carries the fell-back code."""
    coded = (f" OR c.{REASON_CODE} = '{FELL_BACK}'" if _has_column(con, "claim_checks", REASON_CODE) else "")
    (count,) = con.execute(f"""
        WITH passed AS (SELECT run_id FROM controlled_runs WHERE status = 'passed')
        SELECT count(*) FROM claim_checks c
            LEFT JOIN passed a ON a.run_id = c.rerun_a_run_id LEFT JOIN passed b ON b.run_id = c.rerun_b_run_id
        WHERE c.verdict <> '{rule.NOT_RECHECKED}'
          AND (a.run_id IS NULL OR b.run_id IS NULL OR c.rerun_a_run_id = c.rerun_b_run_id{coded})""").fetchone()
    return count == 0, {"verdicts_on_a_provider_that_did_not_run_as_named": int(count)}


@warehouse_check(CLAIM_CHECKS, EVERY_UNCHECKED_CLAIM_SAYS_WHY)
def every_unchecked_claim_has_a_reason_code(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict]:
    """Every claim not re-checked says why: its reason code (or, in a home without codes, its reason)."""
    column = REASON_CODE if _has_column(con, "claim_checks", REASON_CODE) else "reason"
    rows = con.execute(f"SELECT kernel, protocol, count(*) FROM claim_checks WHERE verdict = ? "
                       f"AND coalesce({column}, '') = '' GROUP BY ALL ORDER BY 3 DESC",
                       [rule.NOT_RECHECKED]).fetchall()
    missing = sum(n for *_, n in rows)
    return missing == 0, {"column": column, "without_reason": int(missing),
                          "by_kernel": ", ".join(f"{k} ({p}): {n}" for k, p, n in rows[:10]) or "none"}


CHECKS = [verdict_labels_match_intervals, no_verdict_on_a_fallen_back_provider, every_unchecked_claim_has_a_reason_code]
