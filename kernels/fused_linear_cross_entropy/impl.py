"""Fused linear cross entropy's rerun adapter: the mean cross-entropy
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

from kernels.adapter import Adapter, Built
from kernels.providers import liger_attr, liger_label
from kernels.spec import DTYPE_BYTES
from kernels.tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, leaf_copies, per_mode

IGNORE_INDEX = -100


def torch_lm_head_ce(x, weight, target):
    """The script's TorchLMHeadCE: a bias-free torch.nn.Linear then torch.nn.CrossEntropyLoss (mean), the
    logits materialized in the input dtype."""
    return F.cross_entropy(F.linear(x, weight), target, ignore_index=IGNORE_INDEX, reduction="mean")


class FusedLinearCrossEntropy(Adapter):
    KERNEL = "fused_linear_cross_entropy"
    OUTPUT_NAMES = ("loss",)
    GRAD_INPUTS = ("x", "weight")
    REFERENCE_DTYPE = torch.float32

    def dims(self, params) -> tuple[int, int, int]:
        """(tokens, hidden, vocab) of a workload."""
        s = input_shapes(self.KERNEL, params)
        return s["x"][0], s["x"][1], s["weight"][0]

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        tokens, hidden, vocab = self.dims(params)
        gen = generator(seed, device)
        td = RERUN_DTYPES[dtype]
        x = torch.randn((tokens, hidden), generator=gen, device=device, dtype=torch.float32)
        weight = torch.randn((vocab, hidden), generator=gen, device=device, dtype=torch.float32) / math.sqrt(hidden)
        target = torch.randint(0, vocab, (tokens,), generator=gen, device=device, dtype=torch.int64)
        return {"x": x.to(td), "weight": weight.to(td), "target": target}

    def reference(self, inputs, params):
        return (F.cross_entropy(inputs["x"] @ inputs["weight"].T, inputs["target"], ignore_index=IGNORE_INDEX),)

    def _liger(self, provider, inputs, params) -> Built:
        lv, target = leaf_copies(inputs, self.GRAD_INPUTS), inputs["target"]
        accum = torch.float32 if provider == "liger-fp32-accum" else None
        cls = liger_attr(lv["x"], "fused_linear_cross_entropy", "LigerFusedLinearCrossEntropyLoss")
        loss = cls(ignore_index=IGNORE_INDEX, reduction="mean", accum_dtype=accum)
        how = "Triton, float32 accumulation" if accum is not None else "Triton"
        return self.built(lambda: (loss(lv["weight"], lv["x"], target),), lv,
                          liger_label("LigerFusedLinearCrossEntropyLoss", how))

    def _torch(self, provider, inputs, params) -> Built:
        lv, target = leaf_copies(inputs, self.GRAD_INPUTS), inputs["target"]
        label = (f"PyTorch {torch.__version__} nn.Linear + nn.CrossEntropyLoss (upstream TorchLMHeadCE, "
                 f"its {provider} provider)")
        return self.built(lambda: (torch_lm_head_ce(lv["x"], lv["weight"], target),), lv, label)

    # "huggingface" (the script's first name) and "torch" (its current one) are its TorchLMHeadCE;
    # "liger-fp32-accum" is Liger's loss with float32 gradient accumulation, as the current script also runs.
    BUILDERS = {"liger": _liger, "huggingface": _torch, "torch": _torch, "liger-fp32-accum": _liger}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Without materialized logits: forward reads x, weight and the targets and writes the loss; backward
        reads them again and writes dx and dweight; full reads them once and writes the loss, dx and dweight."""
        tokens, hidden, vocab = self.dims(params)
        e = RERUN_BYTES[dtype]
        xb, wb, tb = tokens * hidden * e, vocab * hidden * e, tokens * DTYPE_BYTES["int64"]
        reads, loss = xb + wb + tb, DTYPE_BYTES["fp32"]
        return {"forward": reads + loss, "backward": reads + xb + wb, "full": reads + loss + xb + wb}[mode]

    def flops(self, params, mode) -> int:
        """GEMMs at 2 FLOPs a multiply-add (forward: the logits; backward: dx and dweight) plus about 4 FLOPs a
        logit for the softmax forward (max, exp, sum, log) and 2 for its gradient."""
        tokens, hidden, vocab = self.dims(params)
        gemm = 2 * tokens * hidden * vocab
        return per_mode(gemm + 4 * tokens * vocab, 2 * gemm + 2 * tokens * vocab, mode)

    def matmul_shapes(self, params) -> list[tuple[int, int, int]]:
        """(m, n, k): the logits x @ weight.T, the input gradient dlogits @ weight, the weight gradient
        dlogits.T @ x."""
        tokens, hidden, vocab = self.dims(params)
        return [(tokens, vocab, hidden), (tokens, hidden, vocab), (vocab, hidden, tokens)]


ADAPTER = FusedLinearCrossEntropy()
