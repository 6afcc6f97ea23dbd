"""KTO's loss over a trained LM head and a frozen reference head: the float32 reference arithmetic and a
PyTorch equivalent of the upstream huggingface baseline.

Liger-Kernel's ``benchmark/scripts/benchmark_kto_loss.py`` times ``LigerFusedLinearKTOLoss`` against
TorchLMHeadKTO, which calls ``HFKTOLoss.get_batch_loss_metrics`` (``test/chunked_loss/test_kto_loss.py`` on
``HFAlignmentLoss`` in ``test/utils.py``, adapted there from TRL). Those classes live in Liger's test tree,
not in the ``liger-kernel`` wheel, so this module carries the same arithmetic.

KTO is unpaired: each sequence carries its own preference label (chosen or rejected) and the loss of a
sequence is ``1 - sigmoid(beta * (logratio - kl))`` when chosen, ``1 - sigmoid(beta * (kl - logratio))``
when rejected, ``logratio`` being the policy's sequence log-probability less the reference head's and
``kl`` a precomputed KL estimate; the loss is the mean over sequences. The two upstream providers do not
compute the same number: the script builds Liger's loss at its default ``average_log_prob=False`` (summed
log-probabilities) while ``get_batch_loss_metrics`` defaults to ``average_log_prob=True`` (averaged over the
unignored tokens).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.engines.preference.hf import batch_logps


def head_logps(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    target: torch.Tensor,
    ignore_index: int,
    average: bool,
    upcast: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-sequence log-probabilities of ``target`` (sequences, seq), logits) of the head ``x @ weight.T +
    bias`` over x (sequences, seq, hidden); ``upcast``: the logits go to float32 before the log-softmax."""
    logits = x @ weight.t()
    if bias is not None:
        logits = logits + bias
    if upcast:
        logits = logits.float()
    return batch_logps(logits, target, ignore_index, average), logits


def kto_losses(
    logratios: torch.Tensor,
    kl: torch.Tensor,
    chosen: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """Each sequence's KTO loss: ``1 - sigmoid(beta * (logratio - kl))`` for the chosen (``chosen`` True),
    ``1 - sigmoid(beta * (kl - logratio))`` for the rejected."""
    sign = torch.where(chosen, 1.0, -1.0).to(logratios.dtype)
    return 1 - torch.sigmoid(beta * (logratios - kl) * sign)


def kto_loss(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, ref_x: torch.Tensor,
             ref_weight: torch.Tensor, ref_bias: torch.Tensor | None, target: torch.Tensor, chosen: torch.Tensor,
             kl: torch.Tensor, beta: float, ignore_index: int, average: bool = False) -> torch.Tensor:
    """The mean KTO loss of the sequences of x (sequences, seq, hidden), both heads' logits upcast to float32
    before the log-softmax, as ``LigerFusedLinearKTOLoss`` computes it (``average`` False: summed
    log-probabilities, Liger's default); the reference head is a constant (no gradients)."""
    policy, _ = head_logps(x, weight, bias, target, ignore_index, average, upcast=True)
    with torch.no_grad():
        ref, _ = head_logps(ref_x, ref_weight, ref_bias, target, ignore_index, average, upcast=True)
    return kto_losses(policy - ref, kl, chosen, beta).mean()


def hf_kto_loss(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, ref_x: torch.Tensor,
                ref_weight: torch.Tensor, ref_bias: torch.Tensor | None, target: torch.Tensor, chosen: torch.Tensor,
                kl: torch.Tensor, beta: float, ignore_index: int) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """``HFKTOLoss.get_batch_loss_metrics`` as the script calls it: (loss, metrics).

    Averaged log-probabilities (the method's default); the policy logits upcast to float32, the reference
    head's logits and log-softmax left in the input dtype under ``torch.no_grad``; sequences and logits split
    by boolean indexing into chosen and rejected; no NLL term (``compute_nll_loss=False``); loss ``0 * alpha
    + mean(cat(chosen losses, rejected losses))``. The metrics (sums of the chosen and rejected log-probs,
    logits and rewards) are computed as upstream computes them on every call, so the pass does their work.
    """
    policy, logits = head_logps(x, weight, bias, target, ignore_index, average=True, upcast=True)
    policy_chosen, policy_rejected = policy[chosen], policy[~chosen]
    chosen_logits, rejected_logits = logits[chosen], logits[~chosen]
    with torch.no_grad():
        ref, _ = head_logps(ref_x, ref_weight, ref_bias, target, ignore_index, average=True, upcast=False)
        ref_chosen, ref_rejected = ref[chosen], ref[~chosen]
    chosen_ratios = policy_chosen - ref_chosen
    rejected_ratios = policy_rejected - ref_rejected
    chosen_losses = 1 - F.sigmoid(beta * (chosen_ratios - kl))
    rejected_losses = 1 - F.sigmoid(beta * (kl - rejected_ratios))
    losses = torch.cat((chosen_losses, rejected_losses), 0)
    nll = torch.tensor(0.0, device=logits.device)
    loss = nll * 1.0 + losses.mean()
    metrics = (
        policy_chosen.detach().sum(),
        policy_rejected.detach().sum(),
        chosen_logits.detach().sum(),
        rejected_logits.detach().sum(),
        (beta * chosen_ratios).sum(),
        (beta * rejected_ratios).sum(),
    )
    return loss, metrics
