"""Fused linear CPO loss's rerun adapter (``kernels._adapter.RerunAdapter``), as Liger-Kernel's
``benchmark/scripts/benchmark_cpo_loss.py`` runs it: ``LigerFusedLinearCPOLoss`` against TorchLMHeadCPO
(the upstream HF CPO loss, sigmoid, summed log-probabilities). The shared arithmetic and its reasons are in
``kernels.preference_losses.family``.
"""

from __future__ import annotations

import torch

from kernels.preference_losses.family import PreferenceAdapter

KERNEL = "fused_linear_cpo_loss"
_ADAPTER = PreferenceAdapter(
    KERNEL,
    kind="cpo",
    baseline="cpo",
    baseline_what="HF CPO loss (TorchLMHeadCPO, sigmoid)",
    liger=("cpo_loss", "LigerFusedLinearCPOLoss"),
)
PROVIDERS = PreferenceAdapter.PROVIDERS
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = PreferenceAdapter.OUTPUT_NAMES
GRAD_INPUTS = PreferenceAdapter.GRAD_INPUTS
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE: torch.dtype = PreferenceAdapter.REFERENCE_DTYPE

make_inputs = _ADAPTER.make_inputs
reference = _ADAPTER.reference
build = _ADAPTER.build
bytes_moved = _ADAPTER.bytes_moved
flops = _ADAPTER.flops
matmul_shapes = _ADAPTER.matmul_shapes
