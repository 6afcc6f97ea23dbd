"""Fused neighborhood attention: each query attends only to the keys within a (dilated) window around it."""
