"""Fused linear CPO loss: the contrastive preference loss over an LM head, without materialized logits."""

from kernels.shapes import preference
from kernels.spec import spec

SPEC = spec("fused_linear_cpo_loss", "Fused linear CPO loss", tensors=preference)
