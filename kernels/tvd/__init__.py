"""Total variation distance between two distributions over the vocabulary."""

from kernels.shapes import two_distributions
from kernels.spec import spec

SPEC = spec("tvd", "Total variation distance", tensors=two_distributions)
