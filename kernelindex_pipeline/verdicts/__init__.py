"""Claims and their verdicts. It may import ``core``, ``warehouse``, ``ingest``, ``gpu`` (the protocol's
constants) and ``runs``.

- ``rule``: the verdict of one claim from its rerun interval (thresholds, the bootstrap, parity claims).
- ``claims``: every current source claim re-checked under both protocols (``claim_checks``).
- ``listing_claims``: what a run claimed when it was first listed, re-checked (``listing_claim_checks``).
- ``history``: each claim's verdict over time (``verdict_history``).
"""
