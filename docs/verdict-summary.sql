-- Source claims re-checked on KernelIndex's GPU, per kernel family: groups, groups with a verdict under each
-- protocol (device time / source replica), the verdicts under each, and the claims whose two protocols disagree.
SELECT kernel,
    max(groups) AS groups,
    max(groups_rechecked) FILTER (WHERE protocol = 'kernelindex-device-time') || ' / ' ||
        max(groups_rechecked) FILTER (WHERE protocol = 'source-replica') AS rechecked,
    max(held || ' / ' || reversed || ' / ' || indistinguishable) FILTER (WHERE protocol = 'kernelindex-device-time')
        AS device_held_reversed_indist,
    max(held || ' / ' || reversed || ' / ' || indistinguishable) FILTER (WHERE protocol = 'source-replica')
        AS replica_held_reversed_indist,
    max(host_bound) AS host_bound
FROM verdicts_by_kernel
GROUP BY kernel
ORDER BY max(groups_rechecked) FILTER (WHERE protocol = 'kernelindex-device-time') DESC, groups DESC, kernel;
