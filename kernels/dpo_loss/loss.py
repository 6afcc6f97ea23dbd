"""DPO's loss over a trained LM head and a frozen reference head: the float32 reference arithmetic and a
PyTorch equivalent of the upstream huggingface baseline.

Liger-Kernel's ``benchmark/scripts/benchmark_dpo_loss.py`` times ``LigerFusedLinearDPOLoss`` (through
LigerLMHeadDPO) against TorchLMHeadDPO, which calls ``HFDPOLoss.get_batch_loss_metrics``
(``test/chunked_loss/test_dpo_loss.py`` on ``HFAlignmentLoss`` in ``test/utils.py``, adapted there from TRL).
Those classes live in Liger's test tree, not in the ``liger-kernel`` wheel, so this module carries the same
arithmetic, written here from the loss's definition.

DPO (Rafailov et al., 2023, https://arxiv.org/abs/2305.18290) is paired: the first half of the sequences are
the chosen responses, the second half the rejected ones, pair i being sequence i and sequence half + i. With
``logp(s)`` the log-probability of sequence s's targets under the trained head and ``ref(s)`` under the
reference head, the pair's loss is ``-logsigmoid(beta * ((logp(c) - ref(c)) - (logp(r) - ref(r))))`` (the
"sigmoid" loss), and the loss is the mean over pairs. Here, as both upstream providers are built,
log-probabilities are averaged over a sequence's unignored tokens (``average_log_prob=True``), there is no
NLL term (``compute_nll_loss=False``) and the reference head is a constant.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.engines.preference.hf import batch_logps


def head_logits(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
) -> torch.Tensor:
    """The LM head's logits ``x @ weight.T + bias`` over x (sequences, seq, hidden), in x's dtype."""
    logits = x @ weight.t()
    return logits if bias is None else logits + bias


def pair_losses(
    chosen: torch.Tensor,
    rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """Each pair's sigmoid DPO loss, ``-logsigmoid(beta * (chosen log-ratio - rejected log-ratio))``."""
    return -F.logsigmoid(beta * ((chosen - ref_chosen) - (rejected - ref_rejected)))


def dpo_loss(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, ref_x: torch.Tensor,
             ref_weight: torch.Tensor, ref_bias: torch.Tensor | None, target: torch.Tensor, beta: float,
             ignore_index: int) -> torch.Tensor:
    """The mean sigmoid DPO loss over the pairs of x (sequences, seq, hidden), log-probabilities averaged
    over the unignored tokens, both heads' logits upcast to float32 before the log-softmax (as
    ``LigerFusedLinearDPOLoss`` computes them); the reference head is a constant (no gradients)."""
    half = x.shape[0] // 2
    policy = batch_logps(head_logits(x, weight, bias).float(), target, ignore_index, average=True)
    with torch.no_grad():
        ref = batch_logps(head_logits(ref_x, ref_weight, ref_bias).float(), target, ignore_index, average=True)
    return pair_losses(policy[:half], policy[half:], ref[:half], ref[half:], beta).mean()


def hf_dpo_loss(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, ref_x: torch.Tensor,
                ref_weight: torch.Tensor, ref_bias: torch.Tensor | None, target: torch.Tensor, beta: float,
                ignore_index: int) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """``HFDPOLoss.get_batch_loss_metrics`` as TorchLMHeadDPO calls it: (loss, metrics).

    The same quantity as ``dpo_loss`` (averaged log-probabilities, the sigmoid loss, the mean over pairs), in
    upstream's precision: the trained head's logits upcast to float32 after the bias add in the input dtype;
    the reference head's logits, log-softmax and averaging left in the input dtype under ``torch.no_grad``;
    loss ``0 * alpha + mean(pair losses)`` (``compute_nll_loss=False``). The metrics (the chosen and rejected
    log-probabilities, the means of their logits, the NLL term and the rewards) are computed as upstream
    computes them on every call, so the pass does their work.
    """
    half = x.shape[0] // 2
    logits = head_logits(x, weight, bias).float()
    nll = torch.tensor(0.0, device=logits.device)
    policy = batch_logps(logits, target, ignore_index, average=True)
    chosen, rejected = policy[:half], policy[half:]
    with torch.no_grad():
        ref = batch_logps(head_logits(ref_x, ref_weight, ref_bias), target, ignore_index, average=True)
        ref_chosen, ref_rejected = ref[:half], ref[half:]
    losses = pair_losses(chosen, rejected, ref_chosen, ref_rejected, beta)
    loss = nll * 1.0 + losses.mean()
    metrics = (
        chosen,
        rejected,
        logits[:half].detach().mean(),
        logits[half:].detach().mean(),
        nll,
        beta * (chosen - ref_chosen),
        beta * (rejected - ref_rejected),
    )
    return loss, metrics
