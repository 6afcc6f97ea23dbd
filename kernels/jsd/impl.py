"""Jensen-Shannon divergence's rerun adapter (``kernels._adapter.RerunAdapter``).

JSD_beta(P || Q) = beta * KL(P || M) + (1 - beta) * KL(Q || M), M = beta * P + (1 - beta) * Q, summed over
the vocabulary and averaged over tokens; ``input`` holds log Q (the student, the one gradients flow to),
``target`` log P, both [tokens, vocab]; beta is 0.5 as upstream leaves it.

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_jsd.py``: both are the log-softmax of a
standard-normal draw (float32 upstream, so its runs carry no dtype), ``LigerJSD`` against the script's own
PyTorch module (KL divergences with ``log_target=True`` in float32, loss returned in float32), which this
adapter restates since the script is not an importable package. Upstream's graph also holds the
log-softmax that made ``input``; here ``input`` is the leaf, so only the divergence is measured.
"""

from __future__ import annotations

import torch

from kernels.engines import divergence as div
from kernels._adapter import Built

KERNEL = "jsd"
PROVIDERS = ("liger", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("loss",)
GRAD_INPUTS = ("input",)
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64
BETA = 0.5


def _beta(params) -> float:
    return float(params.get("beta", BETA))


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    return div.draw_distributions(KERNEL, params, dtype, seed, device,
                                  input_as=div.LOG_SOFTMAX, target_as=div.LOG_SOFTMAX)


def reference(inputs, params) -> tuple[torch.Tensor]:
    beta = _beta(params)
    log_q, log_p = inputs["input"], inputs["target"]
    q, p = log_q.exp(), log_p.exp()
    log_m = torch.log(beta * p + (1 - beta) * q)
    per_token = (beta * p * (log_p - log_m) + (1 - beta) * q * (log_q - log_m)).sum(dim=-1)
    return (per_token.sum() / log_q.shape[0],)


class TorchJSD(torch.nn.Module):
    """PyTorch equivalent of upstream benchmark_jsd.py's TorchJSD (no labels): KL divergences of the
    mixture against each distribution with ``log_target=True``, in float32, loss in float32."""

    def __init__(self, beta: float = BETA):
        super().__init__()
        self.beta = beta
        self.kl = torch.nn.KLDivLoss(reduction="none", log_target=True)

    def forward(self, log_q: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
        log_q, log_p = log_q.float(), log_p.float()
        log_m = torch.log(torch.lerp(log_q.exp(), log_p.exp(), self.beta))
        per_token = (self.beta * self.kl(log_m, log_p).sum(dim=-1)
                     + (1 - self.beta) * self.kl(log_m, log_q).sum(dim=-1))
        return (per_token / log_q.shape[0]).sum().float()


def build(provider, inputs, params) -> Built:
    beta = _beta(params)
    return div.build_divergence(
        KERNEL, provider, inputs,
        liger_module="jsd", liger_class="LigerJSD", liger_kwargs={"beta": beta},
        torch_loss=lambda: TorchJSD(beta=beta),
        torch_label="equivalent of upstream benchmark_jsd.py's TorchJSD",
    )


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read input and target, write the loss. Backward: read input, target and the loss's
    gradient, write the input's gradient. Full: the inputs once, the loss and the gradient once."""
    return div.bytes_moved(KERNEL, params, dtype, mode, backward_reads=2, loss_per_element=False)


def flops(params, mode) -> int:
    """Per element: forward 12 (two exps, the mixture's 3 and its log, two differences, two weighted
    products, the sum); backward 4 (the student's term: exp, difference, product, scale)."""
    return div.flops(KERNEL, params, mode, forward=12, backward=4)


matmul_shapes = div.matmul_shapes
