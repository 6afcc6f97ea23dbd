"""RoPE's rerun adapter: Llama-style rotary embedding of q and k.

q [batch, q_heads, seq, head_dim], k [batch, kv_heads, seq, head_dim], cos/sin [1, seq, head_dim] as
Transformers' ``LlamaRotaryEmbedding`` returns them. KernelIndex's provider is ``kernels.rope.ops.rope``.
"""

from __future__ import annotations

import torch

from kernels.tensors import Draws
from kernels.engines.rotary import RotaryAdapter, rotate_half
from kernels.rope.ops import rope

ROPE_THETA = 10000.0


def cos_sin_for(seq: int, head_dim: int, dtype, device, theta: float = ROPE_THETA):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype).unsqueeze(0), emb.sin().to(dtype).unsqueeze(0)


def torch_apply_rotary_pos_emb(q, k, cos, sin):
    """PyTorch equivalent of Transformers' Llama ``apply_rotary_pos_emb`` (unsqueeze_dim=1)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class RoPE(RotaryAdapter):
    KERNEL = "rope"
    DETERMINISTIC_INPUTS = ("cos", "sin")
    KERNELINDEX = (rope, "KernelIndex Triton RoPE (fwd+bwd)")
    LIGER = ("rope", "liger_rotary_pos_emb")
    TRANSFORMERS = ("transformers.models.llama.modeling_llama", "apply_rotary_pos_emb", "llama apply_rotary_pos_emb")
    EQUIVALENT = staticmethod(torch_apply_rotary_pos_emb)

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        d = Draws(self.KERNEL, params, dtype, seed, device)
        q, k = d.normal("q"), d.normal("k")
        cos, sin = cos_sin_for(d.shapes["q"][2], d.shapes["q"][3], d.dtype, device)
        return {"q": q, "k": k, "cos": cos, "sin": sin}

    def reference(self, inputs, params):
        return torch_apply_rotary_pos_emb(inputs["q"], inputs["k"], inputs["cos"], inputs["sin"])


ADAPTER = RoPE()
