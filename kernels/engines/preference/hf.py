"""PyTorch equivalents of the upstream preference-loss baselines (Liger-Kernel's ``test/utils.py``
``HFAlignmentLoss`` and the ``HFORPOLoss`` / ``HFCPOLoss`` of ``test/chunked_loss``, adapted there from TRL).

Those classes live in Liger's test tree, not in the ``liger-kernel`` wheel, so the adapters carry this
arithmetic: logits = x @ weight.T in the input dtype, upcast to float32, per-sequence log-probabilities of
the targets (summed, or averaged over the unignored tokens), the chosen half of the batch first, and
``alpha * nll(chosen) + mean(per-pair loss)``. The reference calls the same functions on float32 inputs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def batch_logps(
    logits: torch.Tensor,
    labels: torch.Tensor,
    ignore_index: int,
    average: bool,
) -> torch.Tensor:
    """Per-sequence log-probability of ``labels`` (sequences, seq) under ``logits`` (sequences, seq, vocab)."""
    mask = labels != ignore_index
    safe = torch.where(mask, labels, 0)
    per_token = torch.gather(logits.log_softmax(-1), dim=2, index=safe.unsqueeze(2)).squeeze(2)
    total = (per_token * mask).sum(-1)
    return total / mask.sum(-1) if average else total


def chosen_rejected(
    x: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int,
    average: bool,
    nll_target: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(chosen log-probs, rejected log-probs, NLL of the chosen half) of x (sequences, seq, hidden)."""
    half = x.shape[0] // 2
    logits = (x @ weight.t()).float()
    labels = target if nll_target is None else nll_target
    nll = F.cross_entropy(logits[:half].reshape(-1, logits.shape[-1]), labels[:half].reshape(-1),
                          ignore_index=ignore_index)
    logps = batch_logps(logits, target, ignore_index, average)
    return logps[:half], logps[half:], nll


def orpo_pair_losses(
    chosen: torch.Tensor,
    rejected: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """ORPO's odds-ratio term, -beta * logsigmoid(log odds(chosen) - log odds(rejected))."""
    log_odds = (chosen - rejected) - (torch.log1p(-torch.exp(chosen)) - torch.log1p(-torch.exp(rejected)))
    return -beta * F.logsigmoid(log_odds)


def sigmoid_pair_losses(
    chosen: torch.Tensor,
    rejected: torch.Tensor,
    beta: float,
    margin: float = 0.0,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """CPO's sigmoid loss on beta * (chosen - rejected) - margin; SimPO is the same with margin gamma."""
    z = beta * (chosen - rejected) - margin
    return -F.logsigmoid(z) * (1 - label_smoothing) - F.logsigmoid(-z) * label_smoothing


def preference_loss(
    x: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    kind: str,
    nll_target: torch.Tensor | None = None,
    ignore_index: int = -100,
    beta: float = 0.1,
    alpha: float = 1.0,
    gamma: float = 0.5,
) -> torch.Tensor:
    """``HFAlignmentLoss.get_batch_loss_metrics``'s loss for ``kind`` "orpo" (averaged log-probs), "cpo"
    (summed, TorchLMHeadCPO's default) or "simpo" (averaged, margin gamma)."""
    average = kind in ("orpo", "simpo")
    chosen, rejected, nll = chosen_rejected(x, weight, target, ignore_index, average, nll_target)
    if kind == "orpo":
        pair = orpo_pair_losses(chosen, rejected, beta)
    elif kind == "cpo":
        pair = sigmoid_pair_losses(chosen, rejected, beta)
    elif kind == "simpo":
        pair = sigmoid_pair_losses(chosen, rejected, beta, margin=gamma)
    else:
        raise ValueError(f"unknown preference loss {kind!r}")
    return nll * alpha + pair.mean()
