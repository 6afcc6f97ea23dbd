"""Multi-token attention: a causal softmax over the scores, then a 2D convolution across queries and keys."""

from kernels.shapes import multi_token_attention
from kernels.spec import spec

SPEC = spec("multi_token_attention", "Multi-token attention", parameter_names={"K": "kernel"},
            tensors=multi_token_attention)
