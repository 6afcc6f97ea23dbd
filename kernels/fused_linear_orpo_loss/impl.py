"""Fused linear ORPO loss's rerun adapter (``kernels._adapter.RerunAdapter``), as Liger-Kernel's
``benchmark/scripts/benchmark_orpo_loss.py`` runs it: ``LigerFusedLinearORPOLoss`` against TorchLMHeadORPO
(the upstream HF ORPO loss, with separate NLL targets). The shared arithmetic and its reasons are in
``kernels.preference_losses.family``.
"""

from __future__ import annotations

import torch

from kernels.preference_losses.family import PreferenceAdapter

KERNEL = "fused_linear_orpo_loss"
_ADAPTER = PreferenceAdapter(
    KERNEL,
    kind="orpo",
    baseline="orpo",
    baseline_what="HF ORPO loss (TorchLMHeadORPO)",
    liger=("orpo_loss", "LigerFusedLinearORPOLoss"),
    nll_target=True,
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
