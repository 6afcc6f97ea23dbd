"""Distillation cosine loss's rerun adapter (``kernels._adapter.RerunAdapter``), as Liger-Kernel's
``benchmark/scripts/benchmark_distill_cosine_loss.py`` runs it: ``LigerFusedLinearCosineSimilarityLoss`` at
the beta the script's ``Function.apply`` call leaves at its default, 0.5, against TorchCosineSimilarityLoss,
the HFCosineLoss of Liger's tests at its defaults: beta 1.0, the soft loss averaged over every token (its
debugging print left out). The reference is Liger's loss (beta 0.5), so the torch baseline is built as
upstream times it but fails the comparison: its soft loss is twice Liger's. The shared arithmetic and its
reasons are in ``kernels.distillation``.
"""

from __future__ import annotations

import torch

from kernels.distillation import DistillAdapter

KERNEL = "distill_cosine_loss"
_ADAPTER = DistillAdapter(
    KERNEL,
    kind="cosine",
    liger=("cosine_similarity_loss", "LigerFusedLinearCosineSimilarityLoss"),
    liger_beta=0.5,
    baseline_beta=1.0,
    baseline_masked=False,
    baseline_what="TorchCosineSimilarityLoss (HFCosineLoss, beta 1.0)",
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
