"""GPU reruns: KernelIndex's own measurements of covered kernels (torch/triton imported lazily).

``run_reruns(targets, out_path)`` checks correctness, times and measures each target on the local
CUDA device and writes evidence records (gzipped JSONL); ``python -m kernelindex_pipeline.gpu.bench``
is the command-line entry point. Importing this package needs neither torch nor a GPU.
"""

from __future__ import annotations


def run_reruns(targets, out_path):
    from kernelindex_pipeline.gpu.bench import run_reruns as _run

    return _run(targets, out_path)


__all__ = ["run_reruns"]
