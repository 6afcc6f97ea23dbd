"""Sparsemax: the rerun adapter lives in ``impl``; the spec in ``kernels.misc``."""
