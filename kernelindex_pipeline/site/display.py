"""How values read on the site: measured quantities in the unit a reader expects, workload parameters in
the kernel's display order."""

from __future__ import annotations

import re

import kernels

TIME_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1, "ns"))
BYTE_UNITS = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B"))


def scale(value: float, unit: str) -> tuple[float, str]:
    """(divisor, name) of the largest display unit that `value` (in ns, bytes or another unit) reaches."""
    scales = TIME_UNITS if unit == "ns" else BYTE_UNITS if unit == "bytes" else ((1, unit),)
    return next(((d, n) for d, n in scales if abs(value) >= d), scales[-1])


def quantity(value, unit: str, sep: str = " ") -> str:
    """153632 ns -> '153.6 µs'; 144213211 ns -> '144.2 ms'; bytes in binary units."""
    if value is None:
        return "—"
    divisor, name = scale(value, unit)
    scaled = value / divisor
    text = f"{scaled:.1f}" if abs(scaled) >= 100 else f"{scaled:.4g}"
    return f"{text}{sep}{name}"


def ordered_params(params: dict) -> list[tuple[str, object]]:
    order = {name: i for i, name in enumerate(kernels.DISPLAY_ORDER)}
    return [(n, params[n]) for n in sorted(params, key=lambda n: (order.get(n, len(order)), n))]


def natural_key(text: str) -> tuple:
    """`text` ordered by its numbers' values: hidden1024 < hidden2048 < hidden10240."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part)


def ratio_interval(ratio, low, high) -> str:
    """A ratio with its 95% interval, or a dash without one."""
    return "—" if ratio is None or low is None else f"{ratio:.3f} [{low:.3f}, {high:.3f}]"


def plain(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def params_display(params: dict, dtype: str | None) -> str:
    """'seq = 2048 · hidden = 2048 · q_heads = 32 · kv_heads = 8 · bf16'."""
    parts = [f"{n} = {plain(v)}" for n, v in ordered_params(params)]
    return " · ".join(parts + ([dtype] if dtype else []))


def workload_display(definition: dict | None, fallback: str) -> str:
    """A workload definition's parameters and dtype, or `fallback` without a definition."""
    if not definition:
        return fallback
    spec = definition["spec"]
    return params_display(spec.get("parameters", {}), spec.get("dtype"))
