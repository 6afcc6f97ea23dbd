"""Distillation cosine loss: cross entropy plus the cosine distance between a student and a teacher head's logits."""

from kernels.shapes import distillation
from kernels.spec import spec

SPEC = spec("distill_cosine_loss", "Distillation cosine loss", tensors=distillation)
