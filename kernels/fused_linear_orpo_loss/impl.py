"""Fused linear ORPO loss's rerun adapter, as Liger-Kernel's
``benchmark/scripts/benchmark_orpo_loss.py`` runs it: ``LigerFusedLinearORPOLoss`` against TorchLMHeadORPO
(the upstream HF ORPO loss, with separate NLL targets). The shared arithmetic and its reasons are in
``kernels.engines.preference``.
"""

from __future__ import annotations

from kernels.engines.preference import PreferenceAdapter

ADAPTER = PreferenceAdapter("fused_linear_orpo_loss", kind="orpo", baseline="orpo",
                            baseline_what="HF ORPO loss (TorchLMHeadORPO)",
                            liger=("orpo_loss", "LigerFusedLinearORPOLoss"), nll_target=True)
