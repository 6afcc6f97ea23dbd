-- Source claims re-checked on KernelIndex's GPU, per kernel family: groups, groups with a verdict under each
-- protocol (device time / source replica), the verdicts under each (ordered claims held / reversed, parity claims
-- at parity / not at parity, then indistinguishable), and the claims whose two protocols disagree.
SELECT kernel,
    max(groups) AS groups,
    max(groups_rechecked) FILTER (WHERE protocol = 'kernelindex-device-time') || ' / ' ||
        max(groups_rechecked) FILTER (WHERE protocol = 'source-replica') AS rechecked,
    max(held || ' / ' || reversed || ' · ' || at_parity || ' / ' || not_at_parity || ' · ' || indistinguishable)
        FILTER (WHERE protocol = 'kernelindex-device-time') AS device,
    max(held || ' / ' || reversed || ' · ' || at_parity || ' / ' || not_at_parity || ' · ' || indistinguishable)
        FILTER (WHERE protocol = 'source-replica') AS replica,
    max(host_bound) AS host_bound
FROM verdicts_by_kernel
GROUP BY kernel
ORDER BY max(groups_rechecked) FILTER (WHERE protocol = 'kernelindex-device-time') DESC, groups DESC, kernel;
