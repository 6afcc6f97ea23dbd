"""Fused neighborhood attention's rerun adapter: softmax attention of
q, k, v [batch, heads, seq, head_dim] in which query i sees only the keys i + t * dilation,
|t| <= kernel_size // 2.

Upstream (Liger-Kernel's ``benchmark/scripts/benchmark_fused_neighborhood_attention.py``) times whole
modules: x [batch, seq, hidden] through q/k/v projections, the attention, and an output projection.
KernelIndex's spec for this family takes the attention's own inputs (q, k, v per head), so the rerun times
the part the two modules do differently, and leaves out the four hidden x hidden projections that both run
through ``torch.nn.Linear``. q, k and v are drawn from a normal distribution with standard deviation
1/sqrt(3), the spread upstream's projections give them (x standard normal, ``nn.Linear``'s default
uniform initialization); the scale is 1/sqrt(head_dim), as in both upstream modules.

Providers: ``liger`` is ``LigerFusedNeighborhoodAttentionFunction``, which
``LigerFusedNeighborhoodAttention.forward`` applies between its projections; ``torch`` restates the
attention of the script's own ``TorchNeighborhoodAttention`` (the script is not an importable package),
including the boolean mask it rebuilds on every forward by setting one element at a time. That mask loop
issues about seq * kernel_size element writes per forward, and upstream's torch timings include it.
"""

from __future__ import annotations

import math

import torch

from kernels.adapter import Adapter, Built
from kernels.providers import liger_label, liger_op
from kernels.tensors import RERUN_BYTES, Draws, input_shapes, leaf_copies, numel, per_mode

# The upstream modules' defaults, used where a workload leaves them out.
KERNEL_SIZE = 7
DILATION = 1
# Standard deviation of q, k, v as upstream's projections produce them from a standard normal x.
QKV_STD = 1.0 / math.sqrt(3.0)


def _window(params) -> tuple[int, int]:
    return int(params.get("kernel_size", KERNEL_SIZE)), int(params.get("dilation", DILATION))


def neighborhood_pairs(seq: int, kernel_size: int, dilation: int) -> int:
    """The (query, key) pairs inside the windows of a sequence: offset t * dilation (|t| <= kernel_size // 2)
    pairs seq - |t| * dilation positions, fewer at the edges."""
    half = kernel_size // 2
    return sum(max(0, seq - abs(t) * dilation) for t in range(-half, half + 1))


def upstream_neighborhood_mask(seq: int, kernel_size: int, dilation: int, device) -> torch.Tensor:
    """``TorchNeighborhoodAttention._create_neighborhood_mask``: the window set element by element."""
    mask = torch.zeros(seq, seq, device=device, dtype=torch.bool)
    half = kernel_size // 2
    for i in range(seq):
        for j in range(max(0, i - half * dilation), min(seq, i + half * dilation + 1)):
            if dilation == 1 or (j - i) % dilation == 0:
                mask[i, j] = True
    return mask


def torch_neighborhood_attention(q, k, v, kernel_size: int, dilation: int, scale: float) -> torch.Tensor:
    """The attention of upstream's ``TorchNeighborhoodAttention.forward``, from the per-head q, k, v on."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    mask = upstream_neighborhood_mask(q.shape[-2], kernel_size, dilation, q.device)
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


class FusedNeighborhoodAttention(Adapter):
    KERNEL = "fused_neighborhood_attention"
    OUTPUT_NAMES = ("out",)
    GRAD_INPUTS = ("q", "k", "v")
    REFERENCE_DTYPE = torch.float64

    def dims(self, params) -> tuple[int, int, int, int]:
        batch, heads, seq, head_dim = input_shapes(self.KERNEL, params)["q"]
        return batch, heads, seq, head_dim

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        d = Draws(self.KERNEL, params, dtype, seed, device)
        return {name: d.normal(name, QKV_STD) for name in ("q", "k", "v")}

    def reference(self, inputs, params):
        """Dense attention with every key outside the query's window masked to -inf before the softmax."""
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        kernel_size, dilation = _window(params)
        seq = q.shape[-2]
        pos = torch.arange(seq, device=q.device)
        offset = pos[None, :] - pos[:, None]
        inside = (offset.abs() <= (kernel_size // 2) * dilation) & (offset % dilation == 0)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        attn = torch.softmax(scores.masked_fill(~inside, float("-inf")), dim=-1)
        return (attn @ v,)

    def _attention(self, attend, inputs, params, label: str) -> Built:
        """A pass of ``attend(q, k, v, kernel_size, dilation, scale)`` over fresh leaf copies of q, k, v."""
        kernel_size, dilation = _window(params)
        scale = 1.0 / math.sqrt(inputs["q"].shape[-1])
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        return self.built(lambda: (attend(leaves["q"], leaves["k"], leaves["v"], kernel_size, dilation, scale),),
                          leaves, label)

    def _liger(self, provider, inputs, params) -> Built:
        function = liger_op(inputs["q"], "fused_neighborhood_attention", "LigerFusedNeighborhoodAttentionFunction")
        label = (liger_label("LigerFusedNeighborhoodAttentionFunction", "Triton")
                 + ", the attention of LigerFusedNeighborhoodAttention without its projections")
        return self._attention(function.apply, inputs, params, label)

    def _torch(self, provider, inputs, params) -> Built:
        label = (f"PyTorch {torch.__version__} equivalent of the attention in upstream "
                 "benchmark_fused_neighborhood_attention.py's TorchNeighborhoodAttention (mask rebuilt element "
                 "by element each forward; projections left out)")
        return self._attention(torch_neighborhood_attention, inputs, params, label)

    BUILDERS = {"liger": _liger, "torch": _torch}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward reads q, k, v and writes out; backward reads q, k, v and dout and writes dq, dk, dv; full
        reads q, k, v, dout once and writes out, dq, dk, dv. The [seq, seq] scores and probabilities both
        providers materialize are not counted: a fused kernel need not write them."""
        n = numel(input_shapes(self.KERNEL, params)["q"]) * RERUN_BYTES[dtype]
        return {"forward": 4 * n, "backward": 7 * n, "full": 8 * n}[mode]

    def flops(self, params, mode) -> int:
        """Counted over the pairs inside the windows (``neighborhood_pairs`` per head), not the dense
        [seq, seq] products both providers compute and mask (seq / kernel_size times more). Per pair:
        forward 4 * head_dim (q.k and p.v) + 5 (scale, max, exp, sum, normalize); backward 8 * head_dim
        (dp, dv, dq, dk) + 5 (the softmax gradient and the scale). No GEMMs: the workloads are float32, and
        the per-head products (head_dim deep) against the [seq, seq] scores both providers write are not a
        bf16 GEMM whose rate bounds them."""
        batch, heads, seq, head_dim = self.dims(params)
        kernel_size, dilation = _window(params)
        pairs = batch * heads * neighborhood_pairs(seq, kernel_size, dilation)
        return per_mode(pairs * (4 * head_dim + 5), pairs * (8 * head_dim + 5), mode)


ADAPTER = FusedNeighborhoodAttention()
