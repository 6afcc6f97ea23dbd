"""Fused linear ORPO loss: the odds-ratio preference loss over an LM head, without materialized logits."""

from kernels.shapes import preference
from kernels.spec import spec

SPEC = spec("fused_linear_orpo_loss", "Fused linear ORPO loss", tensors=preference)
