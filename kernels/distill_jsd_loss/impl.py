"""Distillation JSD loss's rerun adapter, as Liger-Kernel's
``benchmark/scripts/benchmark_distill_jsd_loss.py`` runs it: ``LigerFusedLinearJSDLoss`` (beta 0.5) against
TorchJSDLoss, the HFJSDLoss of Liger's tests at its defaults (beta 0.5, the soft loss averaged over the
unignored tokens): the same loss. The shared arithmetic and its reasons are in ``kernels.engines.distillation``.
"""

from __future__ import annotations

from kernels.engines.distillation import DistillAdapter

ADAPTER = DistillAdapter("distill_jsd_loss", kind="jsd", liger=("jsd_loss", "LigerFusedLinearJSDLoss"),
                         liger_beta=0.5, baseline_beta=0.5, baseline_masked=True,
                         baseline_what="TorchJSDLoss (HFJSDLoss, beta 0.5)")
