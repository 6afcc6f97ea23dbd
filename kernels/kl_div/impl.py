"""KL divergence's rerun adapter (``kernels._adapter.RerunAdapter``): KL(target || exp(input)).

``input`` holds log-probabilities (the student, the one gradients flow to), ``target`` probabilities,
both [tokens, vocab]; the loss is ``torch.nn.KLDivLoss``'s, reduced by the workload's ``reduction``
(``batchmean``, upstream's only choice, when the workload leaves it out).

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_kl_div.py``: ``input`` the log-softmax and
``target`` the softmax of standard-normal draws (float32 upstream, so its runs carry no dtype),
``LigerKLDIVLoss`` against ``torch.nn.KLDivLoss``. Upstream's graph also holds the log-softmax that made
``input``; here ``input`` is the leaf, so only the divergence is measured.
"""

from __future__ import annotations

import torch

from kernels.engines import divergence as div
from kernels._adapter import Built

KERNEL = "kl_div"
PROVIDERS = ("liger", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("loss",)
GRAD_INPUTS = ("input",)
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    return div.draw_distributions(KERNEL, params, dtype, seed, device, input_as=div.LOG_SOFTMAX, target_as=div.SOFTMAX)


def reference(inputs, params) -> tuple[torch.Tensor]:
    log_q, p = inputs["input"], inputs["target"]
    pointwise = torch.xlogy(p, p) - p * log_q
    reduction = div.reduction(KERNEL, params)
    if reduction == "none":
        return (pointwise,)
    if reduction == "sum":
        return (pointwise.sum(),)
    if reduction == "mean":
        return (pointwise.mean(),)
    return (pointwise.sum() / log_q.shape[0],)


def build(provider, inputs, params) -> Built:
    reduction = div.reduction(KERNEL, params)
    return div.build_divergence(
        KERNEL, provider, inputs,
        liger_module="kl_div", liger_class="LigerKLDIVLoss", liger_kwargs={"reduction": reduction},
        torch_loss=lambda: torch.nn.KLDivLoss(reduction=reduction), torch_label="torch.nn.KLDivLoss",
    )


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read input and target, write the loss. Backward: read the target and the loss's gradient,
    write the input's gradient (-target scaled). Full: the inputs once, the loss and the gradient once.
    With ``reduction="none"`` the loss and its gradient are full [tokens, vocab] tensors."""
    return div.bytes_moved(KERNEL, params, dtype, mode, backward_reads=1,
                           loss_per_element=div.reduction(KERNEL, params) == "none")


def flops(params, mode) -> int:
    """Per element: forward 4 (log of the target, difference, product, sum); backward 2 (negate and
    scale the target by the loss's gradient)."""
    return div.flops(KERNEL, params, mode, forward=4, backward=2)


matmul_shapes = div.matmul_shapes
