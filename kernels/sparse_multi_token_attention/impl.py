"""Sparse multi-token attention's rerun adapter: out = mask_0(conv2d(sparsemax(mask_-inf(scores)))); the
inputs, the convolution and the cost model are ``kernels.engines.multi_token_attention``'s.

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_sparse_multi_token_attention.py``: float32
scores from a standard normal; the weight drawn as ``kaiming_uniform_(a=sqrt(5))`` draws it (which the
script applies explicitly) and the bias zero. Providers: ``liger`` is ``LigerMultiTokenAttention(sparse=True)``,
whose sparsemax Liger runs in float32 only (unavailable for other dtypes); ``torch`` restates the script's
own ``TorchSparseMultiTokenAttention`` (the script is not an importable package), which computes in float32
and casts its output back to the scores' dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.adapter import Built, Unavailable
from kernels.providers import liger_label
from kernels.engines.multi_token_attention import MASK_VALUE, MultiTokenAttentionAdapter, causal_mask, conv_config

# Where upstream's PyTorch module takes a sorted score for one that was masked.
MASKED_BELOW = -1e8


def sparsemax(z: torch.Tensor) -> torch.Tensor:
    """Sparsemax along the last dimension, differentiable through the sort: the support is the largest k
    with 1 + k * z_(k) > the sum of the k largest, tau = (that sum - 1) / k, out = max(z - tau, 0).
    Masked entries must be finite (the mask value), so that they drop out of the sums."""
    z_sorted = torch.sort(z, dim=-1, descending=True).values
    cumsum = z_sorted.cumsum(dim=-1)
    ks = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    k = ((1 + ks * z_sorted) > cumsum).sum(dim=-1, keepdim=True)
    tau = (torch.gather(cumsum, -1, k - 1) - 1) / k.to(z.dtype)
    return torch.clamp(z - tau, min=0)


def torch_sparse_multi_token_attention(scores, weight, bias, params) -> torch.Tensor:
    """Upstream's ``TorchSparseMultiTokenAttention.forward``: float32 throughout, masked scores kept out
    of the support by a threshold, the output cast back to the scores' dtype."""
    kernel, groups, _ = conv_config(params)
    seq = scores.shape[-1]
    mask = causal_mask(seq, scores.device)
    compute = torch.float32
    inf = torch.tensor(MASK_VALUE, device=scores.device, dtype=compute)
    zero = torch.tensor(0.0, device=scores.device, dtype=compute)
    z = scores.to(compute).masked_fill(~mask, inf)
    z_sorted, _ = torch.sort(z, dim=-1, descending=True)
    cum_sum = torch.cumsum(z_sorted, dim=-1)
    k_indices = torch.arange(1, seq + 1, device=z.device, dtype=z.dtype).view(1, 1, 1, seq)
    condition = (1 + k_indices * z_sorted > cum_sum) & (z_sorted > MASKED_BELOW)
    k_sparsemax = torch.sum(condition, dim=-1, keepdim=True)
    k_safe = torch.max(k_sparsemax, torch.ones_like(k_sparsemax))
    cum_sum_k = torch.gather(cum_sum, dim=-1, index=k_safe.long() - 1)
    tau = (cum_sum_k - 1) / k_safe.to(z.dtype)
    tau = torch.where(k_sparsemax == 0, torch.full_like(tau, float("inf")), tau)
    probs = torch.clamp(z - tau, min=0)
    b = bias.to(compute) if bias is not None else None
    out = F.conv2d(probs, weight.to(compute), b, stride=1, padding=kernel // 2, groups=groups)
    return out.masked_fill(~mask, zero).to(scores.dtype)


class SparseMultiTokenAttention(MultiTokenAttentionAdapter):
    KERNEL = "sparse_multi_token_attention"
    # The sparsemax: 6 per score element forward (prefix sum, support test, threshold, subtract, clamp, the
    # support count; the sort's comparisons not counted) and 4 backward (support mask, support sum, subtract,
    # mask).
    ACTIVATION_FLOPS = (6, 4)

    def activation(self, scores, mask):
        """The sparsemax over each query's keys, the future masked to the (finite) mask value."""
        return sparsemax(scores.masked_fill(~mask, MASK_VALUE))

    def _liger(self, provider, inputs, params) -> Built:
        if inputs["scores"].dtype != torch.float32:
            raise Unavailable("Liger's sparse multi-token attention supports float32 scores only")
        module = self.liger_module(inputs, params, sparse=True)
        return self.module_built(module, module.weight, inputs, liger_label("LigerMultiTokenAttention(sparse=True)"))

    def _torch(self, provider, inputs, params) -> Built:
        return self.torch_built(torch_sparse_multi_token_attention, inputs, params,
                                "benchmark_sparse_multi_token_attention.py's TorchSparseMultiTokenAttention")

    BUILDERS = {"liger": _liger, "torch": _torch}


ADAPTER = SparseMultiTokenAttention()
