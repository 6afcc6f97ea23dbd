"""Qwen2-VL M-RoPE's rerun adapter: rotary embedding of q and k whose
head dimension is split into temporal, height and width sections, each rotated by its own positions.

q [batch, q_heads, seq, head_dim] and k [batch, kv_heads, seq, head_dim] follow Liger-Kernel's
``benchmark/scripts/benchmark_qwen2vl_mrope.py``: drawn as [batch, seq, heads, head_dim] and transposed, so
that they share its memory layout (Liger's kernel rotates that layout in place, as upstream). cos and sin
[3, 1, seq, head_dim] are what Transformers' ``Qwen2VLRotaryEmbedding`` returns for the script's position
ids (0..3*seq-1 laid out [3, 1, seq]) with rope_theta 1e6, computed here in float32 and cast.
"""

from __future__ import annotations

import inspect

import torch

from kernels._adapter import Adapter, Built
from kernels._providers import liger_attr, liger_label, version_label
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, leaf_copies, per_mode

ROPE_THETA = 1000000.0


def mrope_section(head_dim: int) -> list[int]:
    """The script's split of the rotated half-dimension: 3/16 of head_dim each to height and width, the
    rest to time."""
    hw = head_dim * 3 // 16
    return [head_dim // 2 - 2 * hw, hw, hw]


def cos_sin_for(seq: int, head_dim: int, dtype, device):
    """Qwen2VLRotaryEmbedding's cos and sin [3, 1, seq, head_dim] (default rope type, scaling 1) for the
    script's position ids: section j (temporal, height, width) at positions j*seq .. j*seq+seq-1."""
    inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.int64).float() / head_dim))
    positions = torch.arange(3 * seq, device=device, dtype=torch.float32).view(3, 1, seq, 1)
    freqs = positions * inv_freq.view(1, 1, 1, -1)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _torch_apply_multimodal_rotary_pos_emb(q, k, cos, sin, section, unsqueeze_dim=1):
    """PyTorch equivalent of Transformers' Qwen2-VL ``apply_multimodal_rotary_pos_emb``: each chunk of the
    head dimension (the sections, twice over for the two halves) takes cos/sin from its own position row."""
    chunks = section * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(cos.split(chunks, dim=-1))], dim=-1).unsqueeze(unsqueeze_dim)
    sin = torch.cat([m[i % 3] for i, m in enumerate(sin.split(chunks, dim=-1))], dim=-1).unsqueeze(unsqueeze_dim)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def huggingface_rotation():
    """Transformers' function and its label, or the PyTorch equivalent labelled with why. Transformers 5
    dropped the function (its rotary embedding merges the sections itself), so the benchmark's baseline
    needs Transformers 4."""
    equivalent = "PyTorch equivalent of Transformers 4 Qwen2-VL apply_multimodal_rotary_pos_emb"
    try:
        from transformers.models.qwen2_vl import modeling_qwen2_vl
    except Exception:  # noqa: BLE001 - without Transformers, its arithmetic in PyTorch
        return _torch_apply_multimodal_rotary_pos_emb, f"{equivalent} (transformers not importable)"
    fn = getattr(modeling_qwen2_vl, "apply_multimodal_rotary_pos_emb", None)
    if fn is None:
        return (_torch_apply_multimodal_rotary_pos_emb,
                f"{equivalent} (Transformers {version_label('transformers')} has none)")
    if "mrope_section" not in inspect.signature(fn).parameters:
        return (_torch_apply_multimodal_rotary_pos_emb,
                f"{equivalent} (Transformers {version_label('transformers')}'s takes no mrope_section)")
    return fn, f"Transformers {version_label('transformers')} Qwen2-VL apply_multimodal_rotary_pos_emb"


class Qwen2VLMRoPE(Adapter):
    KERNEL = "qwen2vl_mrope"
    OUTPUT_NAMES = ("q", "k")
    GRAD_INPUTS = ("q", "k")
    DETERMINISTIC_INPUTS = ("cos", "sin")
    REFERENCE_DTYPE = torch.float64

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        s = input_shapes(self.KERNEL, params)
        gen = generator(seed, device)
        td = RERUN_DTYPES[dtype]
        batch, q_heads, seq, head_dim = s["q"]
        kv_heads = s["k"][1]
        q = torch.randn((batch, seq, q_heads, head_dim), generator=gen, device=device, dtype=torch.float32)
        k = torch.randn((batch, seq, kv_heads, head_dim), generator=gen, device=device, dtype=torch.float32)
        cos, sin = cos_sin_for(seq, head_dim, td, device)
        return {"q": q.to(td).transpose(1, 2), "k": k.to(td).transpose(1, 2), "cos": cos, "sin": sin}

    def reference(self, inputs, params):
        q, k = inputs["q"], inputs["k"]
        return _torch_apply_multimodal_rotary_pos_emb(q, k, inputs["cos"], inputs["sin"], mrope_section(q.shape[-1]))

    def _rotation(self, rotate, inputs, label: str) -> Built:
        """A pass of ``rotate(q, k, cos, sin, section)`` over fresh leaf copies of q and k."""
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        cos, sin, section = inputs["cos"], inputs["sin"], mrope_section(inputs["q"].shape[-1])
        return self.built(lambda: rotate(leaves["q"], leaves["k"], cos, sin, section), leaves, label)

    def _huggingface(self, provider, inputs, params) -> Built:
        rotate, label = huggingface_rotation()
        return self._rotation(rotate, inputs, label)

    def _liger(self, provider, inputs, params) -> Built:
        q, cos, sin = inputs["q"], inputs["cos"], inputs["sin"]
        liger = liger_attr(q, "qwen2vl_mrope", "liger_multimodal_rotary_pos_emb")
        # Liger's kernel indexes cos/sin by q's batch; the script's batch is 1, larger ones get their own rows.
        if cos.shape[1] != q.shape[0]:
            cos = cos.expand(3, q.shape[0], -1, -1).contiguous()
            sin = sin.expand(3, q.shape[0], -1, -1).contiguous()
        return self._rotation(liger, {**inputs, "cos": cos, "sin": sin},
                              liger_label("liger_multimodal_rotary_pos_emb", "Triton"))

    # "liger_triton" is the cuTile comparison's name for Liger's Triton kernel, "liger" the script's own.
    BUILDERS = {"huggingface": _huggingface, "liger_triton": _liger, "liger": _liger}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward reads q, k, cos, sin and writes q', k'; backward reads dq', dk', cos, sin and writes dq, dk;
        full reads the distinct inputs once (q, k, cos, sin, dq', dk') and writes q', k', dq, dk."""
        s = input_shapes(self.KERNEL, params)
        e = RERUN_BYTES[dtype]
        q, k, cos = s["q"], s["k"], s["cos"]
        qk = (q[0] * q[1] * q[2] * q[3] + k[0] * k[1] * k[2] * k[3]) * e
        tables = 2 * cos[0] * cos[1] * cos[2] * cos[3] * e
        one = 2 * qk + tables
        return {"forward": one, "backward": one, "full": 2 * one - tables}[mode]

    def flops(self, params, mode) -> int:
        """Two multiplies and one add per element of q and k, each way."""
        s = input_shapes(self.KERNEL, params)
        q, k = s["q"], s["k"]
        one = 3 * (q[0] * q[1] * q[2] * q[3] + k[0] * k[1] * k[2] * k[3])
        return per_mode(one, one, mode)


ADAPTER = Qwen2VLMRoPE()
