"""KernelIndex-controlled evidence: rerun records (gzipped JSONL) -> controlled runs, and reproductions."""

from __future__ import annotations

import functools
import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import kernels
from kernelindex_pipeline.core import catalog, reasons
from kernelindex_pipeline.core.documents import implementation_digest, workload_definition
from kernelindex_pipeline.core.identity import (Published, canonical_json, digest, manifest_name, published, run_id,
                                                 slugify)
from kernelindex_pipeline.warehouse.views import OTHER_DTYPE_RERUNS_SQL

RERUN_SOURCE = "kernelindex-rerun"
REQUIRED = ("kernel", "provider", "mode", "metric", "unit", "status", "params", "observed_at", "protocol", "environment")


class EvidenceError(ValueError):
    """An evidence record that cannot become a controlled run; the message says why."""


# What controlled_run raises on a record it refuses (its message the reason); hostile nesting raises the others.
REFUSED = (EvidenceError, AttributeError, KeyError, TypeError, ValueError)


def read_records(path: Path) -> list[tuple[dict, str]]:
    """Each record of an evidence file, with its line as committed (what `controlled_runs.record` keeps)."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [(json.loads(line), line.strip()) for line in handle if line.strip()]


# What a session measures of its machine, recorded in its environment but not part of the stack.
SESSION_MEASURED = ("ceilings", "launchFloor")


def stack_environment(environment: dict) -> dict:
    """The environment a controlled run is identified by: the stack (GPU model and form factor, driver,
    CUDA, torch, triton, liger-kernel, transformers), not what each session measures of its machine (the
    ceilings, the host's launch floor), which stays with the run; so one workload measured in several
    sessions is one comparison group."""
    spec = {k: v for k, v in environment["spec"].items() if k not in SESSION_MEASURED}
    return {**environment, "spec": spec}


@functools.lru_cache(maxsize=4096)
def _workload(kernel: str, params: str, dtype: str | None, implied: str) -> dict:
    """workload_definition of parameters given as JSON text: one per workload a batch measures, not per record."""
    return workload_definition(kernel, json.loads(params), dtype, json.loads(implied))


@functools.lru_cache(maxsize=1024)
def _published_text(text: str) -> Published:
    """A protocol or environment as published, from its JSON: one per batch, not per record."""
    return published(json.loads(text))


def controlled_run(record: dict, evidence_file: str, line: str | None = None) -> tuple[dict, Published, Published, dict]:
    """(controlled_runs row, protocol and environment as published, workload) of one rerun record (`line`: its
    JSON text, if at hand)."""
    if not isinstance(record, dict):
        raise EvidenceError("evidence record is not a JSON object")
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise EvidenceError(f"evidence record lacks {', '.join(missing)}")
    not_objects = [k for k in ("params", "protocol", "environment") if not isinstance(record[k], dict)]
    if not_objects:
        raise EvidenceError(f"evidence record's {', '.join(not_objects)} not a JSON object")
    not_numbers = [k for k in ("median", "p20", "p80") if type(record.get(k)) not in (type(None), int, float)]
    if not_numbers:
        raise EvidenceError(f"evidence record's {', '.join(not_numbers)} not a number")
    correctness = None if record.get("correctness") is None else json.dumps(record["correctness"])
    _check_manifest_numbers(record, correctness)
    if "\\ud" in (json.dumps(record) if line is None else line).lower():  # a UTF-16 surrogate, paired or not
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise EvidenceError(f"evidence record holds text that is not Unicode: {exc.reason}") from exc
    kernel, provider, mode, metric = (record[k] for k in ("kernel", "provider", "mode", "metric"))
    protocol = _published_text(json.dumps(record["protocol"], sort_keys=True))
    environment = _published_text(json.dumps(stack_environment(record["environment"]), sort_keys=True))
    hardware = environment.obj["spec"]["hardware"]
    workload = _workload(kernel, json.dumps(record["params"], sort_keys=True), record.get("dtype"),
                         json.dumps(record.get("implied") or {}, sort_keys=True))
    gpu_slug = slugify(catalog.gpu_label(hardware["product"], hardware.get("formFactor")))
    observed = datetime.fromisoformat(record["observed_at"].replace("Z", "+00:00")).astimezone(timezone.utc)
    external_id = "/".join([kernel, mode, provider, gpu_slug, workload["workload_slug"], observed.strftime("%Y-%m-%d-%H-%M-%S")])
    family = protocol.obj["spec"]["comparability"]["family"]
    if metric == "peak_memory":
        external_id += "/peak_memory"
    if family == catalog.SOURCE_REPLICA_FAMILY:  # the same pass, timed by the source's own harness
        external_id += "/source-replica"
    impl = catalog.implementation(provider)
    # A comparison group keeps its key: it names the environment and workload by their v1alpha1 digests.
    comparison = {"environment": environment.v1alpha1_digest, "family": family, "kernel": kernel, "metric": metric,
                  "mode": mode, "workload": workload["digest_v1alpha1"] or workload["workload_digest"]}
    title = f"{kernels.lookup(kernel).title} · {provider} · {mode}" + (" · peak memory" if metric == "peak_memory" else "")
    row = {
        "run_id": run_id(RERUN_SOURCE, external_id), "external_id": external_id,
        "name": manifest_name("kernelindex", external_id), "title": title, "kernel": kernel,
        "operation_mode": mode, "provider": provider, "implementation": impl.name, "project": impl.project,
        "metric": metric, "unit": record["unit"], "median_value": record.get("median"), "p20_value": record.get("p20"),
        "p80_value": record.get("p80"), "gpu": hardware["product"], "form_factor": hardware.get("formFactor"),
        "architecture": hardware.get("architecture"), "workload_slug": workload["workload_slug"],
        "observed_at": observed.replace(tzinfo=None), "evidence_level": catalog.CONTROLLED, "source": RERUN_SOURCE,
        "status": record["status"], "comparison_key": digest(comparison), "protocol_digest": protocol.digest,
        "workload_digest": workload["workload_digest"], "environment_digest": environment.digest,
        "implementation_digest": implementation_digest(provider), "evidence_file": evidence_file,
        "record": line or json.dumps(record, sort_keys=True), "family": family, "samples": _samples(record.get("samples")),
        "status_reason": record.get("reason"),
        "status_code": record.get("reason_code") or reasons.legacy_code(record["status"], record.get("reason")),
        # One rerun process; files written before records named theirs hold one session each.
        "session": record.get("session") or evidence_file,
        "liger_version": environment.obj["spec"].get("software", {}).get("ligerKernel"),
        # Records from before records stated it built their workload's dtype, else float32.
        "tensor_dtype": record.get("tensor_dtype") or record.get("dtype") or "fp32",
        # What the claims read of each record, read out of it once here rather than at every publication.
        "compile_recorded": record.get("compile") is not None,
        "launch_floor_ns": _launch_floor_ns(record["environment"]),
        "correctness": correctness,
        "code_revision": _text((record.get("implementation") or {}).get("code_revision")),
    }
    return row, protocol, environment, workload


# An integer of 16 digits or more, which a double may not hold exactly (or such digits in a string).
_LONG_INTEGER = re.compile(r"(?<![0-9.eE])-?[0-9]{16}")
# The last ceilings whose every number is below 1e15 (no 16-digit run, no "e+" in their json.dumps text): a
# session's records share theirs, and ceilings equal to them (==, which takes 2.0 for 2) hold numbers as small.
_WRITABLE_CEILINGS: list = [None]


def _check_manifest_numbers(record: dict, correctness: str | None) -> None:
    """Refuse a record whose manifest could not be written: its correctness, achieved figures or ceilings
    (nested JSON its BenchmarkRun carries) holding an integer that RFC 8785, writing numbers as doubles,
    refuses."""
    ceilings = (record["environment"].get("spec") or {}).get("ceilings")
    parts = {"correctness": (record.get("correctness"), correctness),
             "achieved": (record.get("achieved"), json.dumps(record.get("achieved")))}
    if ceilings is not None and ceilings != _WRITABLE_CEILINGS[0]:
        parts["ceilings"] = (ceilings, json.dumps(ceilings))
    for key, (value, text) in parts.items():
        if text and _LONG_INTEGER.search(text):
            try:
                canonical_json(value)
            except ValueError as exc:
                raise EvidenceError(f"evidence record's {key} cannot be written as RFC 8785 JSON: {exc}") from exc
    if "ceilings" in parts and not _LONG_INTEGER.search(parts["ceilings"][1]) and "e+" not in parts["ceilings"][1]:
        _WRITABLE_CEILINGS[0] = ceilings


def _launch_floor_ns(environment: dict) -> float | None:
    """The session's launch floor (an empty Triton kernel under do_bench, ns) its environment records."""
    floor = ((environment.get("spec") or {}).get("launchFloor") or {}).get("emptyTritonKernel") or {}
    try:
        return float(floor["replicaMedianNs"])
    except (KeyError, TypeError, ValueError):
        return None


def _text(value) -> str | None:
    return None if value is None else str(value)


@dataclass
class EvidenceFile:
    """What one evidence file gives: controlled runs, their protocols and environments (as published) and
    workloads (by digest), and the records refused, each with its reason."""

    runs: list[dict] = field(default_factory=list)
    protocols: dict[str, Published] = field(default_factory=dict)
    environments: dict[str, Published] = field(default_factory=dict)
    workloads: dict[str, dict] = field(default_factory=dict)
    refused: list[dict] = field(default_factory=list)


def _samples(value) -> list[float] | None:
    """The per-repetition samples a claim check compares (None unless a list of numbers)."""
    if not isinstance(value, list) or not set(map(type, value)) <= {int, float}:  # bool is not int here
        return None
    return list(map(float, value))


def load_evidence(paths: list[Path]) -> Iterator[EvidenceFile]:
    """Each evidence file in turn (so memory follows the largest file); a run id listed twice in a file
    keeps its last record."""
    for path in paths:
        found = EvidenceFile()
        try:
            records = read_records(path)
        except (OSError, EOFError, ValueError) as exc:
            found.refused.append({"source": path.name, "line_number": 0, "reason": f"unreadable evidence file: {exc}",
                                  "raw_line": ""})
            yield found
            continue
        runs = {}
        for n, (record, line) in enumerate(records, start=1):
            try:
                row, protocol, environment, workload = controlled_run(record, path.name, line)
            except REFUSED as exc:
                found.refused.append({"source": path.name, "line_number": n,
                                      "reason": f"evidence record refused: {exc}", "raw_line": json.dumps(record)[:2000]})
                continue
            runs[row["run_id"]] = row
            found.protocols[row["protocol_digest"]] = protocol
            found.environments[row["environment_digest"]] = environment
            found.workloads[workload["workload_digest"]] = workload
        found.runs = list(runs.values())
        yield found


# Each controlled run against the source-native runs of the same kernel, pass, metric, workload and
# implementation; "order held" asks whether the controlled group orders those implementations as the
# source's group (same source GPU) did. Only pairs with a group in `scope_groups` (see runs/ranking.py).
REPRODUCTIONS_SQL = """
WITH controlled AS (
    -- a rerun of another dtype than the source's script builds measured another workload
    SELECT r.* FROM runs r JOIN ranks USING (run_id) WHERE r.evidence_level = '{controlled}'
        AND r.run_id NOT IN (SELECT run_id FROM ({other_dtype_reruns}))
), source AS (
    SELECT r.*, k.rank FROM runs r JOIN ranks k USING (run_id) WHERE r.evidence_level = '{source_native}'
), pairs AS (
    SELECT c.run_id AS controlled_run_id, s.run_id AS source_run_id, c.kernel, c.operation_mode, c.metric,
        c.provider, c.workload_slug, {gpu_s} AS source_gpu,
        c.median_value AS controlled_median, s.median_value AS source_median,
        c.median_value::DOUBLE / s.median_value AS ratio_of_medians, c.comparison_key AS controlled_key,
        s.comparison_key AS source_key
    FROM controlled c JOIN source s
      ON s.kernel = c.kernel AND s.operation_mode = c.operation_mode AND s.metric = c.metric
     AND s.workload_digest = c.workload_digest AND s.provider = c.provider
    WHERE c.comparison_key IN (SELECT comparison_key FROM scope_groups)
       OR s.comparison_key IN (SELECT comparison_key FROM scope_groups)
), orders AS (
    SELECT p.controlled_run_id, p.source_run_id,
        (SELECT string_agg(s2.provider, ' < ' ORDER BY s2.median_value, s2.provider)
           FROM source s2 WHERE s2.comparison_key = p.source_key
            AND s2.provider IN (SELECT c2.provider FROM controlled c2 WHERE c2.comparison_key = p.controlled_key)) AS source_order,
        (SELECT string_agg(c2.provider, ' < ' ORDER BY c2.median_value, c2.provider)
           FROM controlled c2 WHERE c2.comparison_key = p.controlled_key
            AND c2.provider IN (SELECT s2.provider FROM source s2 WHERE s2.comparison_key = p.source_key)) AS controlled_order
    FROM pairs p
)
SELECT p.* EXCLUDE (controlled_key, source_key), o.source_order, o.controlled_order,
    o.source_order = o.controlled_order AS order_held
FROM pairs p JOIN orders o USING (controlled_run_id, source_run_id)
""".format(other_dtype_reruns=OTHER_DTYPE_RERUNS_SQL, source_native=catalog.SOURCE_NATIVE,
           controlled=catalog.CONTROLLED, gpu_s=catalog.gpu_label_sql("s"))
