"""Fused linear GRPO loss's rerun adapter (``kernels._adapter.RerunAdapter``) at importance_sampling_level
"token" (one importance ratio a token), as Liger-Kernel's ``benchmark/scripts/benchmark_grpo_loss.py``
runs it: ``LigerFusedLinearGRPOLoss`` against TorchLMHeadGRPO. The spec gives no input shapes; the
inputs drawn from the parameters, the arithmetic and their reasons are in ``kernels.grpo``.
"""

from __future__ import annotations

import torch

from kernels.grpo import GRPOAdapter

KERNEL = "fused_linear_grpo_loss_token"
_ADAPTER = GRPOAdapter(KERNEL, level="token")
PROVIDERS = GRPOAdapter.PROVIDERS
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = GRPOAdapter.OUTPUT_NAMES
GRAD_INPUTS = GRPOAdapter.GRAD_INPUTS
DETERMINISTIC_INPUTS = GRPOAdapter.DETERMINISTIC_INPUTS
REFERENCE_DTYPE: torch.dtype = GRPOAdapter.REFERENCE_DTYPE

make_inputs = _ADAPTER.make_inputs
reference = _ADAPTER.reference
build = _ADAPTER.build
bytes_moved = _ADAPTER.bytes_moved
flops = _ADAPTER.flops
matmul_shapes = _ADAPTER.matmul_shapes
