"""Fused linear GRPO loss, sequence-level importance sampling (GSPO): the clipped policy-gradient loss with a
KL penalty over an LM head, without materialized logits."""
