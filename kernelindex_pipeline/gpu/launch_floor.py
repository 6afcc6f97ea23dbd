"""The host's launch floor: what the cheapest passes take on this machine, measured before a session's targets.

Two passes that do (almost) no device work, an empty Triton kernel and a one-element torch op, each timed
under both protocols' timers: the source replica's ``triton.testing.do_bench`` (host launch path included)
and KernelIndex's device time (a GPU spin queued ahead, so the interval is the card's alone). What do_bench
reports for them is the host's launch overhead as the source's harness sees it; a pass whose replica time
is near that floor is timed by our host, not by the card (``verdicts.rule.host_bound``). The host's runtime
is recorded as far as it can be seen from inside: kernel release, virtualisation, CPU model.
"""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import torch
import triton
import triton.language as tl

from kernelindex_pipeline.gpu.timing import Timed, do_bench_replica, l2_flush_buffer


@triton.jit
def _empty_kernel(x_ptr, n: tl.constexpr):
    pass


def _virtualisation() -> str:
    """``systemd-detect-virt``'s answer, else the CPU's hypervisor flag, else ``unknown``."""
    try:
        out = subprocess.run(["systemd-detect-virt"], capture_output=True, text=True, timeout=5)
        if out.stdout.strip():
            return out.stdout.strip()
    except Exception:  # noqa: BLE001 - not a systemd host
        pass
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
        return "hypervisor" if " hypervisor" in flags else "none"
    except Exception:  # noqa: BLE001 - no /proc/cpuinfo
        return "unknown"


def host_runtime() -> dict:
    cpu = "unknown"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except Exception:  # noqa: BLE001 - no /proc/cpuinfo
        pass
    return {"kernelRelease": platform.release(), "virtualisation": _virtualisation(), "cpu": cpu}


def _floor(fn, flush) -> dict:
    replica = do_bench_replica(fn, [])
    device = Timed(fn, [], flush).calibrate()
    device.run(device.n_rep)
    timed = device.stats()
    return {"replicaMedianNs": replica["median"], "replicaP20Ns": replica["p20"], "replicaP80Ns": replica["p80"],
            "deviceMedianNs": timed["median"], "deviceP20Ns": timed["p20"], "deviceP80Ns": timed["p80"],
            "hostEnqueueNs": timed["host_enqueue_ns"]}


def measure_launch_floor() -> dict:
    """The session's launch floor: {emptyTritonKernel, oneElementTorchOp: medians and spreads in ns under
    both timers, host: its runtime}."""
    x = torch.zeros(1, device="cuda")
    flush = l2_flush_buffer()
    floor = {
        "emptyTritonKernel": _floor(lambda: _empty_kernel[(1,)](x, 1), flush),
        "oneElementTorchOp": _floor(lambda: x.add_(1.0), flush),
        "host": host_runtime(),
    }
    return floor
