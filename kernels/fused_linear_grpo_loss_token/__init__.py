"""Fused linear GRPO loss, token-level importance sampling (GRPO): the clipped policy-gradient loss with a KL
penalty over an LM head, without materialized logits. The spec gives no input shapes (its adapter builds them
from the parameters)."""

from kernels.spec import spec

SPEC = spec("fused_linear_grpo_loss_token", "Fused linear GRPO loss · token-level importance sampling")
