WITH latest AS (
    SELECT * FROM controlled_runs
    WHERE family = 'kernelindex_rerun' AND metric = 'latency' AND status = 'passed'
    QUALIFY row_number() OVER (PARTITION BY kernel, workload_slug, operation_mode, provider, gpu ORDER BY observed_at DESC) = 1
)
SELECT kernel, workload_slug, operation_mode AS mode, gpu,
    round(any_value(median_value) FILTER (WHERE provider = 'kernelindex') / 1e3, 1) AS kernelindex_us,
    round(any_value(median_value) FILTER (WHERE provider = 'liger') / 1e3, 1) AS liger_us,
    round(any_value(median_value) FILTER (WHERE provider = 'huggingface') / 1e3, 1) AS huggingface_us,
    round(any_value(median_value) FILTER (WHERE provider = 'liger')
          / any_value(median_value) FILTER (WHERE provider = 'kernelindex'), 3) AS liger_over_kernelindex
FROM latest GROUP BY ALL HAVING kernelindex_us IS NOT NULL ORDER BY kernel, workload_slug, mode, gpu
