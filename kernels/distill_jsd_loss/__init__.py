"""Distillation JSD loss: cross entropy plus the JSD between a student and a frozen teacher LM head's logits."""

from kernels.shapes import distillation
from kernels.spec import spec

SPEC = spec("distill_jsd_loss", "Distillation JSD loss", tensors=distillation)
