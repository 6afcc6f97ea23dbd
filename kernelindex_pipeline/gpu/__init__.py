"""GPU reruns: KernelIndex's own measurements of covered kernels (torch/triton imported lazily).

``run_reruns(targets, out_path)`` checks correctness, times and measures each target on the local
CUDA device and writes evidence records (gzipped JSONL); ``python -m kernelindex_pipeline.gpu.rerun``
is the command-line entry point. Importing this package needs neither torch nor a GPU.

- ``targets``: which workloads a session measures.
- ``rerun``: the session and its command line; ``bench``: the same command under its first name.
- ``harness``: one target's passes prepared, their peak memory and latency measured.
- ``correctness``: each provider against the adapter's reference before any timing.
- ``timing``: the protocol's timer (CUDA events, L2 flush, GPU spin) and peak memory.
- ``environment``: the card, its software and the ceilings measured in the session.
- ``device``: nvidia-smi readings (driver, maximum SM clock).
- ``records``: evidence records as ``kernelindex_pipeline.evidence`` reads them.
- ``protocol``: the published protocol's constants and document.
- ``tune``: launch-setting sweeps for KernelIndex's kernels.

The kernels are reached through their rerun adapters, ``kernels/<kernel>/impl.py``, whose contract is
``kernels._adapter.RerunAdapter``.
"""

from __future__ import annotations


def run_reruns(targets, out_path):
    from kernelindex_pipeline.gpu.rerun import run_reruns as _run

    return _run(targets, out_path)


__all__ = ["run_reruns"]
