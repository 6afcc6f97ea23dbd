"""Fused linear JSD: the Jensen-Shannon divergence between a student and a teacher LM head, without materialized logits."""
