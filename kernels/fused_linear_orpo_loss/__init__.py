"""Fused linear ORPO loss: the odds-ratio preference loss over an LM head, without materialized logits."""
