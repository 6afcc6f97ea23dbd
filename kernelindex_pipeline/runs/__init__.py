"""Runs across snapshots and what they are published as. It may import ``core``, ``warehouse`` and ``ingest``.

- ``history``: one row per run ever seen, first and last listed.
- ``manifests``: each run's canonical BenchmarkRun with its protocol and environment.
- ``ranking``: comparison groups and current ranks.
- ``published``: identifiers KernelIndex published before, and the records they lead to.
"""
