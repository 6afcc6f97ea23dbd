"""Sparse multi-token attention: multi-token attention with sparsemax in place of the softmax."""
