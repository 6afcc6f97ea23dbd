"""Total variation distance: the rerun adapter lives in ``impl``; the spec in ``kernels.losses``."""
