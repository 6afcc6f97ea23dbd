"""Sparsemax's rerun adapter: the Euclidean projection of each row of x onto the probability simplex,
max(x - tau, 0) with tau chosen so that each row sums to one.

x is [tokens, cols] (``hidden`` in upstream's token sweep), projected along ``dim`` (-1 upstream). The
workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_sparsemax.py``: x drawn from a standard
normal, ``LigerSparsemax`` against the script's own sort-based PyTorch function, which this adapter
restates since the script is not an importable package. In bfloat16 that function sorts, sums and
counts in bfloat16 (its index ramp too, inexact past 256), so it misses the support and fails the bf16
tolerance: the harness then records the upstream baseline as failing correctness there.
"""

from __future__ import annotations

import math

import torch

from kernels.providers import liger_attr, liger_label
from kernels.tensors import numel, per_mode
from kernels.engines.rowwise import RowwiseAdapter

DEFAULT_DIM = -1


def _dim(params) -> int:
    return int(params.get("dim", DEFAULT_DIM))


def _threshold(z: torch.Tensor) -> torch.Tensor:
    """tau of each row of z (projected along its last dimension), differentiable through the sort: the
    support is the largest k with 1 + k * z_(k) > the sum of the k largest, tau = (that sum - 1) / k."""
    z_sorted = torch.sort(z, dim=-1, descending=True).values
    cumsum = z_sorted.cumsum(dim=-1)
    ks = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    support = (1 + ks * z_sorted) > cumsum
    k = support.sum(dim=-1, keepdim=True).clamp(min=1)
    return ((z_sorted * support).sum(dim=-1, keepdim=True) - 1) / k


def torch_sparsemax(x: torch.Tensor, dim: int = DEFAULT_DIM) -> torch.Tensor:
    """PyTorch equivalent of upstream benchmark_sparsemax.py's torch_sparsemax: everything in x's dtype,
    the output clamped at zero."""
    z = x.movedim(dim, -1)
    return torch.clamp(z - _threshold(z), min=0).movedim(-1, dim)


class Sparsemax(RowwiseAdapter):
    KERNEL = "sparsemax"

    def reference(self, inputs, params) -> tuple[torch.Tensor]:
        """Sparsemax whose gradient is the one on its support {y > 0}, as Liger's backward and the sparsemax
        paper define it. Where an element equals tau exactly (frequent with bf16 inputs, whose sums land on
        the same grid), a clamp would pass that element's gradient while tau leaves it out of the support,
        a mixture of the two one-sided Jacobians; ``where`` keeps it out of both."""
        dim = _dim(params)
        z = inputs["x"].movedim(dim, -1)
        tau = _threshold(z)
        return (torch.where(z > tau, z - tau, torch.zeros_like(z)).movedim(-1, dim),)

    def _liger(self, provider, inputs, params):
        module = liger_attr(inputs["x"], "sparsemax", "LigerSparsemax")(dim=_dim(params))
        return self.pass_of(module, inputs, liger_label("LigerSparsemax"))

    def _torch(self, provider, inputs, params):
        dim = _dim(params)
        label = f"PyTorch {torch.__version__} equivalent of upstream benchmark_sparsemax.py's torch_sparsemax"
        return self.pass_of(lambda x: torch_sparsemax(x, dim), inputs, label)

    BUILDERS = {"liger": _liger, "torch": _torch}

    def flops(self, params, mode) -> int:
        """Forward: a sort of each row (n log2 n comparisons) and 5 per element (prefix sum, bound, compare,
        support sum, subtract and clamp); backward: 4 per element (support mask, masked sum, subtract the
        support's mean, mask)."""
        shape = self.shape(params)
        cols = shape[_dim(params)]
        n = numel(shape)
        return per_mode(n * max(1, math.ceil(math.log2(cols))) + 5 * n, 4 * n, mode)


ADAPTER = Sparsemax()
