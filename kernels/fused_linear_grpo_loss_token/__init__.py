"""Fused linear GRPO loss, token-level importance sampling (GRPO): the clipped policy-gradient loss with a KL
penalty over an LM head, without materialized logits."""
