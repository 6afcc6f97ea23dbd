"""Sparse multi-token attention: multi-token attention with sparsemax in place of the softmax."""

from kernels.shapes import multi_token_attention
from kernels.spec import spec

SPEC = spec("sparse_multi_token_attention", "Sparse multi-token attention", parameter_names={"K": "kernel"},
            tensors=multi_token_attention)
