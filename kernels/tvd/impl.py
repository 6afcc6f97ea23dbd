"""Total variation distance's rerun adapter (``kernels._adapter.RerunAdapter``): sum |P - Q| / 2.

``input`` holds P (the one gradients flow to), ``target`` Q, both probabilities [tokens, vocab]; the
distance is reduced by the workload's ``reduction`` (``batchmean``, upstream's only choice, when the
workload leaves it out).

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_tvd.py``: both the softmax of a
standard-normal draw (float32 upstream, so its runs carry no dtype), ``LigerTVDLoss`` against the
script's own PyTorch module, which this adapter restates since the script is not an importable package.
Upstream's graph also holds the softmax that made ``input``; here ``input`` is the leaf, so only the
distance is measured.
"""

from __future__ import annotations

import torch

from kernels.engines import divergence as div
from kernels._adapter import Built

KERNEL = "tvd"
PROVIDERS = ("liger", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("loss",)
GRAD_INPUTS = ("input",)
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    return div.draw_distributions(KERNEL, params, dtype, seed, device, input_as=div.SOFTMAX, target_as=div.SOFTMAX)


def reference(inputs, params) -> tuple[torch.Tensor]:
    return (div.reduce((inputs["input"] - inputs["target"]).abs() / 2, div.reduction(KERNEL, params)),)


class TorchTVDLoss(torch.nn.Module):
    """PyTorch equivalent of upstream benchmark_tvd.py's TorchTVDLoss: |p - q| / 2, then the reduction,
    in the inputs' dtype."""

    def __init__(self, reduction: str = div.DEFAULT_REDUCTION):
        super().__init__()
        self.reduction = reduction

    def forward(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return div.reduce(torch.abs(p - q) / 2.0, self.reduction)


def build(provider, inputs, params) -> Built:
    reduction = div.reduction(KERNEL, params)
    return div.build_divergence(
        KERNEL, provider, inputs,
        liger_module="tvd", liger_class="LigerTVDLoss", liger_kwargs={"reduction": reduction},
        torch_loss=lambda: TorchTVDLoss(reduction=reduction),
        torch_label="equivalent of upstream benchmark_tvd.py's TorchTVDLoss",
    )


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read input and target, write the loss. Backward: read input, target and the loss's
    gradient, write the input's gradient (the sign of the difference, scaled). Full: the inputs once,
    the loss and the gradient once. With ``reduction="none"`` the loss and its gradient are full
    [tokens, vocab] tensors."""
    return div.bytes_moved(KERNEL, params, dtype, mode, backward_reads=2,
                           loss_per_element=div.reduction(KERNEL, params) == "none")


def flops(params, mode) -> int:
    """Per element: forward 3 (difference, absolute value and halving, sum); backward 3 (difference,
    sign, scale)."""
    return div.flops(KERNEL, params, mode, forward=3, backward=3)


matmul_shapes = div.matmul_shapes
