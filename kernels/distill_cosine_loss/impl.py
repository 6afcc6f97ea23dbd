"""Distillation cosine loss's rerun adapter, as Liger-Kernel's
``benchmark/scripts/benchmark_distill_cosine_loss.py`` runs it: ``LigerFusedLinearCosineSimilarityLoss`` at
the beta the script's ``Function.apply`` call leaves at its default, 0.5, against TorchCosineSimilarityLoss,
the HFCosineLoss of Liger's tests at its defaults: beta 1.0, the soft loss averaged over every token (its
debugging print left out). The reference is Liger's loss (beta 0.5), so the torch baseline is built as
upstream times it but fails the comparison: its soft loss is twice Liger's. The shared arithmetic and its
reasons are in ``kernels.engines.distillation``.
"""

from __future__ import annotations

from kernels.engines.distillation import DistillAdapter

ADAPTER = DistillAdapter("distill_cosine_loss", kind="cosine",
                         liger=("cosine_similarity_loss", "LigerFusedLinearCosineSimilarityLoss"),
                         liger_beta=0.5, baseline_beta=1.0, baseline_masked=False,
                         baseline_what="TorchCosineSimilarityLoss (HFCosineLoss, beta 1.0)")
