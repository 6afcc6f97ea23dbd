"""Fused linear JSD: the Jensen-Shannon divergence between a student and a teacher LM head, without materialized logits."""

from kernels.shapes import tokens
from kernels.spec import spec


def _tensors(p):
    return {
        "student_x": [tokens(p), p["hidden"]],
        "teacher_x": [tokens(p), p["hidden"]],
        "student_weight": [p["vocab"], p["hidden"]],
        "teacher_weight": [p["vocab"], p["hidden"]],
    }


SPEC = spec("fused_linear_jsd", "Fused linear Jensen-Shannon divergence", tensors=_tensors)
