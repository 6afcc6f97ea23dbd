"""Fused linear JSD's rerun adapter: the mean over tokens of the
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

from kernels.adapter import Built
from kernels.providers import liger_attr, liger_label
from kernels.tensors import RERUN_DTYPES, generator, input_shapes, leaf_copies
from kernels.engines.lm_head import LMHeadAdapter

BETA = 0.5
IGNORE_INDEX = -100
TEMPERATURE = 1.0


def _jsd(student_logp, teacher_logp):
    """Mean over rows of beta * KL(p_teacher || m) + (1 - beta) * KL(p_student || m), m the beta-mixture."""
    log_m = torch.logsumexp(torch.stack([student_logp + math.log(1 - BETA), teacher_logp + math.log(BETA)]), dim=0)
    per_row = (BETA * (teacher_logp.exp() * (teacher_logp - log_m)).sum(-1)
               + (1 - BETA) * (student_logp.exp() * (student_logp - log_m)).sum(-1))
    return per_row.mean()


def torch_lm_head_jsd(student_x, student_weight, teacher_x, teacher_weight):
    """The script's TorchLMHeadJSD: logits in the input dtype, log-softmax, then TorchJSD in float32 (the
    lerp mixture, ``nn.KLDivLoss(reduction="none", log_target=True)``), cast back to the input dtype."""
    student = torch.log_softmax(F.linear(student_x, student_weight) / TEMPERATURE, dim=-1).float()
    teacher = torch.log_softmax(F.linear(teacher_x, teacher_weight) / TEMPERATURE, dim=-1).float()
    log_m = torch.log(torch.lerp(torch.exp(student), torch.exp(teacher), BETA))
    kl = lambda target: F.kl_div(log_m, target, reduction="none", log_target=True).sum(dim=-1)  # noqa: E731
    loss = BETA * kl(teacher) + (1 - BETA) * kl(student)
    return (loss / student.shape[0]).sum().to(student_x.dtype)


class FusedLinearJSD(LMHeadAdapter):
    KERNEL = "fused_linear_jsd"
    GRAD_INPUTS = ("student_x", "student_weight")
    # Two log-softmaxes, the mixture and two KL terms a logit forward; their gradient backward.
    FLOPS_PER_LOGIT = (12, 6)

    def dims(self, params) -> tuple[int, int, int]:
        """(tokens, hidden, vocab) of a workload."""
        s = input_shapes(self.KERNEL, params)
        return s["student_x"][0], s["student_x"][1], s["student_weight"][0]

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        s = input_shapes(self.KERNEL, params)
        gen = generator(seed, device)
        td = RERUN_DTYPES[dtype]
        order = ("student_weight", "teacher_weight", "student_x", "teacher_x")
        return {n: torch.rand(tuple(s[n]), generator=gen, device=device, dtype=torch.float32).to(td) for n in order}

    def reference(self, inputs, params):
        student = F.log_softmax(inputs["student_x"] @ inputs["student_weight"].T / TEMPERATURE, dim=-1)
        teacher = F.log_softmax(inputs["teacher_x"] @ inputs["teacher_weight"].T / TEMPERATURE, dim=-1)
        return (_jsd(student, teacher),)

    def _pass(self, loss, inputs, label: str) -> Built:
        """A pass of ``loss(student_x, student_weight, teacher_x, teacher_weight)``, the student's leaf copies."""
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        sx, sw = leaves["student_x"], leaves["student_weight"]
        tx, tw = inputs["teacher_x"], inputs["teacher_weight"]
        return self.built(lambda: (loss(sx, sw, tx, tw),), leaves, label)

    def _liger(self, provider, inputs, params) -> Built:
        cls = liger_attr(inputs["student_x"], "fused_linear_jsd", "LigerFusedLinearJSD")
        loss = cls(jsd_beta=BETA, ignore_index=IGNORE_INDEX, temperature=TEMPERATURE)
        return self._pass(lambda sx, sw, tx, tw: loss(sx, sw, tx, tw, None), inputs,
                          liger_label("LigerFusedLinearJSD", "Triton"))

    def _torch(self, provider, inputs, params) -> Built:
        return self._pass(torch_lm_head_jsd, inputs,
                          f"PyTorch {torch.__version__} equivalent of the upstream TorchLMHeadJSD")

    BUILDERS = {"liger": _liger, "torch": _torch}

    def heads(self, params) -> list[tuple[int, int, int, bool]]:
        """The trained student head and the frozen teacher head, of one size."""
        tokens, hidden, vocab = self.dims(params)
        return [(tokens, hidden, vocab, True), (tokens, hidden, vocab, False)]

    def index_reads(self, params) -> int:
        """None: no labels."""
        return 0


ADAPTER = FusedLinearJSD()
