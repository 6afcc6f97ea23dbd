"""GPU reruns: KernelIndex's own measurements of covered kernels (torch/triton imported lazily).

``run_reruns(targets, out_path)`` checks correctness, times and measures each target on the local
CUDA device and writes evidence records (gzipped JSONL); ``python -m kernelindex_pipeline.gpu.rerun``
is the command-line entry point. Importing this package needs neither torch nor a GPU.

- ``targets``: which workloads a session measures (named sets, or derived from the warehouse and exported).
- ``rerun``: the session and its command line; ``bench``: the same command under its first name.
- ``harness``: one target's passes prepared, their peak memory and latency measured.
- ``correctness``: each provider against the adapter's reference before any timing.
- ``timing``: the protocol's timer (CUDA events, L2 flush, GPU spin), peak memory, and the source
  replica's timer (triton do_bench, every repetition kept).
- ``provenance``: code revisions of the kernel packages and of the harness.
- ``environment``: the card, its software and the ceilings measured in the session.
- ``device``: nvidia-smi readings (driver, maximum SM clock).
- ``records``: evidence records as ``kernelindex_pipeline.evidence`` reads them.
- ``protocol``: the published protocol's constants and document.
- ``tune``: launch-setting sweeps for KernelIndex's kernels.

The kernels are reached through their rerun adapters, each family's ``kernels/<kernel>/impl.py`` ``ADAPTER``,
whose contract is ``kernels._adapter.RerunAdapter``.
"""

from __future__ import annotations


def run_reruns(targets, out_path, budget_s=None, remaining_path=None):
    from kernelindex_pipeline.gpu.rerun import run_reruns as _run

    return _run(targets, out_path, budget_s=budget_s, remaining_path=remaining_path)


__all__ = ["run_reruns"]
