"""KL divergence's rerun adapter: KL(target || exp(input)).

``input`` holds log-probabilities (the student, the one gradients flow to), ``target`` probabilities,
both [tokens, vocab]; the loss is ``torch.nn.KLDivLoss``'s, reduced by the workload's ``reduction``
(``batchmean``, upstream's only choice, when the workload leaves it out).

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_kl_div.py``: ``input`` the log-softmax and
``target`` the softmax of standard-normal draws (float32 upstream, so its runs carry no dtype),
``LigerKLDIVLoss`` against ``torch.nn.KLDivLoss``.
"""

from __future__ import annotations

import torch

from kernels.engines.divergence import LOG_SOFTMAX, SOFTMAX, DivergenceAdapter, reduce


class KLDiv(DivergenceAdapter):
    KERNEL = "kl_div"
    INPUT_AS, TARGET_AS = LOG_SOFTMAX, SOFTMAX
    LIGER = ("kl_div", "LigerKLDIVLoss")
    # Backward reads the target and the loss's gradient, and writes the input's gradient (-target scaled).
    BACKWARD_READS = 1
    # Per element: forward 4 (log of the target, difference, product, sum); backward 2 (negate and scale the
    # target by the loss's gradient).
    FLOPS_PER_ELEMENT = (4, 2)

    def reference(self, inputs, params) -> tuple[torch.Tensor]:
        log_q, p = inputs["input"], inputs["target"]
        return (reduce(torch.xlogy(p, p) - p * log_q, self.reduction(params)),)

    def liger_kwargs(self, params) -> dict:
        return {"reduction": self.reduction(params)}

    def torch_loss(self, params):
        return torch.nn.KLDivLoss(reduction=self.reduction(params)), "torch.nn.KLDivLoss"


ADAPTER = KLDiv()
