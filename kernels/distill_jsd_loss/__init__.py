"""Distillation JSD loss: cross entropy plus the JSD between a student and a frozen teacher LM head's logits."""
