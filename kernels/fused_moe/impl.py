"""Fused mixture-of-experts' rerun adapter (``kernels._adapter.RerunAdapter``): each token's output is the
routing-weighted sum, over its ``top_k`` experts e, of down_e(silu(gate_e(x)) * up_e(x)).

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_fused_moe.py`` (Qwen3-MoE-30B shapes,
bfloat16, a sweep over tokens and one over experts): x [tokens, hidden] drawn from a normal distribution;
the stacked gate-and-up projections [experts, 2 * intermediate, hidden] (gate rows first) and down
projections [experts, hidden, intermediate] drawn normal and scaled 0.02; routing logits [tokens, experts]
drawn in float32, the ``top_k`` largest per token giving the experts (int32) and their softmax the routing
weights (cast to the workload's dtype). Gradients are taken for x, both projections and the routing weights,
as upstream's benchmark takes them.

The spec lists x and the two projections; the routing (``top_k_index`` [tokens, top_k] int32,
``top_k_weights`` [tokens, top_k]) is drawn from the same seed after them.

Upstream compares ``liger`` (``liger_kernel.ops.LigerFusedMoEFunction``: Triton grouped GEMMs with the
gather, SwiGLU and weighted scatter fused in) against ``huggingface``, upstream's own per-expert PyTorch
loop after Transformers' Mixtral sparse-MoE block (the benchmark never calls Transformers), rebuilt here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels._adapter import Built, Unavailable
from kernels._providers import LIGER_TRITON_NEEDS_ON_CPU, liger_triton_attr, version_label
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, leaf_copies, randn, required_input_shapes

KERNEL = "fused_moe"
PROVIDERS = ("liger", "huggingface")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("y",)
GRAD_INPUTS = ("x", "w_gate_up", "w_down", "top_k_weights")
DETERMINISTIC_INPUTS = ()
# Up to 32k tokens x 8 experts each through 2048 x 1536 and 768 x 2048 GEMMs: too long in float64; the
# harness turns TF32 off for the reference.
REFERENCE_DTYPE = torch.float32
WEIGHT_SCALE = 0.02
_INDEX_BYTES = 4


def _dims(params) -> tuple[int, int, int, int, int]:
    """(tokens, hidden, intermediate, experts, top_k) of a workload."""
    s = required_input_shapes(KERNEL, params)
    experts, hidden, intermediate = s["w_down"]
    return s["x"][0], hidden, intermediate, experts, int(params["top_k"])


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = required_input_shapes(KERNEL, params)
    tokens, _, _, experts, top_k = _dims(params)
    td = RERUN_DTYPES[dtype]
    gen = generator(seed, device)
    x = randn(s["x"], td, gen, device)
    w_gate_up = randn(s["w_gate_up"], td, gen, device, scale=WEIGHT_SCALE)
    w_down = randn(s["w_down"], td, gen, device, scale=WEIGHT_SCALE)
    logits = randn((tokens, experts), torch.float32, gen, device)
    top_k_index = torch.topk(logits, top_k, dim=-1).indices
    top_k_weights = torch.softmax(torch.gather(logits, 1, top_k_index), dim=-1).to(td)
    return {
        "x": x,
        "w_gate_up": w_gate_up,
        "w_down": w_down,
        "top_k_index": top_k_index.to(torch.int32),
        "top_k_weights": top_k_weights,
    }


def _experts_loop(x, w_gate_up, w_down, top_k_index, top_k_weights):
    """The per-expert loop: for each expert some token chose, gather its tokens, run its SwiGLU MLP, scale by
    the routing weights and add into the output rows; differentiable in every floating input."""
    out = torch.zeros_like(x)
    chosen = top_k_index.long()
    for expert in torch.unique(chosen).tolist():
        token, slot = torch.where(chosen == expert)
        gate, up = F.linear(x[token], w_gate_up[expert]).chunk(2, dim=-1)
        y = F.linear(F.silu(gate) * up, w_down[expert]) * top_k_weights[token, slot, None]
        out = out.index_add(0, token, y.to(out.dtype))
    return out


def reference(inputs, params) -> tuple[torch.Tensor]:
    return (_experts_loop(inputs["x"], inputs["w_gate_up"], inputs["w_down"], inputs["top_k_index"],
                          inputs["top_k_weights"]),)


def build(provider, inputs, params) -> Built:
    leaves = leaf_copies(inputs, GRAD_INPUTS)
    top_k_index = inputs["top_k_index"]
    args = (leaves["x"], leaves["w_gate_up"], leaves["w_down"], top_k_index, leaves["top_k_weights"])
    if provider == "liger":
        fused = liger_triton_attr(inputs["x"], "ops", "LigerFusedMoEFunction", LIGER_TRITON_NEEDS_ON_CPU,
                                  package="liger_kernel", what="liger_kernel.ops")
        label = f"Liger-Kernel {version_label('liger-kernel')} LigerFusedMoEFunction (Triton)"
        return Built(lambda: (fused.apply(*args),), leaves, label, OUTPUT_NAMES)
    if provider == "huggingface":
        label = (f"PyTorch {torch.__version__} per-expert loop: upstream's huggingface baseline, after "
                 "Transformers' Mixtral sparse-MoE block")
        return Built(lambda: (_experts_loop(*args),), leaves, label, OUTPUT_NAMES)
    raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")


def bytes_moved(params, dtype, mode) -> int:
    """Forward reads x, every expert's weights, the routing indices and weights and writes y; backward reads
    dy, x, the weights and the routing and writes dx, the weight gradients and the routing weights'
    gradient; full reads and writes each of those once. The [tokens * top_k, ...] intermediates are not
    counted, nor is an expert no token chose (every expert is read)."""
    tokens, hidden, intermediate, experts, top_k = _dims(params)
    e = RERUN_BYTES[dtype]
    xb = tokens * hidden * e
    wb = experts * 3 * intermediate * hidden * e
    route = tokens * top_k * (_INDEX_BYTES + e)
    routing_grad = tokens * top_k * e
    return {
        "forward": xb + wb + route + xb,
        "backward": xb + xb + wb + route + xb + wb + routing_grad,
        "full": xb + wb + route + xb + xb + xb + wb + routing_grad,
    }[mode]


def flops(params, mode) -> int:
    """GEMM FLOPs over the tokens * top_k routed rows (R): forward gate-and-up 2*R*H*2I and down 2*R*I*H;
    backward twice that (input and weight gradients of both). Liger's recomputation of the down projection's
    input gradient, the SwiGLU and the weighted sum are left out."""
    tokens, hidden, intermediate, _, top_k = _dims(params)
    forward = 6 * tokens * top_k * hidden * intermediate
    return {"forward": forward, "backward": 2 * forward, "full": 3 * forward}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    """(m, n, k) of one expert's grouped-GEMM problems at the mean load (m = tokens * top_k / experts rows):
    gate-and-up, down, and the two weight gradients over the expert's rows."""
    tokens, hidden, intermediate, experts, top_k = _dims(params)
    rows = max(1, tokens * top_k // experts)
    return [(rows, 2 * intermediate, hidden), (rows, hidden, intermediate), (2 * intermediate, hidden, rows),
            (hidden, intermediate, rows)]
