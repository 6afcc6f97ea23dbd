"""Distillation cosine loss: cross entropy plus the cosine distance between a student and a teacher head's logits."""
