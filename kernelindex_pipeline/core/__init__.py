"""The words every domain shares. It imports nothing of the pipeline.

- ``identity``: canonical JSON (RFC 8785), digests, slugs, run ids: the contract's identity rules.
- ``catalog``: reference data (GPUs, implementations, protocol families, compiled providers, the GPU label).
- ``documents``: the documents published for that reference data (WorkloadDefinition, the source's
  ExecutionEnvironment, Implementation, the source harness's BenchmarkProtocol).
- ``reasons``: why a rerun or a claim has no verdict, as codes beside their text.
"""
