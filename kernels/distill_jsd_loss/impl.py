"""Distillation JSD loss's rerun adapter (``kernels._adapter.RerunAdapter``), as Liger-Kernel's
``benchmark/scripts/benchmark_distill_jsd_loss.py`` runs it: ``LigerFusedLinearJSDLoss`` (beta 0.5) against
TorchJSDLoss, the HFJSDLoss of Liger's tests at its defaults (beta 0.5, the soft loss averaged over the
unignored tokens): the same loss. The shared arithmetic and its reasons are in ``kernels.distillation``.
"""

from __future__ import annotations

import torch

from kernels.distillation import DistillAdapter

KERNEL = "distill_jsd_loss"
_ADAPTER = DistillAdapter(
    KERNEL,
    kind="jsd",
    liger=("jsd_loss", "LigerFusedLinearJSDLoss"),
    liger_beta=0.5,
    baseline_beta=0.5,
    baseline_masked=True,
    baseline_what="TorchJSDLoss (HFJSDLoss, beta 0.5)",
)
PROVIDERS = DistillAdapter.PROVIDERS
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = DistillAdapter.OUTPUT_NAMES
GRAD_INPUTS = DistillAdapter.GRAD_INPUTS
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE: torch.dtype = DistillAdapter.REFERENCE_DTYPE

make_inputs = _ADAPTER.make_inputs
reference = _ADAPTER.reference
build = _ADAPTER.build
bytes_moved = _ADAPTER.bytes_moved
flops = _ADAPTER.flops
matmul_shapes = _ADAPTER.matmul_shapes
