"""Multi-token attention: a causal softmax over the scores, then a 2D convolution across queries and keys."""
