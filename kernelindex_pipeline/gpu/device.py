"""The CUDA device at hand: whether there is one, and what torch does not say of it (driver version, SM clock ceiling)."""

from __future__ import annotations

import functools
import subprocess

NO_CUDA_MESSAGE = "kernelindex rerun: no CUDA device available here; nothing was measured and nothing was written"

# The maximum SM clock of the H200s the committed evidence was measured on (nvidia-smi clocks.max.sm,
# 1980 MHz), used only where nvidia-smi cannot be asked.
FALLBACK_MAX_SM_CLOCK_HZ = 1.98e9


def nvidia_smi(field: str) -> str | None:
    """One ``nvidia-smi --query-gpu`` field of the first GPU, or None where nvidia-smi cannot answer."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0].strip() or None
    except Exception:  # noqa: BLE001 - no nvidia-smi, no GPU, or an unexpected answer
        return None


@functools.cache
def max_sm_clock_hz() -> float:
    """The GPU's maximum SM clock, the rate ``torch.cuda._sleep`` cycles pass at their fastest (so a spin
    of N cycles lasts at least N / this many seconds, whatever clock the card runs at)."""
    reading = nvidia_smi("clocks.max.sm")
    try:
        return float(reading) * 1e6
    except (TypeError, ValueError):
        return FALLBACK_MAX_SM_CLOCK_HZ


def cuda_available() -> bool:
    try:
        import torch
    except Exception:  # noqa: BLE001 - no usable torch means no CUDA
        return False
    return bool(torch.cuda.is_available())
