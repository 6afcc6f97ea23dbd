"""Fused linear SimPO loss: the reference-free margin preference loss over an LM head, without materialized logits."""

from kernels.shapes import preference
from kernels.spec import spec

SPEC = spec("fused_linear_simpo_loss", "Fused linear SimPO loss", tensors=preference)
