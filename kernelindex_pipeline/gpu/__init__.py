"""GPU reruns: KernelIndex's own measurements of covered kernels (torch/triton imported lazily).

``rerun.run_reruns(targets, out_path)`` checks correctness, times and measures each target on the local
CUDA device and writes evidence records (gzipped JSONL); ``python -m kernelindex_pipeline.gpu.rerun``
is the command-line entry point. Importing this package needs neither torch nor a GPU.

It may import ``kernels``, ``core`` and ``warehouse`` (targets are read from the warehouse); the later domains
read what it writes, as evidence files.

- ``targets``: which workloads a session measures (named sets, or derived from the warehouse and exported);
  ``workloads``: a target without the warehouse (its dtype and bytes, Liger backend tags, targets files).
- ``rerun``: the session and its command line; ``bench``: the same command under its first name.
- ``measure``: one target, correctness first, then memory and latency under both protocols, within its time;
  ``harness``: one target's passes prepared, their peak memory and latency measured.
- ``correctness``: each provider against the adapter's reference before any timing.
- ``timing``: the protocol's timer (CUDA events, L2 flush, GPU spin), peak memory, and the source
  replica's timer (triton do_bench, every repetition kept).
- ``provenance``: code revisions of the kernel packages and of the harness.
- ``environment``: the card, its software and the ceilings measured in the session; ``launch_floor``: the
  host's launch floor (the cheapest passes under both timers) and its runtime.
- ``device``: whether CUDA is here; nvidia-smi readings (driver, maximum SM clock).
- ``guards``: what a compiled provider compiled and which Liger backend ran.
- ``records``: evidence records as ``kernelindex_pipeline.ingest.evidence`` reads them.
- ``protocol``: the published protocol's constants and document.
- ``tune``: launch-setting sweeps for KernelIndex's kernels.

The kernels are reached through their rerun adapters, each family's ``kernels/<kernel>/impl.py`` ``ADAPTER``,
whose contract is ``kernels.adapter.RerunAdapter``.
"""
