"""Fused linear GRPO loss's rerun adapter at importance_sampling_level
"token" (one importance ratio a token), as Liger-Kernel's ``benchmark/scripts/benchmark_grpo_loss.py``
runs it: ``LigerFusedLinearGRPOLoss`` against TorchLMHeadGRPO. The spec gives no input shapes; the
inputs drawn from the parameters, the arithmetic and their reasons are in ``kernels.engines.grpo``.
"""

from __future__ import annotations

from kernels.engines.grpo import GRPOAdapter

ADAPTER = GRPOAdapter("fused_linear_grpo_loss_token", level="token")
