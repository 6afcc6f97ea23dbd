"""Fused linear SimPO loss's rerun adapter, as Liger-Kernel's
``benchmark/scripts/benchmark_simpo_loss.py`` runs it: ``LigerFusedLinearSimPOLoss`` against the script's
huggingface provider, which is TorchLMHeadCPO at its defaults: the CPO sigmoid loss on summed
log-probabilities, not SimPO. The reference is SimPO (averaged log-probabilities, margin gamma 0.5), the loss
Liger computes, so the huggingface baseline is timed as upstream times it but fails the comparison. The
shared arithmetic and its reasons are in ``kernels.engines.preference``.
"""

from __future__ import annotations

from kernels.engines.preference import PreferenceAdapter

ADAPTER = PreferenceAdapter(
    "fused_linear_simpo_loss", kind="simpo", baseline="cpo", liger=("simpo_loss", "LigerFusedLinearSimPOLoss"),
    baseline_what="HF CPO loss (TorchLMHeadCPO, sigmoid), the huggingface baseline benchmark_simpo_loss.py runs")
