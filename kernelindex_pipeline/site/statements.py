"""Verdicts as in-toto statements: one Statement v1 per decided claim and protocol, which a paper, a
dashboard or another registry can cite and verify on its own (docs/statements.md).

`subject`: the two source runs and the two rerun runs, named `runs/<run id>` with their sha256 run
digests as their manifests give them; `predicateType`: PREDICATE_TYPE; `predicate`: the claim, protocol,
verdict, rerun ratio and interval, thresholds, samples, the evidence file's sha256 and the rerun
environment's digest. A statement's bytes are its RFC 8785 canonical JSON, as for the manifests. With a
signing key (an Ed25519 private key in a PEM file), each is also wrapped in a DSSE envelope, signed with
securesystemslib. Statements travel bundled per kernel as JSON Lines (`<kernel>.intoto.jsonl`, the form the
in-toto tooling reads), one statement, or its envelope, a line in id order.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from pathlib import Path

from kernelindex_pipeline.verdicts import rule
from kernelindex_pipeline.core.identity import canonical_json

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://kernelindex.dev/predicates/claim-verdict/v1alpha1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
DECIDED = (rule.HELD, rule.REVERSED, rule.INDISTINGUISHABLE)
# Columns a claim check may carry beyond its verdict, copied into the predicate where a home has them.
OPTIONAL = {"claim_type": "claimType", "reason_code": "reasonCode", "source_artifact": "sourceArtifact",
            "card_match": "cardMatch"}

# Each decided claim of a table of claim checks with the digests its statement names.
STATEMENTS_SQL = """
SELECT c.*, ma.run_digest AS a_run_digest, mb.run_digest AS b_run_digest, ra.run_digest AS rerun_a_run_digest,
    rb.run_digest AS rerun_b_run_digest, e.environment_digest AS rerun_environment_digest, f.sha256 AS evidence_sha256
FROM {table} c
JOIN run_manifests ma ON ma.run_id = c.a_run_id JOIN run_manifests mb ON mb.run_id = c.b_run_id
JOIN run_manifests ra ON ra.run_id = c.rerun_a_run_id JOIN run_manifests rb ON rb.run_id = c.rerun_b_run_id
JOIN runs e ON e.run_id = c.rerun_a_run_id
LEFT JOIN evidence_files f ON f.file = c.evidence_file
WHERE c.verdict IN ({decided})
ORDER BY c.comparison_key, c.a_run_id, c.b_run_id, c.protocol
""".replace("{decided}", ", ".join(f"'{v}'" for v in DECIDED))


BUNDLE_SUFFIX = ".intoto.jsonl"
# The decided claims of a claim-check table, as STATEMENTS_SQL selects them: what bundle positions are made of.
STATEMENT_KEYS_SQL = "SELECT kernel, comparison_key, a_run_id, b_run_id, protocol FROM (" + STATEMENTS_SQL + ")"


def statement_id(check: dict) -> str:
    """A claim check's statement id: stable for the claim (its group, runs and protocol) while its verdict
    changes."""
    claim = "\n".join(str(check[k]) for k in ("comparison_key", "a_run_id", "b_run_id", "protocol"))
    return hashlib.sha256(claim.encode()).hexdigest()[:16]


def bundle_name(kernel: str) -> str:
    """The bundle holding a kernel's statements, one JSON object (a statement, or its DSSE envelope) a line."""
    return f"{kernel}{BUNDLE_SUFFIX}"


def statement_positions(con, tables: list[str]) -> dict[str, tuple[str, int]]:
    """{statement id: (bundle, line)} of every decided claim of ``tables`` (the first table's claim where two
    name one): each kernel's statements in id order, lines counted from 1, as the intoto export writes them."""
    by_kernel: dict[str, set[str]] = {}
    for table in tables:
        for kernel, *key in con.execute(STATEMENT_KEYS_SQL.format(table=table)).fetchall():
            by_kernel.setdefault(kernel, set()).add(statement_id(dict(zip(
                ("comparison_key", "a_run_id", "b_run_id", "protocol"), key))))
    return {sid: (bundle_name(kernel), line) for kernel, ids in by_kernel.items()
            for line, sid in enumerate(sorted(ids), start=1)}


def _hex(digest: str) -> str:
    return digest.removeprefix("sha256:")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@functools.cache
def _thresholds() -> dict:
    """The verdict rule's thresholds, as every statement names them."""
    return {_camel(k): v for k, v in dataclasses.asdict(rule.DEFAULT_THRESHOLDS).items()}


def statement(check: dict) -> dict:
    """The in-toto Statement v1 of a decided claim check (a row of STATEMENTS_SQL)."""
    subject = [{"name": f"runs/{check[f'{side}_run_id']}", "digest": {"sha256": _hex(check[f"{side}_run_digest"])}}
               for side in ("a", "b", "rerun_a", "rerun_b")]
    claim = {
        "comparisonKey": check["comparison_key"], "kernel": check["kernel"], "operationMode": check["operation_mode"],
        "metric": check["metric"], "workload": check["workload_slug"], "sourceGpu": check["source_gpu"],
        "order": check["source_order"], "sourceRatio": check["source_ratio"],
        **{side: {"implementation": check[f"{side}_implementation"], "provider": check[f"{side}_provider"],
                  "runId": check[f"{side}_run_id"], "median": check[f"source_{side}_median"]} for side in ("a", "b")},
    }
    if check.get("listed_at") is not None:
        listed = check["listed_at"]
        claim["listedAt"] = listed.isoformat() if hasattr(listed, "isoformat") else str(listed)
    predicate = {
        "claim": claim, "protocol": check["protocol"], "verdict": check["verdict"], "reason": check["reason"],
        "hostBound": check["host_bound"],
        "rerun": {"gpu": check["rerun_gpu"], "ratio": check["rerun_ratio"],
                  "interval": {"low": check["ci_low"], "high": check["ci_high"],
                               "confidence": rule.DEFAULT_THRESHOLDS.confidence},
                  "samples": {"a": check["n_a"], "b": check["n_b"]},
                  "runIds": {"a": check["rerun_a_run_id"], "b": check["rerun_b_run_id"]},
                  "environmentDigest": check["rerun_environment_digest"]},
        "thresholds": dict(_thresholds()),
        "evidence": {"file": check["evidence_file"], "sha256": check["evidence_sha256"]},
    }
    if check.get("sessions") is not None:
        predicate["rerun"]["sessions"] = check["sessions"]
    predicate.update({camel: check[name] for name, camel in OPTIONAL.items() if check.get(name) is not None})
    return {"_type": STATEMENT_TYPE, "subject": subject, "predicateType": PREDICATE_TYPE, "predicate": predicate}


def statement_bytes(check: dict) -> bytes:
    """A statement's canonical bytes (RFC 8785)."""
    return canonical_json(statement(check)).encode("utf-8")


def load_signer(key_file: str | Path):
    """A securesystemslib signer for an Ed25519 private key in a PEM file (PKCS #8, unencrypted)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from securesystemslib.signer import CryptoSigner

    key = load_pem_private_key(Path(key_file).read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{key_file} is not an Ed25519 private key")
    return CryptoSigner(key)


def envelope(payload: bytes, signer) -> bytes:
    """The DSSE envelope of a statement's bytes, signed by `signer`, as canonical JSON."""
    from securesystemslib.dsse import Envelope

    signed = Envelope(payload=payload, payload_type=PAYLOAD_TYPE, signatures={})
    signed.sign(signer)
    return canonical_json(signed.to_dict()).encode("utf-8")
