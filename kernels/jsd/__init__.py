"""Jensen-Shannon divergence between two distributions over the vocabulary."""

from kernels.shapes import two_distributions
from kernels.spec import spec

SPEC = spec("jsd", "Jensen-Shannon divergence", tensors=two_distributions)
