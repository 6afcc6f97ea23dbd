"""A developer tool: KernelIndex's own kernels from this tree against those of another checkout, timed side by
side on a CUDA machine.

A change that should leave the kernels alone (a restructuring, a move between modules) is checked by
timing both trees' ``kernelindex`` provider on the same inputs with the harness's interleaved repetitions
(`harness.measure_latency`), in one process, so that the session's clocks and temperature weigh on both
alike. The other tree's ``kernels`` package is loaded as ``baseline_kernels`` (its own imports renamed); its
adapters may be ``impl`` modules' ``ADAPTER`` or, in older trees, the modules themselves.

    python -m tools.compare_trees --baseline OTHER_CHECKOUT --out compare.json

Each workload and pass is timed ``--rounds`` times; the report gives per pass the ratio of this tree's
median to the baseline's, the median of the rounds and their range.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

OWN = "kernelindex"
BASELINE = "kernelindex@baseline"


def load_baseline_kernels(checkout: Path, into: Path) -> str:
    """Copy ``checkout/kernels`` to ``into/baseline_kernels`` with its imports of ``kernels`` renamed, and
    put ``into`` on the import path; returns the package name."""
    target = into / "baseline_kernels"
    shutil.copytree(checkout / "kernels", target)
    for path in target.rglob("*.py"):
        text = path.read_text()
        path.write_text(re.sub(r"\b(from|import) kernels\b", r"\1 baseline_kernels",
                               re.sub(r"\bkernels\.", "baseline_kernels.", text)))
    sys.path.insert(0, str(into))
    return "baseline_kernels"


class SideBySide:
    """An adapter whose ``kernelindex`` provider is this tree's and ``kernelindex@baseline`` the other's,
    both on this tree's inputs."""

    def __init__(self, own, baseline):
        self.own, self.baseline = own, baseline

    def __getattr__(self, name):
        """Everything else the harness asks of an adapter (its outputs, leaves, how its backward treats its
        graph) is this tree's."""
        return getattr(self.own, name)

    def make_inputs(self, params, dtype, seed, device):
        return self.own.make_inputs(params, dtype, seed, device)

    def build(self, provider, inputs, params):
        return (self.baseline if provider == BASELINE else self.own).build(OWN, inputs, params)


def compare(baseline_package: str, kernels: list[str], rounds: int) -> list[dict]:
    from kernels.adapter import load_adapter
    from kernelindex_pipeline.gpu.harness import measure_latency
    from kernelindex_pipeline.gpu.targets import targets_named

    rows = []
    for target in targets_named("all", kernels):
        own = load_adapter(target["kernel"])
        module = importlib.import_module(f"{baseline_package}.{target['kernel']}.impl")
        baseline = getattr(module, "ADAPTER", module)
        adapter = SideBySide(own, baseline)
        ratios: dict[str, list[float]] = {mode: [] for mode in target["modes"]}
        medians: dict[str, list[tuple[int, int]]] = {mode: [] for mode in target["modes"]}
        for _ in range(rounds):
            measured = measure_latency(adapter, target, [OWN, BASELINE])
            for mode in target["modes"]:
                mine, theirs = measured[OWN][(mode, "latency")], measured[BASELINE][(mode, "latency")]
                ratios[mode].append(mine["median"] / theirs["median"])
                medians[mode].append((mine["median"], theirs["median"]))
        for mode in target["modes"]:
            rows.append({"kernel": target["kernel"], "params": target["params"], "dtype": target["dtype"],
                         "mode": mode, "ratio_median": statistics.median(ratios[mode]),
                         "ratio_min": min(ratios[mode]), "ratio_max": max(ratios[mode]),
                         "medians_ns": medians[mode]})
            print(f"{target['kernel']:12} {json.dumps(target['params']):60} {mode:8} "
                  f"{rows[-1]['ratio_median']:.4f} [{rows[-1]['ratio_min']:.4f}-{rows[-1]['ratio_max']:.4f}]",
                  flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True, help="another checkout of this repository")
    ap.add_argument("--out", type=Path, required=True, help="report to write (JSON)")
    ap.add_argument("--kernels", nargs="*", default=None, help="default: every kernel with a kernelindex provider")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    import kernels as families
    from kernels.adapter import load_adapter

    kernels = args.kernels or [k for k in families.FAMILIES if OWN in load_adapter(k).PROVIDERS]
    with tempfile.TemporaryDirectory() as scratch:
        rows = compare(load_baseline_kernels(args.baseline, Path(scratch)), kernels, args.rounds)
    args.out.write_text(json.dumps({"kernels": kernels, "rounds": args.rounds, "passes": rows}, indent=1))
    ratios = [r["ratio_median"] for r in rows]
    print(f"{len(rows)} passes; this tree / baseline: median {statistics.median(ratios):.4f}, "
          f"range {min(ratios):.4f}-{max(ratios):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
