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

from kernels.providers import liger_attr, liger_label, version_label
from kernels.tensors import Draws
from kernels.engines.rotary import RotaryAdapter, rotate_half

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


def _torch_apply_multimodal_rotary_pos_emb(q, k, cos, sin, section, unsqueeze_dim=1):
    """PyTorch equivalent of Transformers' Qwen2-VL ``apply_multimodal_rotary_pos_emb``: each chunk of the
    head dimension (the sections, twice over for the two halves) takes cos/sin from its own position row."""
    chunks = section * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(cos.split(chunks, dim=-1))], dim=-1).unsqueeze(unsqueeze_dim)
    sin = torch.cat([m[i % 3] for i, m in enumerate(sin.split(chunks, dim=-1))], dim=-1).unsqueeze(unsqueeze_dim)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


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


class Qwen2VLMRoPE(RotaryAdapter):
    KERNEL = "qwen2vl_mrope"
    DETERMINISTIC_INPUTS = ("cos", "sin")

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        d = Draws(self.KERNEL, params, dtype, seed, device)
        batch, q_heads, seq, head_dim = d.shapes["q"]
        kv_heads = d.shapes["k"][1]
        q = torch.randn((batch, seq, q_heads, head_dim), generator=d.gen, device=device, dtype=torch.float32)
        k = torch.randn((batch, seq, kv_heads, head_dim), generator=d.gen, device=device, dtype=torch.float32)
        cos, sin = cos_sin_for(seq, head_dim, d.dtype, device)
        return {"q": q.to(d.dtype).transpose(1, 2), "k": k.to(d.dtype).transpose(1, 2), "cos": cos, "sin": sin}

    def reference(self, inputs, params):
        q, k = inputs["q"], inputs["k"]
        return _torch_apply_multimodal_rotary_pos_emb(q, k, inputs["cos"], inputs["sin"], mrope_section(q.shape[-1]))

    def _huggingface(self, provider, inputs, params):
        rotate, label = huggingface_rotation()
        return self.rotation(rotate, inputs, label, mrope_section(inputs["q"].shape[-1]))

    def _liger(self, provider, inputs, params):
        q, cos, sin = inputs["q"], inputs["cos"], inputs["sin"]
        rotate = liger_attr(q, "qwen2vl_mrope", "liger_multimodal_rotary_pos_emb")
        # Liger's kernel indexes cos/sin by q's batch; the script's batch is 1, larger ones get their own rows.
        if cos.shape[1] != q.shape[0]:
            cos = cos.expand(3, q.shape[0], -1, -1).contiguous()
            sin = sin.expand(3, q.shape[0], -1, -1).contiguous()
        return self.rotation(rotate, {**inputs, "cos": cos, "sin": sin},
                             liger_label("liger_multimodal_rotary_pos_emb", "Triton"), mrope_section(q.shape[-1]))

    # "liger_triton" is the cuTile comparison's name for Liger's Triton kernel, "liger" the script's own.
    BUILDERS = {"huggingface": _huggingface, "liger_triton": _liger, "liger": _liger}


ADAPTER = Qwen2VLMRoPE()
