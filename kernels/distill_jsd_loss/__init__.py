"""Distillation JSD loss: cross entropy plus the JSD between a student and a frozen teacher LM head's logits."""

from kernels._shapes import distillation
from kernels._spec import spec

SPEC = spec("distill_jsd_loss", "Distillation JSD loss", tensors=distillation)
