"""Identifiers KernelIndex has published that are not a record's identifiers now, and the record each leads
to (`published_identifiers`, documented in docs/warehouse.md).

Two kinds: the identifiers on the seed record pages, published under earlier identity rules (a run id of 8
hex digits, run digests and comparison keys shown as prefixes, workload and implementation digests of
definitions no longer published), each mapped to the run now holding that record; and the v1alpha1
digest of every object now published as v1alpha2 (`digest_aliases`). A seed run also keeps the date its
page was first published (`publications`).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from kernelindex_pipeline.core import catalog
from kernelindex_pipeline.core.identity import run_id


@dataclass(frozen=True)
class PublishedRecord:
    """A record page as it was published: its run id and digests as the page shows them (prefixes without
    the ellipsis), the run it is now (by source and external id) and the day it was published."""

    run_id: str
    external_id: str
    published_on: datetime.date
    run_digest: str
    comparison_key: str
    workload_digest: str
    implementation_digest: str
    source: str = catalog.SOURCE

    @property
    def current_run_id(self) -> str:
        return run_id(self.source, self.external_id)

    def identifiers(self) -> dict[str, str]:
        """The page's identifiers by kind (the kind names the current record's column that replaces it)."""
        return {"run_id": self.run_id, "run_digest": self.run_digest, "comparison_key": self.comparison_key,
                "workload_digest": self.workload_digest, "implementation_digest": self.implementation_digest}


SEED_RECORDS = (
    PublishedRecord(
        run_id="01a0202b",
        external_id="llama4_rope/backward/liger/nvidia-h100-80gb-hbm3/hidden2048-kv_heads8-q_heads32-seq2048-bf16/"
                    "2025-08-07-21-42-04",
        published_on=datetime.date(2026, 8, 20),
        run_digest="sha256:80cfc402d26261a5d632668",
        comparison_key="sha256:1b718ea6dd955bf0",
        workload_digest="sha256:798de97f7d3e2c54708622ecedfa7f7412ed958aeb61e1d078cdc6d982a6fbdf",
        implementation_digest="sha256:7b16e7caa07229eb63274c52969e9742bd849258f08f13b57ebaa55928740b6d"),
    PublishedRecord(
        run_id="01a016ad",
        external_id="geglu/backward/huggingface/nvidia-a100-sxm4-80gb/batch8-hidden4096-intermediate11008-seq8192-bf16/"
                    "2024-09-03-15-38-42",
        published_on=datetime.date(2026, 8, 18),
        run_digest="sha256:e1ef2b15599dbe0f4c6ade8",
        comparison_key="sha256:7fb57deab067dea3",
        workload_digest="sha256:5b20a15751c2c1eeedb97d0dd109d477ce3ae84008ad7f35438df85228123abe",
        implementation_digest="sha256:d12c674a0643ab8fef38f7997fd47abbc4f9018f1da04629789cd5fd11fad7b4"),
)

# `digest_aliases.kind` -> the kind of identifier its v1alpha1 digest is.
ALIAS_KINDS = {"BenchmarkRun": "run_digest", "BenchmarkProtocol": "protocol_digest",
               "ExecutionEnvironment": "environment_digest", "Implementation": "implementation_digest",
               "WorkloadDefinition": "workload_digest"}
SEED_RECORD, V1ALPHA1 = "seed record", "v1alpha1"


def seed_rows() -> list[dict]:
    """One row per identifier on the seed pages: identifier, kind, the current run id, the day published."""
    return [{"identifier": identifier, "kind": kind, "run_id": record.current_run_id, "published_on": record.published_on}
            for record in SEED_RECORDS for kind, identifier in record.identifiers().items()]


# The table's rows, from `seed_identifiers` (seed_rows): the seed pages' identifiers, each with the current
# identifier of its kind, and the v1alpha1 digest of each v1alpha2 object (a run's with the day, UTC, the run
# was first published).
PUBLISHED_IDENTIFIERS_SQL = f"""
SELECT s.identifier, s.kind,
    CASE s.kind WHEN 'run_id' THEN r.run_id WHEN 'run_digest' THEN m.run_digest
        WHEN 'comparison_key' THEN r.comparison_key WHEN 'workload_digest' THEN r.workload_digest
        WHEN 'implementation_digest' THEN r.implementation_digest END AS current,
    r.run_id, s.published_on AS published_at, '{SEED_RECORD}' AS origin
FROM seed_identifiers s JOIN runs r USING (run_id) JOIN run_manifests m USING (run_id)
UNION ALL
SELECT a.v1alpha1_digest, k.kind, a.digest, a.run_id, timezone('UTC', p.published_at)::DATE, '{V1ALPHA1}'
FROM digest_aliases a
JOIN (VALUES {", ".join(f"('{a}', '{k}')" for a, k in ALIAS_KINDS.items())}) k(alias_kind, kind) ON k.alias_kind = a.kind
LEFT JOIN publications p USING (run_id)
"""
