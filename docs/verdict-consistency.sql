-- Claims whose label contradicts their own interval (the rule of kernelindex_pipeline/verdicts/rule.py, parity band
-- ±2%): an ordered claim is held or reversed only when its interval lies wholly beyond the band on that side,
-- and indistinguishable only when it overlaps the band; a parity claim is held only when its interval lies
-- wholly inside the band, reversed only when wholly outside, indistinguishable otherwise. Expected: no rows.
WITH decided AS (
    SELECT *, ci_low > 1.02 AS above, ci_high < 0.98 AS below, ci_low >= 0.98 AND ci_high <= 1.02 AS inside
    FROM claim_checks WHERE verdict IN ('held', 'reversed', 'indistinguishable')
)
SELECT protocol, claim_type, verdict, count(*) AS contradictions
FROM decided
WHERE ci_low IS NULL OR ci_high IS NULL OR NOT CASE
    WHEN claim_type = 'parity' AND verdict = 'held' THEN inside
    WHEN claim_type = 'parity' AND verdict = 'reversed' THEN above OR below
    WHEN claim_type = 'parity' THEN NOT inside AND NOT (above OR below)
    WHEN verdict = 'held' THEN CASE WHEN source_ratio > 1 THEN above ELSE below END
    WHEN verdict = 'reversed' THEN CASE WHEN source_ratio > 1 THEN below ELSE above END
    ELSE NOT (above OR below) END
GROUP BY ALL ORDER BY ALL;
