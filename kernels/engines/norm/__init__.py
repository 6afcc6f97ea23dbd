"""The Triton norm engine behind RMSNorm and LayerNorm (``IS_LN`` selects the mean and the bias).

- ``settings``: launch-setting records, the measured setting per row width, rules for other widths.
- ``rows``: row loads and stores, masked or not, shared by the kernels.
- ``forward``: the forward kernels (row tiles, one row, row chunks): y and the per-row statistics.
- ``backward``: the backward kernels (whole rows, sliced rows): dx and dW (dB) partial sums.
- ``partials``: the partial sums into dW (dB), by a second launch or behind a grid barrier.
- ``launch``: host code: setting lookup, allocation, TMA descriptors, the launches.
- ``function``: the autograd function and ``rms_norm`` / ``layer_norm``.
- ``rerun``: what the two rerun adapters share (eps, bytes and FLOPs).

Forward: one program normalizes whole rows (or one row in two sweeps of column chunks) and saves rstd
(and the mean), float32, one per row. Backward: a fixed number of programs (a small multiple of the SM
count) each walk a contiguous run of rows, write dx and keep dW (dB) partial sums; wide rows may be split
in column slices over several programs, whose loads may be TMA tiles; the partials are summed by one
more launch or, where every program is resident at once, by the same programs after a grid barrier.
"""

from kernels.engines.norm.function import DEFAULT_EPS, NormFunction, layer_norm, rms_norm
from kernels.engines.norm.launch import norm_backward, norm_forward

__all__ = ["DEFAULT_EPS", "NormFunction", "layer_norm", "norm_backward", "norm_forward", "rms_norm"]
