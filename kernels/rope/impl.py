"""RoPE's rerun adapter: Llama-style rotary embedding of q and k.

q [batch, q_heads, seq, head_dim], k [batch, kv_heads, seq, head_dim], cos/sin [1, seq, head_dim] as
Transformers' ``LlamaRotaryEmbedding`` returns them. KernelIndex's provider is ``kernels.rope.ops.rope``.
"""

from __future__ import annotations

import torch

from kernels._adapter import Adapter, Built
from kernels._providers import liger_attr, liger_label, version_label
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, leaf_copies, numel, per_mode, randn
from kernels.rope.ops import rope

ROPE_THETA = 10000.0


def cos_sin_for(seq: int, head_dim: int, dtype, device, theta: float = ROPE_THETA):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype).unsqueeze(0), emb.sin().to(dtype).unsqueeze(0)


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def torch_apply_rotary_pos_emb(q, k, cos, sin):
    """PyTorch equivalent of Transformers' Llama ``apply_rotary_pos_emb`` (unsqueeze_dim=1)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


class RoPE(Adapter):
    KERNEL = "rope"
    PROVIDERS = ("kernelindex", "liger", "huggingface")
    OUTPUT_NAMES = ("q", "k")
    GRAD_INPUTS = ("q", "k")
    DETERMINISTIC_INPUTS = ("cos", "sin")
    REFERENCE_DTYPE = torch.float64

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        s = input_shapes(self.KERNEL, params)
        gen = generator(seed, device)
        td = RERUN_DTYPES[dtype]
        q = randn(s["q"], td, gen, device)
        k = randn(s["k"], td, gen, device)
        cos, sin = cos_sin_for(s["q"][2], s["q"][3], td, device)
        return {"q": q, "k": k, "cos": cos, "sin": sin}

    def reference(self, inputs, params):
        return torch_apply_rotary_pos_emb(inputs["q"], inputs["k"], inputs["cos"], inputs["sin"])

    def _rotation(self, rotate, inputs, label: str) -> Built:
        """A pass of ``rotate(q, k, cos, sin)`` over fresh leaf copies of q and k."""
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        cos, sin = inputs["cos"], inputs["sin"]
        return self.built(lambda: rotate(leaves["q"], leaves["k"], cos, sin), leaves, label)

    def _kernelindex(self, provider, inputs, params) -> Built:
        return self._rotation(rope, inputs, "KernelIndex Triton RoPE (fwd+bwd)")

    def _liger(self, provider, inputs, params) -> Built:
        rotate = liger_attr(inputs["q"], "rope", "liger_rotary_pos_emb")
        return self._rotation(rotate, inputs, liger_label("liger_rotary_pos_emb"))

    def _huggingface(self, provider, inputs, params) -> Built:
        try:
            from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
        except Exception:  # noqa: BLE001 - without Transformers, its arithmetic in PyTorch
            return self._rotation(torch_apply_rotary_pos_emb, inputs,
                                  "PyTorch equivalent of Transformers llama apply_rotary_pos_emb")
        return self._rotation(apply_rotary_pos_emb, inputs,
                              f"Transformers {version_label('transformers')} llama apply_rotary_pos_emb")

    def _torch(self, provider, inputs, params) -> Built:
        return self._rotation(torch_apply_rotary_pos_emb, inputs, "PyTorch eager rotate_half")

    # "torch" is built for the CPU tests; upstream's RoPE runs compare the other three.
    BUILDERS = {"kernelindex": _kernelindex, "liger": _liger, "huggingface": _huggingface, "torch": _torch}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward: read q, k, cos, sin; write q', k'. Backward: read dq', dk', cos, sin; write dq, dk.
        Full: distinct inputs once (q, k, cos, sin, dq', dk'), outputs once (q', k', dq, dk)."""
        s = input_shapes(self.KERNEL, params)
        e = RERUN_BYTES[dtype]
        qk = (numel(s["q"]) + numel(s["k"])) * e
        tables = (numel(s["cos"]) + numel(s["sin"])) * e
        one = 2 * qk + tables
        return {"forward": one, "backward": one, "full": 2 * one - tables}[mode]

    def flops(self, params, mode) -> int:
        """Two multiplies and one add per element."""
        s = input_shapes(self.KERNEL, params)
        one = 3 * (numel(s["q"]) + numel(s["k"]))
        return per_mode(one, one, mode)


ADAPTER = RoPE()
