"""Fused linear SimPO loss: the reference-free margin preference loss over an LM head, without materialized logits."""
