"""Total variation distance's rerun adapter: sum |P - Q| / 2.

``input`` holds P (the one gradients flow to), ``target`` Q, both probabilities [tokens, vocab]; the
distance is reduced by the workload's ``reduction`` (``batchmean``, upstream's only choice, when the
workload leaves it out).

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_tvd.py``: both the softmax of a
standard-normal draw (float32 upstream, so its runs carry no dtype), ``LigerTVDLoss`` against the
script's own PyTorch module, which this adapter restates since the script is not an importable package.
"""

from __future__ import annotations

import torch

from kernels.engines.divergence import DEFAULT_REDUCTION, SOFTMAX, DivergenceAdapter, reduce


class TorchTVDLoss(torch.nn.Module):
    """PyTorch equivalent of upstream benchmark_tvd.py's TorchTVDLoss: |p - q| / 2, then the reduction,
    in the inputs' dtype."""

    def __init__(self, reduction: str = DEFAULT_REDUCTION):
        super().__init__()
        self.reduction = reduction

    def forward(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return reduce(torch.abs(p - q) / 2.0, self.reduction)


class TVD(DivergenceAdapter):
    KERNEL = "tvd"
    INPUT_AS, TARGET_AS = SOFTMAX, SOFTMAX
    LIGER = ("tvd", "LigerTVDLoss")
    # Backward reads input, target and the loss's gradient, and writes the input's gradient (the sign of the
    # difference, scaled).
    BACKWARD_READS = 2
    # Per element: forward 3 (difference, absolute value and halving, sum); backward 3 (difference, sign,
    # scale).
    FLOPS_PER_ELEMENT = (3, 3)

    def reference(self, inputs, params) -> tuple[torch.Tensor]:
        return (reduce((inputs["input"] - inputs["target"]).abs() / 2, self.reduction(params)),)

    def liger_kwargs(self, params) -> dict:
        return {"reduction": self.reduction(params)}

    def torch_loss(self, params):
        return (TorchTVDLoss(reduction=self.reduction(params)),
                "equivalent of upstream benchmark_tvd.py's TorchTVDLoss")


ADAPTER = TVD()
