"""KL divergence between two distributions over the vocabulary."""

from kernels.shapes import two_distributions
from kernels.spec import spec

SPEC = spec("kl_div", "KL divergence", tensors=two_distributions)
