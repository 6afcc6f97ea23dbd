"""Jensen-Shannon divergence between two distributions over the vocabulary."""

from kernels._shapes import two_distributions
from kernels._spec import spec

SPEC = spec("jsd", "Jensen-Shannon divergence", tensors=two_distributions)
