"""What multi-token attention's adapters share, dense (softmax) and sparse (sparsemax): out =
mask_0(conv2d(activation(mask(scores)))), scores [batch, C_in, seq, seq], weight [C_out, C_in // groups,
kernel, kernel], the masks causal (keys after the query masked), stride 1, padding kernel // 2.

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_{,sparse_}multi_token_attention.py``: scores
drawn from a standard normal; the weight as ``LigerMultiTokenAttention.reset_parameters`` draws it
(``kaiming_uniform_(a=sqrt(5))``: uniform within 1/sqrt(fan_in)), which upstream copies into its PyTorch
module; the bias, where the workload has one, zeros as that initialization leaves it. The spec's inputs
are the scores and the weight, so the bias is built with each provider, takes gradients as upstream's
parameter does, and is not compared.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kernels.adapter import Adapter, Built
from kernels.providers import liger_attr
from kernels.tensors import RERUN_BYTES, Draws, input_shapes, leaf, numel, per_mode

# The masked-out value upstream's PyTorch modules and Liger's kernels write before the activation.
MASK_VALUE = -1e9


def conv_config(params) -> tuple[int, int, bool]:
    """(kernel, groups, bias) of a workload; bias unless the workload says otherwise, as upstream runs."""
    return int(params["kernel"]), int(params.get("groups", 1)), bool(params.get("bias", True))


def causal_mask(seq: int, device) -> torch.Tensor:
    """True where the key is at or before the query."""
    return torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=device)).view(1, 1, seq, seq)


def masked_conv(probs, weight, bias, params) -> torch.Tensor:
    """conv2d of the probabilities (stride 1, padding kernel // 2), the future positions zeroed."""
    kernel, groups, _ = conv_config(params)
    out = F.conv2d(probs, weight, bias, stride=1, padding=kernel // 2, groups=groups)
    return out.masked_fill(~causal_mask(probs.shape[-1], probs.device), 0.0)


class MultiTokenAttentionAdapter(Adapter):
    """A multi-token attention adapter; a subclass sets ``KERNEL``, its builders and its activation: the
    reference's (``activation``, over the scores with the causal mask) and its FLOPs a score
    (``ACTIVATION_FLOPS``: forward, backward). No GEMMs: a convolution C_in / groups *
    kernel^2 deep (36 upstream) is bound by the [seq, seq] maps it reads and writes, not by a GEMM rate."""

    OUTPUT_NAMES = ("out",)
    GRAD_INPUTS = ("scores", "weight")
    REFERENCE_DTYPE = torch.float64
    ACTIVATION_FLOPS: tuple[int, int]

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        """Scores from a standard normal and the weight uniform within 1/sqrt(fan_in), as
        ``kaiming_uniform_(a=sqrt(5))`` draws it; drawn in float32 then cast, as upstream casts its module."""
        d = Draws(self.KERNEL, params, dtype, seed, device)
        scores = d.normal("scores")
        _, c_in_per_group, kh, kw = d.shapes["weight"]
        bound = 1.0 / math.sqrt(c_in_per_group * kh * kw)
        weight = torch.rand(d.shapes["weight"], generator=d.gen, device=device, dtype=torch.float32)
        return {"scores": scores, "weight": ((2 * weight - 1) * bound).to(d.dtype)}

    def activation(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def reference(self, inputs, params):
        scores, weight = inputs["scores"], inputs["weight"]
        probs = self.activation(scores, causal_mask(scores.shape[-1], scores.device))
        return (masked_conv(probs, weight, None, params),)

    def liger_module(self, inputs, params, sparse: bool):
        """``LigerMultiTokenAttention`` with the inputs' weight and a zero bias; Unavailable where it cannot
        run."""
        scores, weight = inputs["scores"], inputs["weight"]
        cls = liger_attr(scores, "multi_token_attention", "LigerMultiTokenAttention")
        kernel, groups, bias = conv_config(params)
        module = cls(
            in_channels=scores.shape[1],
            out_channels=weight.shape[0],
            kernel_size=kernel,
            stride=1,
            padding=kernel // 2,
            dilation=1,
            groups=groups,
            bias=bias,
            sparse=sparse,
        ).to(device=scores.device, dtype=scores.dtype)
        with torch.no_grad():
            module.weight.copy_(weight)
            if module.bias is not None:
                module.bias.zero_()
        return module

    def module_built(self, forward, weight, inputs, label: str) -> Built:
        """A pass of ``forward`` over a fresh leaf copy of the scores, the module's ``weight`` standing for the
        weight input."""
        scores = leaf(inputs["scores"])
        return self.built(lambda: (forward(scores),), {"scores": scores, "weight": weight}, label)

    def torch_built(self, attention, inputs, params, upstream: str) -> Built:
        """A pass of ``attention(scores, weight, bias, params)``, the ``forward`` of the PyTorch module the
        upstream script names ``upstream`` (``script's Class``) restated, over fresh leaf copies of the scores
        and the weight, with the zero bias that module starts with (a leaf that takes gradients; None without
        bias)."""
        scores, weight = leaf(inputs["scores"]), leaf(inputs["weight"])
        bias = None
        if conv_config(params)[2]:
            bias = torch.zeros(weight.shape[0], dtype=weight.dtype, device=weight.device, requires_grad=True)
        return self.built(lambda: (attention(scores, weight, bias, params),), {"scores": scores, "weight": weight},
                          f"PyTorch {torch.__version__} equivalent of upstream {upstream}")

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward reads scores, weight, bias and writes out; backward reads dout, the scores (the
        probabilities recomputed from them) and the weight, and writes dscores, dweight, dbias; full reads
        scores, weight, bias, dout once and writes out, dscores, dweight, dbias. The activation's own work
        (a sparsemax's sort and support) is not counted."""
        s = input_shapes(self.KERNEL, params)
        e = RERUN_BYTES[dtype]
        scores, weight = numel(s["scores"]) * e, numel(s["weight"]) * e
        batch, _, seq, _ = s["scores"]
        out = batch * s["weight"][0] * seq * seq * e
        bias = s["weight"][0] * e if conv_config(params)[2] else 0
        return {
            "forward": scores + weight + bias + out,
            "backward": out + scores + weight + scores + weight + bias,
            "full": scores + weight + bias + out + out + scores + weight + bias,
        }[mode]

    def flops(self, params, mode) -> int:
        """The dense convolution over the whole [seq, seq] map, as the operation defines it: 2 * (C_in /
        groups) * kernel^2 per output element forward, twice that backward (dscores and dweight), plus one add
        per output element for the bias and its gradient; and, per score element, ``ACTIVATION_FLOPS`` for the
        masked activation."""
        s = input_shapes(self.KERNEL, params)
        c_out, c_in_per_group, kh, kw = s["weight"]
        batch, _, seq, _ = s["scores"]
        outputs = batch * c_out * seq * seq
        conv = 2 * c_in_per_group * kh * kw * outputs
        bias = outputs if conv_config(params)[2] else 0
        n = numel(s["scores"])
        forward, backward = self.ACTIVATION_FLOPS
        return per_mode(conv + bias + forward * n, 2 * conv + bias + backward * n, mode)
