"""Jensen-Shannon divergence's rerun adapter.

JSD_beta(P || Q) = beta * KL(P || M) + (1 - beta) * KL(Q || M), M = beta * P + (1 - beta) * Q, summed over
the vocabulary and averaged over tokens; ``input`` holds log Q (the student, the one gradients flow to),
``target`` log P, both [tokens, vocab]; beta is 0.5 as upstream leaves it.

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_jsd.py``: both are the log-softmax of a
standard-normal draw (float32 upstream, so its runs carry no dtype), ``LigerJSD`` against the script's own
PyTorch module (KL divergences with ``log_target=True`` in float32, loss returned in float32), which this
adapter restates since the script is not an importable package.
"""

from __future__ import annotations

import torch

from kernels.engines.divergence import LOG_SOFTMAX, DivergenceAdapter

BETA = 0.5


def _beta(params) -> float:
    return float(params.get("beta", BETA))


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


class JSD(DivergenceAdapter):
    KERNEL = "jsd"
    INPUT_AS, TARGET_AS = LOG_SOFTMAX, LOG_SOFTMAX
    LIGER = ("jsd", "LigerJSD")
    # Backward reads input, target and the loss's gradient, and writes the input's gradient.
    BACKWARD_READS = 2
    # Per element: forward 12 (two exps, the mixture's 3 and its log, two differences, two weighted products,
    # the sum); backward 4 (the student's term: exp, difference, product, scale).
    FLOPS_PER_ELEMENT = (12, 4)

    def reference(self, inputs, params) -> tuple[torch.Tensor]:
        beta = _beta(params)
        log_q, log_p = inputs["input"], inputs["target"]
        q, p = log_q.exp(), log_p.exp()
        log_m = torch.log(beta * p + (1 - beta) * q)
        per_token = (beta * p * (log_p - log_m) + (1 - beta) * q * (log_q - log_m)).sum(dim=-1)
        return (per_token.sum() / log_q.shape[0],)

    def per_element_loss(self, params) -> bool:
        """Never: the loss is averaged over tokens whatever the workload says."""
        return False

    def liger_kwargs(self, params) -> dict:
        return {"beta": _beta(params)}

    def torch_loss(self, params):
        return TorchJSD(beta=_beta(params)), "equivalent of upstream benchmark_jsd.py's TorchJSD"


ADAPTER = JSD()
