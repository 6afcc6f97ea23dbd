"""Fused linear CPO loss: the contrastive preference loss over an LM head, without materialized logits."""
