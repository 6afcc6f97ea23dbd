"""Llama 4 RoPE's rerun adapter: q and k rotated by complex frequencies.

KernelIndex's provider is ``kernels.llama4_rope.ops.llama4_rope``.
"""

from __future__ import annotations

import torch

from kernels._adapter import Adapter, Built
from kernels._providers import liger_attr, liger_label, version_label
from kernels._spec import DTYPE_BYTES
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, leaf_copies, numel, per_mode, randn
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


class Llama4RoPE(Adapter):
    KERNEL = "llama4_rope"
    PROVIDERS = ("kernelindex", "liger", "huggingface")
    OUTPUT_NAMES = ("q", "k")
    GRAD_INPUTS = ("q", "k")
    DETERMINISTIC_INPUTS = ("freqs_cis",)
    REFERENCE_DTYPE = torch.float64

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        shapes = input_shapes(self.KERNEL, params)
        gen = generator(seed, device)
        td = RERUN_DTYPES[dtype]
        q = randn(shapes["q"], td, gen, device)
        k = randn(shapes["k"], td, gen, device)
        return {"q": q, "k": k, "freqs_cis": freqs_cis_for(shapes["q"][1], shapes["q"][3], device)}

    def reference(self, inputs, params) -> tuple[torch.Tensor, torch.Tensor]:
        """Complex multiply in the inputs' precision (the comparator upcasts to float64 / complex128)."""
        q, k, f = inputs["q"], inputs["k"], inputs["freqs_cis"]
        f = f.reshape(1, q.shape[1], 1, q.shape[-1] // 2)

        def rot(x):
            xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
            return torch.view_as_real(xc * f).flatten(3)

        return rot(q), rot(k)

    def _rotation(self, rotate, inputs, label: str) -> Built:
        """A pass of ``rotate(q, k, freqs_cis)`` over fresh leaf copies of q and k."""
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        f = inputs["freqs_cis"]
        return self.built(lambda: rotate(leaves["q"], leaves["k"], f), leaves, label)

    def _kernelindex(self, provider, inputs, params) -> Built:
        return self._rotation(llama4_rope, inputs, "KernelIndex Triton llama4 RoPE (fwd+bwd)")

    def _liger(self, provider, inputs, params) -> Built:
        rotate = liger_attr(inputs["q"], "llama4_rope", "liger_llama4_text_rotary_pos_emb")
        return self._rotation(rotate, inputs, liger_label("liger_llama4_text_rotary_pos_emb"))

    def _huggingface(self, provider, inputs, params) -> Built:
        try:
            from transformers.models.llama4.modeling_llama4 import apply_rotary_emb
        except Exception:  # noqa: BLE001 - without Transformers, its arithmetic in PyTorch
            return self._rotation(torch_apply_rotary_emb, inputs,
                                  "PyTorch equivalent of Transformers llama4 apply_rotary_emb")
        return self._rotation(apply_rotary_emb, inputs,
                              f"Transformers {version_label('transformers')} llama4 apply_rotary_emb")

    def _torch(self, provider, inputs, params) -> Built:
        return self._rotation(torch_apply_rotary_emb, inputs, "PyTorch complex multiply (eager)")

    # "torch" is built for the CPU tests; upstream's Llama 4 RoPE runs compare the other three.
    BUILDERS = {"kernelindex": _kernelindex, "liger": _liger, "huggingface": _huggingface, "torch": _torch}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward: read q, k, freqs; write q', k'. Backward: read dq', dk', freqs; write dq, dk.
        Full: every distinct input once (q, k, freqs, dq', dk') and every output once (q', k', dq, dk)."""
        shapes = input_shapes(self.KERNEL, params)
        e = RERUN_BYTES[dtype]
        qb, kb = numel(shapes["q"]) * e, numel(shapes["k"]) * e
        fb = shapes["q"][1] * shapes["q"][3] // 2 * DTYPE_BYTES["complex64"]
        one = 2 * (qb + kb) + fb
        return {"forward": one, "backward": one, "full": 2 * one - fb}[mode]

    def flops(self, params, mode) -> int:
        """A complex multiply is 6 real operations per pair (4 mul + 2 add)."""
        shapes = input_shapes(self.KERNEL, params)
        pairs = (numel(shapes["q"]) + numel(shapes["k"])) // 2
        return per_mode(6 * pairs, 6 * pairs, mode)


ADAPTER = Llama4RoPE()
