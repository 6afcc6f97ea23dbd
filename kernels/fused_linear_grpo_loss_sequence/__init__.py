"""Fused linear GRPO loss, sequence-level importance sampling (GSPO): the clipped policy-gradient loss with a
KL penalty over an LM head, without materialized logits. The spec gives no input shapes (its adapter builds
them from the parameters)."""

from kernels.spec import spec

SPEC = spec("fused_linear_grpo_loss_sequence", "Fused linear GRPO loss · sequence-level importance sampling")
