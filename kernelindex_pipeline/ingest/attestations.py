"""Attestations: a reader's reproduction of a run, or a note on it, as a file that `kernelindex ingest`
validates into the `attestations` table (the format: docs/attestations.md).

An attestation never changes a run's evidence level or rank; only a KernelIndex-controlled rerun does.
A file that fails validation is refused whole with its reason (a `quarantine` row).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from kernelindex_pipeline.core.identity import API_VERSION

KIND = "Attestation"
TYPES = ("reproduction", "note")
# A reproduction's figures, converted to the unit its metric is stored in (`runs.unit`).
UNITS = {"latency": {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9},
         "peak_memory": {"bytes": 1.0, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}}
MAX_FILE_BYTES = 64 * 1024
MAX_TEXT = 4000
# Latencies under a nanosecond or over an hour, memory over 100 TiB: a unit mistake, not a measurement.
PLAUSIBLE = {"latency": (1.0, 3.6e12), "peak_memory": (1.0, 100 * 2.0**40)}

SCHEMA = pa.schema([
    ("attestation_id", pa.string()), ("run_id", pa.string()), ("type", pa.string()), ("author", pa.string()),
    ("attested_on", pa.date32()), ("note", pa.string()), ("metric", pa.string()), ("median_value", pa.float64()),
    ("p20_value", pa.float64()), ("p80_value", pa.float64()), ("environment", pa.string()), ("command", pa.string()),
    ("file", pa.string())])
QUARANTINE_SCHEMA = pa.schema([("file", pa.string()), ("sha256", pa.string()), ("reason", pa.string()),
                               ("raw", pa.string())])


class RunLookup(Protocol):
    """Run id or run digest -> (run id, metric); None for neither (a dict of them qualifies)."""

    def get(self, target: str, /) -> tuple[str, str] | None: ...


class Refused(ValueError):
    """An attestation file that is not a valid attestation; the message is the reason."""


def _text(document: dict, field: str, required: bool = True) -> str | None:
    value = document.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise Refused(f"'{field}' must be a non-empty string")
    if len(value) > MAX_TEXT:
        raise Refused(f"'{field}' is longer than {MAX_TEXT} characters")
    return value.strip()


def _figures(reproduction: dict, metric: str) -> dict[str, float]:
    unit = reproduction.get("unit")
    scale = UNITS[metric].get(unit) if isinstance(unit, str) else None
    if scale is None:
        raise Refused(f"reproduction unit {unit!r} is not one of {', '.join(UNITS[metric])} for {metric}")
    lo, hi = PLAUSIBLE[metric]
    figures = {}
    for name in ("median", "p20", "p80"):
        value = reproduction.get(name)
        if value is None and name != "median":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise Refused(f"reproduction {name} must be a finite number, not {json.dumps(value)[:40]}")
        stored = value * scale
        if not lo <= stored <= hi:
            raise Refused(f"reproduction {name} {value} {unit} is outside the plausible range for {metric}")
        figures[name] = stored
    if not figures.get("p20", figures["median"]) <= figures["median"] <= figures.get("p80", figures["median"]):
        raise Refused("reproduction quantiles are out of order (p20 <= median <= p80)")
    return figures


def validate(document, runs: RunLookup, today: dt.date) -> dict:
    """One attestation row from a parsed file; `runs` maps run id and run digest to (run id, metric)."""
    if not isinstance(document, dict):
        raise Refused("not a JSON object")
    if document.get("apiVersion") != API_VERSION or document.get("kind") != KIND:
        raise Refused(f"apiVersion and kind must be {API_VERSION!r} and {KIND!r}")
    target = document.get("run")
    found = runs.get(target) if isinstance(target, str) else None
    if found is None:
        raise Refused(f"run {json.dumps(target)[:80]} is not a run id or run digest in this registry")
    run_id, metric = found
    kind = document.get("type")
    if kind not in TYPES:
        raise Refused(f"type must be one of {', '.join(TYPES)}")
    author = _text(document, "author")
    try:
        attested_on = dt.date.fromisoformat(str(document.get("date")))
    except ValueError:
        raise Refused("'date' must be an ISO date (YYYY-MM-DD)") from None
    if attested_on > today:
        raise Refused(f"'date' {attested_on} is in the future")
    note = _text(document, "note", required=kind == "note")
    row = {"run_id": run_id, "type": kind, "author": author, "attested_on": attested_on, "note": note,
           "metric": None, "median_value": None, "p20_value": None, "p80_value": None, "environment": None,
           "command": None}
    if kind == "reproduction":
        reproduction = document.get("reproduction")
        if not isinstance(reproduction, dict):
            raise Refused("a reproduction needs a 'reproduction' object")
        environment = reproduction.get("environment")
        if not isinstance(environment, dict) or not isinstance(environment.get("gpu"), str):
            raise Refused("a reproduction's environment must name its 'gpu'")
        figures = _figures(reproduction, metric)
        row.update(metric=metric, median_value=figures["median"], p20_value=figures.get("p20"),
                   p80_value=figures.get("p80"), environment=json.dumps(environment, sort_keys=True),
                   command=_text(reproduction, "command", required=False))
    return row


def load_attestations(directory: Path | None, runs: RunLookup,
                      today: dt.date | None = None) -> tuple[pa.Table, pa.Table]:
    """(accepted rows, refused files) of every ``*.json`` in `directory` (none without one)."""
    today = today or dt.datetime.now(dt.timezone.utc).date()
    accepted, refused = [], []
    files = sorted(Path(directory).glob("*.json")) if directory is not None and Path(directory).is_dir() else []
    for path in files:
        data = path.read_bytes()[:MAX_FILE_BYTES + 1]
        sha = hashlib.sha256(data).hexdigest()
        try:
            if len(data) > MAX_FILE_BYTES:
                raise Refused(f"larger than {MAX_FILE_BYTES} bytes")
            try:
                document = json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
                raise Refused(f"not JSON: {exc}") from None
            row = validate(document, runs, today)
        except Refused as exc:
            refused.append({"file": path.name, "sha256": sha, "reason": str(exc),
                            "raw": data[:300].decode("utf-8", errors="replace")})
            continue
        accepted.append({**row, "attestation_id": f"sha256:{sha}", "file": path.name})
    return pa.Table.from_pylist(accepted, schema=SCHEMA), pa.Table.from_pylist(refused, schema=QUARANTINE_SCHEMA)
