"""Fused mixture-of-experts' rerun adapter: each token's output is the
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

from kernels.adapter import Adapter, Built
from kernels.providers import liger_label, liger_op
from kernels.spec import DTYPE_BYTES
from kernels.tensors import RERUN_BYTES, Draws, input_shapes, leaf_copies, randn

WEIGHT_SCALE = 0.02


def experts_loop(x, w_gate_up, w_down, top_k_index, top_k_weights):
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


class FusedMoE(Adapter):
    KERNEL = "fused_moe"
    OUTPUT_NAMES = ("y",)
    GRAD_INPUTS = ("x", "w_gate_up", "w_down", "top_k_weights")
    # Up to 32k tokens x 8 experts each through 2048 x 1536 and 768 x 2048 GEMMs: too long in float64; the
    # harness turns TF32 off for the reference.
    REFERENCE_DTYPE = torch.float32

    def dims(self, params) -> tuple[int, int, int, int, int]:
        """(tokens, hidden, intermediate, experts, top_k) of a workload."""
        s = input_shapes(self.KERNEL, params)
        experts, hidden, intermediate = s["w_down"]
        return s["x"][0], hidden, intermediate, experts, int(params["top_k"])

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        tokens, _, _, experts, top_k = self.dims(params)
        d = Draws(self.KERNEL, params, dtype, seed, device)
        x = d.normal("x")
        w_gate_up = d.normal("w_gate_up", WEIGHT_SCALE)
        w_down = d.normal("w_down", WEIGHT_SCALE)
        logits = randn((tokens, experts), torch.float32, d.gen, device)
        top_k_index = torch.topk(logits, top_k, dim=-1).indices
        top_k_weights = torch.softmax(torch.gather(logits, 1, top_k_index), dim=-1).to(d.dtype)
        return {
            "x": x,
            "w_gate_up": w_gate_up,
            "w_down": w_down,
            "top_k_index": top_k_index.to(torch.int32),
            "top_k_weights": top_k_weights,
        }

    def reference(self, inputs, params) -> tuple[torch.Tensor]:
        return (experts_loop(inputs["x"], inputs["w_gate_up"], inputs["w_down"], inputs["top_k_index"],
                             inputs["top_k_weights"]),)

    def _routed(self, moe, inputs, label: str) -> Built:
        """A pass of ``moe(x, w_gate_up, w_down, top_k_index, top_k_weights)`` over fresh leaf copies."""
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        args = (leaves["x"], leaves["w_gate_up"], leaves["w_down"], inputs["top_k_index"], leaves["top_k_weights"])
        return self.built(lambda: (moe(*args),), leaves, label)

    def _liger(self, provider, inputs, params) -> Built:
        fused = liger_op(inputs["x"], "fused_moe", "LigerFusedMoEFunction")
        return self._routed(fused.apply, inputs, liger_label("LigerFusedMoEFunction", "Triton"))

    def _huggingface(self, provider, inputs, params) -> Built:
        label = (f"PyTorch {torch.__version__} per-expert loop: upstream's huggingface baseline, after "
                 "Transformers' Mixtral sparse-MoE block")
        return self._routed(experts_loop, inputs, label)

    BUILDERS = {"liger": _liger, "huggingface": _huggingface}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward reads x, every expert's weights, the routing indices and weights and writes y; backward
        reads dy, x, the weights and the routing and writes dx, the weight gradients and the routing weights'
        gradient; full reads and writes each of those once. The [tokens * top_k, ...] intermediates are not
        counted, nor is an expert no token chose (every expert is read)."""
        tokens, hidden, intermediate, experts, top_k = self.dims(params)
        e = RERUN_BYTES[dtype]
        xb = tokens * hidden * e
        wb = experts * 3 * intermediate * hidden * e
        route = tokens * top_k * (DTYPE_BYTES["int32"] + e)
        routing_grad = tokens * top_k * e
        return {
            "forward": xb + wb + route + xb,
            "backward": xb + xb + wb + route + xb + wb + routing_grad,
            "full": xb + wb + route + xb + xb + xb + wb + routing_grad,
        }[mode]

    def flops(self, params, mode) -> int:
        """GEMM FLOPs over the tokens * top_k routed rows (R): forward gate-and-up 2*R*H*2I and down 2*R*I*H;
        backward twice that (input and weight gradients of both). Liger's recomputation of the down
        projection's input gradient, the SwiGLU and the weighted sum are left out."""
        tokens, hidden, intermediate, _, top_k = self.dims(params)
        forward = 6 * tokens * top_k * hidden * intermediate
        return {"forward": forward, "backward": 2 * forward, "full": 3 * forward}[mode]

    def matmul_shapes(self, params) -> list[tuple[int, int, int]]:
        """(m, n, k) of one expert's grouped-GEMM problems at the mean load (m = tokens * top_k / experts rows):
        gate-and-up, down, and the two weight gradients over the expert's rows."""
        tokens, hidden, intermediate, experts, top_k = self.dims(params)
        rows = max(1, tokens * top_k // experts)
        return [(rows, 2 * intermediate, hidden), (rows, hidden, intermediate), (2 * intermediate, hidden, rows),
                (hidden, intermediate, rows)]


ADAPTER = FusedMoE()
