"""Llama 4 RoPE's rerun adapter: q and k rotated by complex frequencies.

KernelIndex's provider is ``kernels.llama4_rope.ops.llama4_rope``.
"""

from __future__ import annotations

import torch

from kernels.spec import DTYPE_BYTES
from kernels.tensors import Draws, input_shapes
from kernels.engines.rotary import RotaryAdapter
from kernels.llama4_rope.ops import llama4_rope

ROPE_THETA = 500000.0


def freqs_cis_for(seq: int, head_dim: int, device, theta: float = ROPE_THETA) -> torch.Tensor:
    """Complex frequencies [1, seq, head_dim/2] as Llama 4's text rotary embedding builds them (no scaling)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    pos = torch.arange(seq, device=device, dtype=torch.float32)
    angles = torch.outer(pos, inv_freq)
    return torch.polar(torch.ones_like(angles), angles).unsqueeze(0)


def torch_apply_rotary_emb(xq, xk, freqs_cis):
    """PyTorch equivalent of Transformers' Llama 4 ``apply_rotary_emb``."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis[:, :, None, :]).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis[:, :, None, :]).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Llama4RoPE(RotaryAdapter):
    KERNEL = "llama4_rope"
    DETERMINISTIC_INPUTS = ("freqs_cis",)
    KERNELINDEX = (llama4_rope, "KernelIndex Triton llama4 RoPE (fwd+bwd)")
    LIGER = ("llama4_rope", "liger_llama4_text_rotary_pos_emb")
    TRANSFORMERS = ("transformers.models.llama4.modeling_llama4", "apply_rotary_emb", "llama4 apply_rotary_emb")
    EQUIVALENT = staticmethod(torch_apply_rotary_emb)

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        d = Draws(self.KERNEL, params, dtype, seed, device)
        q, k = d.normal("q"), d.normal("k")
        return {"q": q, "k": k, "freqs_cis": freqs_cis_for(d.shapes["q"][1], d.shapes["q"][3], device)}

    def reference(self, inputs, params) -> tuple[torch.Tensor, torch.Tensor]:
        """Complex multiply in the inputs' precision (the comparator upcasts to float64 / complex128)."""
        q, k, f = inputs["q"], inputs["k"], inputs["freqs_cis"]
        f = f.reshape(1, q.shape[1], 1, q.shape[-1] // 2)

        def rot(x):
            xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
            return torch.view_as_real(xc * f).flatten(3)

        return rot(q), rot(k)

    def table_bytes(self, params, dtype) -> int:
        """The complex64 frequencies [seq, head_dim / 2]."""
        q = input_shapes(self.KERNEL, params)["q"]
        return q[1] * q[3] // 2 * DTYPE_BYTES["complex64"]


ADAPTER = Llama4RoPE()
