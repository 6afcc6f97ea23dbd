"""Fused linear cross entropy's rerun adapter (``kernels._adapter.RerunAdapter``): the mean cross-entropy
loss of logits = x @ weight.T against integer targets, x [tokens, hidden], weight [vocab, hidden].

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_fused_linear_cross_entropy.py``: x drawn from a
normal distribution, targets uniform over the vocabulary (none ignored), and the LM head weight drawn with
scale 1/sqrt(hidden), the spread of ``torch.nn.Linear``'s own initialization the script uses.

The reference runs in float32 (TF32 off): at the rerun sizes (32768 tokens, vocab 128256) the float64
logits alone take 34 GB and autograd keeps the log-softmax and its gradient beside them, more than the
GPU holds, while float32 is far more precise than the bfloat16 passes it checks.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kernels._adapter import Built, Unavailable
from kernels._providers import LIGER_TRITON_NEEDS_ON_CPU, liger_triton_attr, version_label
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, leaf_copies

KERNEL = "fused_linear_cross_entropy"
# "huggingface" (the script's first name) and "torch" (its current one) are its TorchLMHeadCE;
# "liger-fp32-accum" is Liger's loss with float32 gradient accumulation, as the current script also runs.
PROVIDERS = ("liger", "huggingface", "torch", "liger-fp32-accum")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("loss",)
GRAD_INPUTS = ("x", "weight")
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float32
IGNORE_INDEX = -100
INDEX_BYTES = 8
LOSS_BYTES = 4


def _dims(params) -> tuple[int, int, int]:
    """(tokens, hidden, vocab) of a workload."""
    s = input_shapes(KERNEL, params)
    return s["x"][0], s["x"][1], s["weight"][0]


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = RERUN_DTYPES[dtype]
    tokens, hidden = s["x"]
    vocab = s["weight"][0]
    x = torch.randn((tokens, hidden), generator=gen, device=device, dtype=torch.float32)
    weight = torch.randn((vocab, hidden), generator=gen, device=device, dtype=torch.float32) / math.sqrt(hidden)
    target = torch.randint(0, vocab, (tokens,), generator=gen, device=device, dtype=torch.int64)
    return {"x": x.to(td), "weight": weight.to(td), "target": target}


def reference(inputs, params):
    return (F.cross_entropy(inputs["x"] @ inputs["weight"].T, inputs["target"], ignore_index=IGNORE_INDEX),)


def _torch_lm_head_ce(x, weight, target):
    """The script's TorchLMHeadCE: a bias-free torch.nn.Linear then torch.nn.CrossEntropyLoss (mean), the
    logits materialized in the input dtype."""
    return F.cross_entropy(F.linear(x, weight), target, ignore_index=IGNORE_INDEX, reduction="mean")


def build(provider, inputs, params) -> Built:
    leaves = leaf_copies(inputs, GRAD_INPUTS)
    x, weight, target = leaves["x"], leaves["weight"], inputs["target"]
    if provider in ("liger", "liger-fp32-accum"):
        accum = torch.float32 if provider == "liger-fp32-accum" else None
        liger_loss = liger_triton_attr(x, "fused_linear_cross_entropy", "LigerFusedLinearCrossEntropyLoss",
                                       LIGER_TRITON_NEEDS_ON_CPU)
        loss = liger_loss(ignore_index=IGNORE_INDEX, reduction="mean", accum_dtype=accum)
        suffix = ", float32 accumulation" if accum is not None else ""
        return Built(lambda: (loss(weight, x, target),), leaves,
                     f"Liger-Kernel {version_label('liger-kernel')} LigerFusedLinearCrossEntropyLoss (Triton{suffix})",
                     OUTPUT_NAMES)
    if provider in ("huggingface", "torch"):
        return Built(lambda: (_torch_lm_head_ce(x, weight, target),), leaves,
                     f"PyTorch {torch.__version__} nn.Linear + nn.CrossEntropyLoss (upstream TorchLMHeadCE, "
                     f"its {provider} provider)", OUTPUT_NAMES)
    raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")


def bytes_moved(params, dtype, mode) -> int:
    """Without materialized logits: forward reads x, weight and the targets and writes the loss; backward
    reads them again and writes dx and dweight; full reads them once and writes the loss, dx and dweight."""
    tokens, hidden, vocab = _dims(params)
    e = RERUN_BYTES[dtype]
    xb, wb, tb = tokens * hidden * e, vocab * hidden * e, tokens * INDEX_BYTES
    reads = xb + wb + tb
    return {"forward": reads + LOSS_BYTES, "backward": reads + xb + wb, "full": reads + LOSS_BYTES + xb + wb}[mode]


def flops(params, mode) -> int:
    """GEMMs at 2 FLOPs a multiply-add (forward: the logits; backward: dx and dweight) plus about 4 FLOPs a
    logit for the softmax forward (max, exp, sum, log) and 2 for its gradient."""
    tokens, hidden, vocab = _dims(params)
    gemm = 2 * tokens * hidden * vocab
    fwd, bwd = gemm + 4 * tokens * vocab, 2 * gemm + 2 * tokens * vocab
    return {"forward": fwd, "backward": bwd, "full": fwd + bwd}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    """(m, n, k): the logits x @ weight.T, the input gradient dlogits @ weight, the weight gradient
    dlogits.T @ x."""
    tokens, hidden, vocab = _dims(params)
    return [(tokens, vocab, hidden), (tokens, hidden, vocab), (vocab, hidden, tokens)]
