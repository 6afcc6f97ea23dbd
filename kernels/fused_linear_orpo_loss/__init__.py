"""Fused linear ORPO loss: the odds-ratio preference loss over an LM head, without materialized logits."""

from kernels._shapes import preference
from kernels._spec import spec

SPEC = spec("fused_linear_orpo_loss", "Fused linear ORPO loss", tensors=preference)
