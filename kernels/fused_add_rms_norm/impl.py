"""Fused add + RMSNorm's rerun adapter: s = x + residual, y = s * rsqrt(mean(s^2) + eps) * weight, over x and
residual [rows, hidden]; outputs y and s.

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_fused_add_rms_norm.py``: x and residual drawn
from a normal distribution; the weight (ones upstream) drawn near one so that its gradient is checked
against non-trivial values. Both outputs take upstream gradients, as the script's backward does.
"""

from __future__ import annotations

import torch

from kernels.adapter import Adapter, Built
from kernels.providers import liger_attr, liger_label
from kernels.tensors import RERUN_BYTES, Draws, input_shapes, leaf_copies, per_mode

EPS = 1e-6


def _eps(params) -> float:
    return float(params.get("eps", EPS))


def naive_add_rms_norm(x, residual, weight, eps):
    """The upstream script's NaiveAddRMSNorm.forward: add and normalize in float32, scale in the input dtype."""
    h = x.to(torch.float32) + residual.to(torch.float32)
    s = h
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype), s.to(x.dtype)


def add_liger_rms_norm(x, residual, weight, rms_norm):
    """The upstream script's AddLigerRMSNorm.forward: the add in eager PyTorch, then Liger's RMSNorm (its
    own weight left at ones, in float32 as upstream) and the outer weight in the input dtype."""
    h = x.to(torch.float32) + residual.to(torch.float32)
    s = h
    return weight * rms_norm(h).to(x.dtype), s.to(x.dtype)


class FusedAddRMSNorm(Adapter):
    KERNEL = "fused_add_rms_norm"
    OUTPUT_NAMES = ("y", "residual_out")
    GRAD_INPUTS = ("x", "residual", "weight")
    REFERENCE_DTYPE = torch.float64

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        d = Draws(self.KERNEL, params, dtype, seed, device)
        return {"x": d.normal("x"), "residual": d.normal("residual"), "weight": d.normal("weight", 0.1, 1.0)}

    def reference(self, inputs, params):
        s = inputs["x"] + inputs["residual"]
        y = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + _eps(params)) * inputs["weight"]
        return y, s

    def _liger_fused(self, provider, inputs, params) -> Built:
        x = inputs["x"]
        cls = liger_attr(x, "fused_add_rms_norm", "LigerFusedAddRMSNorm")
        module = cls(hidden_size=x.shape[-1], eps=_eps(params)).to(device=x.device, dtype=x.dtype)
        with torch.no_grad():
            module.weight.copy_(inputs["weight"])
        leaves = {**leaf_copies(inputs, ("x", "residual")), "weight": module.weight}
        return self.built(lambda: module(leaves["x"], leaves["residual"]), leaves,
                          liger_label("LigerFusedAddRMSNorm", "Triton"))

    def _liger_rms_norm(self, provider, inputs, params) -> Built:
        x = inputs["x"]
        rms_norm = liger_attr(x, "rms_norm", "LigerRMSNorm")(x.shape[-1], _eps(params), in_place=False).to(x.device)
        lv = leaf_copies(inputs, self.GRAD_INPUTS)
        label = f"eager add + {liger_label('LigerRMSNorm')} (upstream AddLigerRMSNorm)"
        return self.built(lambda: add_liger_rms_norm(lv["x"], lv["residual"], lv["weight"], rms_norm), lv, label)

    def _naive(self, provider, inputs, params) -> Built:
        lv, eps = leaf_copies(inputs, self.GRAD_INPUTS), _eps(params)
        return self.built(lambda: naive_add_rms_norm(lv["x"], lv["residual"], lv["weight"], eps), lv,
                          f"PyTorch eager add + RMSNorm (upstream NaiveAddRMSNorm, its {provider} provider)")

    # "huggingface" (the script's first name) and "torch" (its current one) are the script's NaiveAddRMSNorm.
    BUILDERS = {"liger_fused_add_rms_norm": _liger_fused, "liger_rms_norm": _liger_rms_norm,
                "huggingface": _naive, "torch": _naive}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward reads x, residual, weight and writes y and s; backward reads dy, ds, s (or x and residual)
        and weight and writes dx, dresidual (one tensor in a fused kernel, counted once) and dweight; full reads
        x, residual, weight, dy, ds once and writes y, s, dx and dweight. Per-row rstd is not counted."""
        s = input_shapes(self.KERNEL, params)
        e = RERUN_BYTES[dtype]
        xb = s["x"][0] * s["x"][1] * e
        wb = s["weight"][0] * e
        return {"forward": 4 * xb + wb, "backward": 4 * xb + 2 * wb, "full": 7 * xb + 2 * wb}[mode]

    def flops(self, params, mode) -> int:
        """Per element: forward about 5 (add, square, sum, normalize, scale); backward about 9 (RMSNorm's 8
        plus adding ds into the gradient of the sum)."""
        s = input_shapes(self.KERNEL, params)
        n = s["x"][0] * s["x"][1]
        return per_mode(5 * n, 9 * n, mode)


ADAPTER = FusedAddRMSNorm()
