"""Fused linear cross entropy: the LM head projection and the cross-entropy loss without materialized logits."""
