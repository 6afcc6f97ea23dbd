"""Fused linear JSD's rerun adapter (``kernels._adapter.RerunAdapter``): the mean over tokens of the
generalized Jensen-Shannon divergence (beta 0.5, temperature 1, no labels) between
log_softmax(student_x @ student_weight.T) and log_softmax(teacher_x @ teacher_weight.T).

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_fused_linear_jsd.py``: both hidden states and
both LM head weights drawn uniform on [0, 1) (the script's ``torch.rand``). Gradients are taken for the
student input and weight: the teacher side is a constant to Liger's loss.

Providers: ``liger``, Liger's ``LigerFusedLinearJSD`` (Triton); ``torch``, a PyTorch equivalent of the
script's TorchLMHeadJSD (bias-free linear heads, log-softmax, TorchJSD's lerp mixture and KLDivLoss).

The reference runs in float32 (TF32 off): at the rerun sizes (8192 tokens, vocab 128256, two heads) float64
logits and their softmax intermediates would not fit beside each other, and float32 is far more precise than
the bfloat16 passes it checks.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kernels._adapter import Built, Unavailable
from kernels._providers import LIGER_TRITON_NEEDS_ON_CPU, liger_triton_attr, version_label
from kernels._tensors import RERUN_DTYPES, generator, leaf_copies, required_input_shapes
from kernels.engines.lm_head import lm_head_bytes, lm_head_flops, lm_head_matmuls

KERNEL = "fused_linear_jsd"
PROVIDERS = ("liger", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("loss",)
GRAD_INPUTS = ("student_x", "student_weight")
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float32
BETA = 0.5
IGNORE_INDEX = -100
TEMPERATURE = 1.0
# Two log-softmaxes, the mixture and two KL terms a logit forward; their gradient backward.
FWD_PER_LOGIT = 12
BWD_PER_LOGIT = 6


def _dims(params) -> tuple[int, int, int]:
    """(tokens, hidden, vocab) of a workload."""
    s = required_input_shapes(KERNEL, params)
    return s["student_x"][0], s["student_x"][1], s["student_weight"][0]


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = required_input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = RERUN_DTYPES[dtype]
    order = ("student_weight", "teacher_weight", "student_x", "teacher_x")
    return {n: torch.rand(tuple(s[n]), generator=gen, device=device, dtype=torch.float32).to(td) for n in order}


def _jsd(student_logp, teacher_logp):
    """Mean over rows of beta * KL(p_teacher || m) + (1 - beta) * KL(p_student || m), m the beta-mixture."""
    log_m = torch.logsumexp(torch.stack([student_logp + math.log(1 - BETA), teacher_logp + math.log(BETA)]), dim=0)
    per_row = (BETA * (teacher_logp.exp() * (teacher_logp - log_m)).sum(-1)
               + (1 - BETA) * (student_logp.exp() * (student_logp - log_m)).sum(-1))
    return per_row.mean()


def reference(inputs, params):
    student = F.log_softmax(inputs["student_x"] @ inputs["student_weight"].T / TEMPERATURE, dim=-1)
    teacher = F.log_softmax(inputs["teacher_x"] @ inputs["teacher_weight"].T / TEMPERATURE, dim=-1)
    return (_jsd(student, teacher),)


def _torch_lm_head_jsd(student_x, student_weight, teacher_x, teacher_weight):
    """The script's TorchLMHeadJSD: logits in the input dtype, log-softmax, then TorchJSD in float32 (the
    lerp mixture, ``nn.KLDivLoss(reduction="none", log_target=True)``), cast back to the input dtype."""
    student = torch.log_softmax(F.linear(student_x, student_weight) / TEMPERATURE, dim=-1).float()
    teacher = torch.log_softmax(F.linear(teacher_x, teacher_weight) / TEMPERATURE, dim=-1).float()
    log_m = torch.log(torch.lerp(torch.exp(student), torch.exp(teacher), BETA))
    kl = lambda target: F.kl_div(log_m, target, reduction="none", log_target=True).sum(dim=-1)  # noqa: E731
    loss = BETA * kl(teacher) + (1 - BETA) * kl(student)
    return (loss / student.shape[0]).sum().to(student_x.dtype)


def build(provider, inputs, params) -> Built:
    leaves = leaf_copies(inputs, GRAD_INPUTS)
    sx, sw = leaves["student_x"], leaves["student_weight"]
    tx, tw = inputs["teacher_x"], inputs["teacher_weight"]
    if provider == "liger":
        cls = liger_triton_attr(sx, "fused_linear_jsd", "LigerFusedLinearJSD", LIGER_TRITON_NEEDS_ON_CPU)
        loss = cls(jsd_beta=BETA, ignore_index=IGNORE_INDEX, temperature=TEMPERATURE)
        return Built(lambda: (loss(sx, sw, tx, tw, None),), leaves,
                     f"Liger-Kernel {version_label('liger-kernel')} LigerFusedLinearJSD (Triton)", OUTPUT_NAMES)
    if provider == "torch":
        return Built(lambda: (_torch_lm_head_jsd(sx, sw, tx, tw),), leaves,
                     f"PyTorch {torch.__version__} equivalent of the upstream TorchLMHeadJSD", OUTPUT_NAMES)
    raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")


def _heads(params) -> list[tuple[int, int, int, bool]]:
    tokens, hidden, vocab = _dims(params)
    return [(tokens, hidden, vocab, True), (tokens, hidden, vocab, False)]


def bytes_moved(params, dtype, mode) -> int:
    """Both heads' inputs and weights read; the student's gradients written; no labels."""
    return lm_head_bytes(_heads(params), dtype, mode, 0)


def flops(params, mode) -> int:
    return lm_head_flops(_heads(params), mode, FWD_PER_LOGIT, BWD_PER_LOGIT)


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return lm_head_matmuls(_heads(params))
