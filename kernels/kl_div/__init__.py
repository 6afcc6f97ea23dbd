"""KL divergence between two distributions over the vocabulary."""

from kernels._shapes import two_distributions
from kernels._spec import spec

SPEC = spec("kl_div", "KL divergence", tensors=two_distributions)
