"""What a rerun target is, without the warehouse: its tensors' dtype and bytes, the Liger backend its providers
need (``PROVIDER_TAGS``, ``session_slice``), and the targets file a session reads and leaves."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import kernels


@dataclass(frozen=True)
class BackendTag:
    """A source provider that is an adapter's provider run on one of Liger-Kernel's backends."""

    provider: str  # the adapter provider it renames
    liger_impl: str  # LIGER_KERNEL_IMPL of the session that measures it; "" for the default (Triton) backend
    backend: str  # the backend's name, for labels


# Liger-Kernel's comparison scripts (benchmark/scripts/run_cutile_compare.py, run_cutedsl_compare.py) run each
# benchmark once per backend, selected by LIGER_KERNEL_IMPL, and rename its ``liger`` provider by
# LIGER_BENCH_PROVIDER_TAG (benchmark/scripts/utils.py). Liger reads the variable once, at import, so a rerun
# session measures one backend's tags (``session_slice``); its records share the evidence file of the others.
PROVIDER_TAGS = {
    "liger_triton": BackendTag("liger", "", "Triton"),
    "liger_cutile": BackendTag("liger", "cutile", "cuTile"),
    "liger_cutedsl": BackendTag("liger", "cutedsl", "CuTe DSL"),
}


def tagged(provider: str, known) -> bool:
    tag = PROVIDER_TAGS.get(provider)
    return tag is not None and tag.provider in known


def provider_liger_impl(provider: str) -> str:
    """The LIGER_KERNEL_IMPL a session needs to measure ``provider``: "" unless it is a backend tag."""
    tag = PROVIDER_TAGS.get(provider)
    return tag.liger_impl if tag else ""


def session_slice(targets: list[dict], liger_impl: str) -> list[dict]:
    """``targets`` cut to the providers a session whose Liger backend is ``liger_impl`` measures; targets
    left with none are dropped."""
    sliced = []
    for t in targets:
        providers = [p for p in t["providers"] if provider_liger_impl(p) == liger_impl]
        if providers:
            sliced.append({**t, "providers": providers})
    return sliced


# The dtype a source that states none measured in: Liger's loss scripts draw float32 tensors without naming
# a dtype. The records keep the source's (absent) dtype, so they pair with the source's workloads.
def tensor_dtype(target: dict) -> str:
    """The dtype a target's tensors are built in: its workload's, or where the source's runs state none, the
    one the source's script builds them in (`KernelSpec.script_dtype`)."""
    return target.get("tensor_dtype") or target["dtype"] or kernels.lookup(target["kernel"]).script_dtype


def input_bytes(kernel: str, params: dict, dtype: str) -> int | None:
    """Bytes of a workload's input tensors, from ``kernels.lookup(kernel).rerun_tensors``; None if unknown."""
    tensors = kernels.lookup(kernel).rerun_tensors(params, dtype)
    if tensors is None:
        return None
    total = 0
    for t in tensors:
        n = 1
        for d in t["shape"]:
            n *= d
        total += n * kernels.DTYPE_BYTES.get(t["dtype"], 4)
    return total


def write_targets(path: Path, targets: list[dict]) -> None:
    Path(path).write_text(json.dumps(targets, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def read_targets(path: Path) -> list[dict]:
    return json.loads(Path(path).read_text(encoding="utf-8"))
