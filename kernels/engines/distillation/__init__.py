"""The rerun adapter of a distillation loss over two LM heads (JSD, cosine similarity), one class for the two.

Liger-Kernel's ``benchmark/scripts/benchmark_distill_{jsd,cosine}_loss.py`` time a student head (hidden // 2)
against a frozen teacher head (hidden): loss = weight_hard_loss * CE(student logits, target) + weight_soft_loss
* soft(student logits, teacher logits), both averaged over the unignored tokens. Inputs follow the scripts:
student and teacher hidden states uniform on [0, 1) (``torch.rand``), targets uniform over the vocabulary with
none ignored, then both heads' weights as ``torch.nn.Linear`` initializes them (the scripts keep those weights).
Gradients are taken for the student input and weight: both upstream losses compute the teacher's logits
without gradients.

Providers: ``liger``, Liger's chunked loss class (plain PyTorch, ``torch.compile``d on CUDA, as the script's
``Function.apply`` calls it at its defaults: beta 0.5, temperature 1, chunks of 1024 tokens); ``torch``, a
PyTorch equivalent of the script's baseline, ``HFDistillationLoss.get_batch_loss_metrics`` with the JSD or
cosine ``distillation_loss`` of Liger's ``test/chunked_loss`` (not in the wheel): logits in the input dtype,
upcast to float32, cross entropy averaged over the unignored tokens, the soft loss at that class's own
defaults.

The reference is the loss Liger computes, in float32 (TF32 off): at the rerun sizes (8192 tokens, vocab
128256, two heads) float64 logits and their softmax intermediates would not fit beside each other, and float32
is far more precise than the bfloat16 passes it checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kernels.adapter import Built
from kernels.tensors import RERUN_DTYPES, generator, input_shapes, leaf_copies, per_mode
from kernels.engines.lm_head import (
    LMHeadAdapter,
    chunked_label,
    compiled_on,
    liger_chunked_loss,
    linear_weight,
    lm_head_flops,
)

TEMPERATURE = 1.0
CHUNK_SIZE = 1024
# The script's extra_configs, for parameters a workload leaves out.
DEFAULTS = {"ignore_index": -100, "weight_hard_loss": 0.5, "weight_soft_loss": 0.5}
# FLOPs a (token, vocab) logit besides the GEMMs, forward and backward: the hard loss's log-softmax and gather
# (4 and 2) plus the soft loss's: JSD's two log-softmaxes, mixture and KL terms (12 and 6); cosine's two
# row normalizations and the dot product (8 and 4).
PER_LOGIT = {"jsd": (16, 8), "cosine": (12, 6)}


def loss_settings(params) -> tuple[int, float, float]:
    """(ignore_index, weight_hard_loss, weight_soft_loss) of a workload; a workload with biases is refused,
    as the spec has no bias tensors."""
    if str(params.get("bias", False)).lower() not in ("false", "0"):
        raise ValueError(f"distillation workloads with bias {params['bias']!r}: the spec has no bias tensors")
    merged = {**DEFAULTS, **params}
    return int(merged["ignore_index"]), float(merged["weight_hard_loss"]), float(merged["weight_soft_loss"])


def soft_per_token(
    kind: str,
    student: torch.Tensor,
    teacher: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """Each token's soft loss from (tokens, vocab) logits: the generalized JSD (KL(teacher || student) at
    beta 0, KL(student || teacher) at beta 1), or beta * (1 - cosine similarity of the normalized rows)."""
    if kind == "cosine":
        return beta * (1 - F.cosine_similarity(F.normalize(student, p=2, dim=-1), F.normalize(teacher, p=2, dim=-1),
                                               dim=-1))
    if kind != "jsd":
        raise ValueError(f"unknown distillation loss {kind!r}")
    s, t = F.log_softmax(student, dim=-1), F.log_softmax(teacher, dim=-1)
    kl = lambda log_q, log_p: (log_p.exp() * (log_p - log_q)).sum(-1)  # noqa: E731 - KL(p || q)
    if beta == 0:
        return kl(s, t)
    if beta == 1:
        return kl(t, s)
    log_m = torch.logsumexp(torch.stack([s + math.log(1 - beta), t + math.log(beta)]), dim=0)
    return beta * kl(log_m, t) + (1 - beta) * kl(log_m, s)


def head_logits(inputs) -> tuple[torch.Tensor, torch.Tensor]:
    """(student, teacher) logits: x @ weight.T in the input dtype, upcast to float32; the teacher's without
    gradients."""
    student = (inputs["student_x"] @ inputs["student_weight"].t()).float()
    with torch.no_grad():
        teacher = (inputs["teacher_x"] @ inputs["teacher_weight"].t()).float()
    return student, teacher


def distill_loss(
    inputs,
    params,
    kind: str,
    beta: float,
) -> torch.Tensor:
    """The loss Liger's chunked distillation losses compute: hard and soft losses summed over the unignored
    tokens, each divided by their count (at least one)."""
    ignore_index, w_hard, w_soft = loss_settings(params)
    student, teacher = head_logits(inputs)
    target = inputs["target"]
    valid = target != ignore_index
    count = valid.sum().clamp_min(1)
    hard = F.cross_entropy(student, target, ignore_index=ignore_index, reduction="sum") / count
    per_token = soft_per_token(kind, student / TEMPERATURE, teacher / TEMPERATURE, beta)
    soft = torch.where(valid, per_token, 0.0).sum() / count
    return w_hard * hard + w_soft * soft


def hf_distill_loss(
    inputs,
    params,
    kind: str,
    beta: float,
    masked_soft: bool,
) -> torch.Tensor:
    """``HFDistillationLoss.get_batch_loss_metrics``: zero when every target is ignored, else the cross
    entropy's mean over the unignored tokens, and the soft loss averaged over them (``masked_soft``, HFJSDLoss)
    or over all tokens (HFCosineLoss)."""
    ignore_index, w_hard, w_soft = loss_settings(params)
    target = inputs["target"]
    student, teacher = head_logits(inputs)
    if torch.all(target == ignore_index):
        return torch.tensor(0.0, device=target.device)
    hard = F.cross_entropy(student, target, ignore_index=ignore_index)
    per_token = soft_per_token(kind, student / TEMPERATURE, teacher / TEMPERATURE, beta)
    if masked_soft:
        valid = target != ignore_index
        soft = (per_token * valid.float()).sum() / valid.sum().clamp_min(1)
    else:
        soft = per_token.mean()
    return w_hard * hard + w_soft * soft


@dataclass(frozen=True)
class DistillAdapter(LMHeadAdapter):
    """The adapter of one distillation loss.

    ``kind``: "jsd" or "cosine"; ``liger``: (module, class) under ``liger_kernel.chunked_loss``; ``liger_beta``:
    the beta the script's Liger call runs at (the reference's); ``baseline_beta`` and ``baseline_masked``: the
    baseline class's beta and whether it averages the soft loss over the unignored tokens only;
    ``baseline_what`` names that class in the label.
    """

    KERNEL: str
    kind: str
    liger: tuple[str, str]
    liger_beta: float
    baseline_beta: float
    baseline_masked: bool
    baseline_what: str

    GRAD_INPUTS = ("student_x", "student_weight")

    def dims(self, params) -> tuple[int, int, int, int]:
        """(tokens, student hidden, teacher hidden, vocab) from the spec's shapes."""
        s = input_shapes(self.KERNEL, params)
        return s["student_x"][0], s["student_x"][1], s["teacher_x"][1], s["student_weight"][0]

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        tokens, student_hidden, teacher_hidden, vocab = self.dims(params)
        loss_settings(params)
        gen = generator(seed, device)
        td = RERUN_DTYPES[dtype]
        out = {
            "student_x": torch.rand((tokens, student_hidden), generator=gen, device=device, dtype=torch.float32),
            "teacher_x": torch.rand((tokens, teacher_hidden), generator=gen, device=device, dtype=torch.float32),
        }
        target = torch.randint(0, vocab, (tokens,), generator=gen, device=device, dtype=torch.int64)
        out["student_weight"] = linear_weight(vocab, student_hidden, gen, device)
        out["teacher_weight"] = linear_weight(vocab, teacher_hidden, gen, device)
        return {**{n: t.to(td) for n, t in out.items()}, "target": target}

    def reference(self, inputs, params):
        return (distill_loss(inputs, params, self.kind, self.liger_beta),)

    def _liger(self, provider, inputs, params) -> Built:
        ignore_index, w_hard, w_soft = loss_settings(params)
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        split = {**inputs, **leaves}
        module, name = self.liger
        loss = liger_chunked_loss(module, name)(
            weight_hard_loss=w_hard,
            weight_soft_loss=w_soft,
            beta=self.liger_beta,
            ignore_index=ignore_index,
            temperature=TEMPERATURE,
            compiled=compiled_on(leaves["student_weight"]),
            chunk_size=CHUNK_SIZE,
        )

        def fn():
            return (loss(split["student_x"], split["student_weight"], split["teacher_x"], split["teacher_weight"],
                         split["target"]),)

        return self.built(fn, leaves, chunked_label(name, leaves["student_weight"]))

    def _torch(self, provider, inputs, params) -> Built:
        loss_settings(params)
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        split = {**inputs, **leaves}

        def fn():
            return (hf_distill_loss(split, params, self.kind, self.baseline_beta, self.baseline_masked),)

        return self.built(fn, leaves, f"PyTorch {torch.__version__} equivalent of the upstream {self.baseline_what}")

    BUILDERS = {"liger": _liger, "torch": _torch}

    def heads(self, params) -> list[tuple[int, int, int, bool]]:
        """The trained student head and the frozen teacher head."""
        tokens, student_hidden, teacher_hidden, vocab = self.dims(params)
        return [(tokens, student_hidden, vocab, True), (tokens, teacher_hidden, vocab, False)]

    def index_reads(self, params) -> int:
        """The targets."""
        return self.dims(params)[0]

    def flops(self, params, mode) -> int:
        """The heads' GEMMs plus ``PER_LOGIT`` for each of the tokens x vocab logit pairs."""
        tokens, _, _, vocab = self.dims(params)
        fwd, bwd = PER_LOGIT[self.kind]
        return lm_head_flops(self.heads(params), mode, 0, 0) + per_mode(fwd, bwd, mode) * tokens * vocab
