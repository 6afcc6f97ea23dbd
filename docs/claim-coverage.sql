-- Source comparison groups whose every claim has an answer (a verdict, or a settled reason), per rerun protocol;
-- a group with a claim still `awaiting_rerun` does not count.
SELECT protocol, count(*) AS groups,
    count(*) FILTER (WHERE NOT awaiting) AS answered,
    round(100.0 * count(*) FILTER (WHERE NOT awaiting) / count(*), 1) AS percent
FROM (SELECT comparison_key, protocol, bool_or(awaiting_rerun) AS awaiting FROM claim_checks GROUP BY ALL)
GROUP BY protocol
ORDER BY protocol;
