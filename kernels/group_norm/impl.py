"""GroupNorm's rerun adapter: x [rows, channels, hidden], per-channel weight and bias,
``channels // channels_per_group`` groups.

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_group_norm.py``: x drawn from a normal
distribution; the layers' weight and bias (ones and zeros upstream) are drawn near those values so that
their gradients are checked against non-trivial values.
"""

from __future__ import annotations

import torch

from kernels.adapter import Adapter, Built
from kernels.providers import liger_attr, liger_label
from kernels.tensors import RERUN_BYTES, Draws, input_shapes, module_pass, per_mode

# The upstream script's extra benchmark config, used where a workload leaves them out.
CHANNELS_PER_GROUP = 4
EPS = 1e-6


def _eps(params) -> float:
    return float(params.get("eps", EPS))


def _groups(params, channels: int) -> int:
    return channels // int(params.get("channels_per_group", CHANNELS_PER_GROUP))


class GroupNorm(Adapter):
    KERNEL = "group_norm"
    OUTPUT_NAMES = ("y",)
    GRAD_INPUTS = ("x", "weight", "bias")
    REFERENCE_DTYPE = torch.float64

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        d = Draws(self.KERNEL, params, dtype, seed, device)
        return {"x": d.normal("x"), "weight": d.normal("weight", 0.1, 1.0), "bias": d.normal("bias", 0.1)}

    def reference(self, inputs, params):
        x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
        rows, channels = x.shape[0], x.shape[1]
        g = x.reshape(rows, _groups(params, channels), -1)
        mean = g.mean(-1, keepdim=True)
        var = (g - mean).pow(2).mean(-1, keepdim=True)
        y = ((g - mean) * torch.rsqrt(var + _eps(params))).reshape(x.shape)
        return (y * w[None, :, None] + b[None, :, None],)

    def _liger(self, provider, inputs, params) -> Built:
        channels = inputs["x"].shape[1]
        cls = liger_attr(inputs["x"], "group_norm", "LigerGroupNorm")
        module = cls(num_channels=channels, num_groups=_groups(params, channels), eps=_eps(params))
        return module_pass(module, inputs, ("weight", "bias"), liger_label("LigerGroupNorm", "Triton"),
                           self.OUTPUT_NAMES)

    def _torch(self, provider, inputs, params) -> Built:
        channels = inputs["x"].shape[1]
        module = torch.nn.GroupNorm(num_groups=_groups(params, channels), num_channels=channels, eps=_eps(params))
        label = f"torch.nn.GroupNorm (PyTorch {torch.__version__}), upstream's {provider} provider"
        return module_pass(module, inputs, ("weight", "bias"), label, self.OUTPUT_NAMES)

    # Upstream's "huggingface" (its first script) and "torch" (its current one) are both torch.nn.GroupNorm;
    # "liger_triton" is the cuTile comparison's name for Liger's Triton kernel.
    BUILDERS = {"liger": _liger, "liger_triton": _liger, "huggingface": _torch, "torch": _torch}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward reads x, weight, bias and writes y; backward reads dy, x, weight and writes dx, dweight,
        dbias; full reads x, weight, bias, dy once and writes y, dx, dweight, dbias. The saved per-group
        mean and rstd are not counted."""
        s = input_shapes(self.KERNEL, params)
        e = RERUN_BYTES[dtype]
        xb = s["x"][0] * s["x"][1] * s["x"][2] * e
        cb = s["weight"][0] * e
        return {"forward": 2 * xb + 2 * cb, "backward": 3 * xb + 3 * cb, "full": 4 * xb + 4 * cb}[mode]

    def flops(self, params, mode) -> int:
        """Per element of x: forward about 7 (mean, centre, square, sum, normalize, scale, shift); backward
        about 11 (the two group reductions, dx, and the weight and bias reductions)."""
        x = input_shapes(self.KERNEL, params)["x"]
        n = x[0] * x[1] * x[2]
        return per_mode(7 * n, 11 * n, mode)


ADAPTER = GroupNorm()
