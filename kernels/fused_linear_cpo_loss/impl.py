"""Fused linear CPO loss's rerun adapter, as Liger-Kernel's
``benchmark/scripts/benchmark_cpo_loss.py`` runs it: ``LigerFusedLinearCPOLoss`` against TorchLMHeadCPO
(the upstream HF CPO loss, sigmoid, summed log-probabilities). The shared arithmetic and its reasons are in
``kernels.engines.preference``.
"""

from __future__ import annotations

from kernels.engines.preference import PreferenceAdapter

ADAPTER = PreferenceAdapter("fused_linear_cpo_loss", kind="cpo", baseline="cpo",
                            baseline_what="HF CPO loss (TorchLMHeadCPO, sigmoid)",
                            liger=("cpo_loss", "LigerFusedLinearCPOLoss"))
