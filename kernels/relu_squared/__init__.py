"""Squared ReLU: the rerun adapter lives in ``impl``; the spec in ``kernels.gated_mlps``."""
