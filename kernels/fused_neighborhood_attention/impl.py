"""Fused neighborhood attention's rerun adapter (``kernels._adapter.RerunAdapter``): softmax attention of
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

from kernels._adapter import Built, Unavailable
from kernels._providers import LIGER_TRITON_NEEDS_ON_CPU, liger_triton_attr, version_label
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, leaf_copies, numel, randn, required_input_shapes

KERNEL = "fused_neighborhood_attention"
PROVIDERS = ("liger", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("out",)
GRAD_INPUTS = ("q", "k", "v")
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64
# The upstream modules' defaults, used where a workload leaves them out.
KERNEL_SIZE = 7
DILATION = 1
# Standard deviation of q, k, v as upstream's projections produce them from a standard normal x.
QKV_STD = 1.0 / math.sqrt(3.0)


def _window(params) -> tuple[int, int]:
    return int(params.get("kernel_size", KERNEL_SIZE)), int(params.get("dilation", DILATION))


def _dims(params) -> tuple[int, int, int, int]:
    batch, heads, seq, head_dim = required_input_shapes(KERNEL, params)["q"]
    return batch, heads, seq, head_dim


def neighborhood_pairs(seq: int, kernel_size: int, dilation: int) -> int:
    """The (query, key) pairs inside the windows of a sequence: offset t * dilation (|t| <= kernel_size // 2)
    pairs seq - |t| * dilation positions, fewer at the edges."""
    half = kernel_size // 2
    return sum(max(0, seq - abs(t) * dilation) for t in range(-half, half + 1))


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = required_input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = RERUN_DTYPES[dtype]
    return {name: randn(s[name], td, gen, device, scale=QKV_STD) for name in ("q", "k", "v")}


def reference(inputs, params):
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


def build(provider, inputs, params) -> Built:
    kernel_size, dilation = _window(params)
    scale = 1.0 / math.sqrt(inputs["q"].shape[-1])
    if provider == "liger":
        function = liger_triton_attr(
            inputs["q"],
            "ops",
            "LigerFusedNeighborhoodAttentionFunction",
            LIGER_TRITON_NEEDS_ON_CPU,
            package="liger_kernel",
        )
        attend = function.apply
        label = (f"Liger-Kernel {version_label('liger-kernel')} LigerFusedNeighborhoodAttentionFunction (Triton), "
                 "the attention of LigerFusedNeighborhoodAttention without its projections")
    elif provider == "torch":
        attend = torch_neighborhood_attention
        label = (f"PyTorch {torch.__version__} equivalent of the attention in upstream "
                 "benchmark_fused_neighborhood_attention.py's TorchNeighborhoodAttention (mask rebuilt element "
                 "by element each forward; projections left out)")
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    leaves = leaf_copies(inputs, GRAD_INPUTS)

    def fn():
        return (attend(leaves["q"], leaves["k"], leaves["v"], kernel_size, dilation, scale),)

    return Built(fn, leaves, label, OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    """Forward reads q, k, v and writes out; backward reads q, k, v and dout and writes dq, dk, dv; full
    reads q, k, v, dout once and writes out, dq, dk, dv. The [seq, seq] scores and probabilities both
    providers materialize are not counted: a fused kernel need not write them."""
    n = numel(required_input_shapes(KERNEL, params)["q"]) * RERUN_BYTES[dtype]
    return {"forward": 4 * n, "backward": 7 * n, "full": 8 * n}[mode]


def flops(params, mode) -> int:
    """Counted over the pairs inside the windows (``neighborhood_pairs`` per head), not the dense
    [seq, seq] products both providers compute and mask (seq / kernel_size times more). Per pair:
    forward 4 * head_dim (q.k and p.v) + 5 (scale, max, exp, sum, normalize); backward 8 * head_dim
    (dp, dv, dq, dk) + 5 (the softmax gradient and the scale)."""
    batch, heads, seq, head_dim = _dims(params)
    kernel_size, dilation = _window(params)
    pairs = batch * heads * neighborhood_pairs(seq, kernel_size, dilation)
    fwd, bwd = pairs * (4 * head_dim + 5), pairs * (8 * head_dim + 5)
    return {"forward": fwd, "backward": bwd, "full": fwd + bwd}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    """None: the workloads are float32, and the per-head products (head_dim deep) against the [seq, seq]
    scores both providers write are not a bf16 GEMM whose rate bounds them."""
    return []
