"""DPO loss's rerun adapter, as Liger-Kernel's ``benchmark/scripts/benchmark_dpo_loss.py`` runs it at the
revisions the claims cite (0.5.10 to 0.7.0; from 0.6.1 the script at 1ea9175a builds both modules once,
outside the timed pass): ``LigerFusedLinearDPOLoss`` through LigerLMHeadDPO against TorchLMHeadDPO (the
upstream HF DPO loss), both with a reference model, ``average_log_prob=True``, the sigmoid loss and no NLL
term, at the workload's ``beta`` and ``ignore_index``.

The two providers compute the same quantity: the mean over pairs of ``-logsigmoid(beta * (chosen log-ratio -
rejected log-ratio))`` on log-probabilities averaged over each sequence's unignored tokens (Liger's loss sums
the pairs' losses over its chunks and divides by the number of pairs; the HF loss takes their mean). They
differ in precision only: the HF baseline runs the reference head's log-softmax and averaging in the input
dtype, where Liger upcasts both heads' logits to float32. The reference is that loss in float32; see
``kernels.dpo_loss.loss``.

Inputs are drawn as the script draws them: x and the reference model's hidden states ``ref_x`` normal;
targets uniform over the vocabulary, then a random count (1 to half the tokens, exclusive) of random
positions set to ``ignore_index``; the trained head's weight and bias and the reference head's weight as
``torch.nn.Linear`` initializes them, uniform on +-1/sqrt(hidden). The workloads say ``bias: true``: the
script passes it to both modules as ``bias``, so the trained head has a bias and the reference head (its
``ref_bias`` left at False) has none. ``batch`` is the script's B, sequences counted chosen and rejected
together (x is (B, T, H), split in halves), so it must be even.

Gradients are taken for the trained head's weight and bias only: the script's x is drawn without
``requires_grad`` (its backward mode clears x's gradient, which no pass makes), so neither provider computes
an input gradient, and the reference head is a constant to both losses. Upstream builds each provider's
module with its own random heads; here both providers run over the same drawn heads, so that they can be
compared.

The reference runs in float32 (TF32 off): at the rerun sizes (up to 16384 rows, vocab 128256, two heads)
float64 logits would not fit, and float32 is far more precise than the bfloat16 passes it checks.
"""

from __future__ import annotations


import torch

from kernels.adapter import Adapter, Built
from kernels.dpo_loss.loss import dpo_loss, hf_dpo_loss
from kernels.engines.lm_head import (
    chunked_label,
    compiled_on,
    flag,
    liger_chunked_loss,
    linear_bias,
    linear_weight,
    loss_params,
)
from kernels.spec import DTYPE_BYTES
from kernels.tensors import (
    RERUN_BYTES,
    RERUN_DTYPES,
    generator,
    input_shapes,
    leaf_copies,
    per_mode,
)

# A logit forward: the trained head's bias add, and per head the log-softmax (max, exp, sum, log) and the
# gather; backward, for the trained head: the log-softmax gradient and the bias gradient's reduction.
FWD_PER_POLICY_LOGIT = 5
FWD_PER_REF_LOGIT = 4
BWD_PER_LOGIT = 3


class DPOLoss(Adapter):
    KERNEL = "dpo_loss"
    OUTPUT_NAMES = ("loss",)
    GRAD_INPUTS = ("weight", "bias")
    REFERENCE_DTYPE = torch.float32

    def dims(self, params) -> tuple[int, int, int, int]:
        """(batch, seq, hidden, vocab): the spec's rows split into ``batch`` sequences of ``seq`` tokens, an
        even number (chosen, then rejected)."""
        if not flag(params.get("bias", False)):
            raise ValueError(f"{self.KERNEL}: the adapter covers the script's biased trained head (bias true), "
                             f"not bias {params.get('bias')!r}")
        s = input_shapes(self.KERNEL, params)
        rows, hidden = s["x"]
        seq = int(params["seq"])
        if rows % seq or (rows // seq) % 2 or rows < 2 * seq or seq < 2:
            raise ValueError(f"{self.KERNEL}: {rows} rows are not an even number of sequences of {seq} tokens "
                             "(one chosen and one rejected at least, two tokens each at least)")
        return rows // seq, seq, hidden, s["weight"][0]

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        batch, seq, hidden, vocab = self.dims(params)
        _, ignore_index = loss_params(params)
        rows = batch * seq
        gen = generator(seed, device)
        td = RERUN_DTYPES[dtype]
        x = torch.randn((rows, hidden), generator=gen, device=device, dtype=torch.float32)
        ref_x = torch.randn((rows, hidden), generator=gen, device=device, dtype=torch.float32)
        target = torch.randint(0, vocab, (rows,), generator=gen, device=device, dtype=torch.int64)
        count = int(torch.randint(1, rows // 2, (1,), generator=gen, device=device).item())
        target[torch.randperm(rows, generator=gen, device=device)[:count]] = ignore_index
        return {
            "x": x.to(td),
            "weight": linear_weight(vocab, hidden, gen, device).to(td),
            "target": target,
            "bias": linear_bias(vocab, hidden, gen, device).to(td),
            "ref_x": ref_x.to(td),
            "ref_weight": linear_weight(vocab, hidden, gen, device).to(td),
        }

    def _split(self, inputs, params) -> dict[str, torch.Tensor]:
        """The loss's arguments: x, ref_x (batch, seq, hidden) and targets (batch, seq) as the upstream losses
        take them, the heads as they are (the reference head without a bias)."""
        batch, seq, hidden, _ = self.dims(params)
        return {
            "x": inputs["x"].view(batch, seq, hidden),
            "weight": inputs["weight"],
            "bias": inputs["bias"],
            "ref_x": inputs["ref_x"].view(batch, seq, hidden),
            "ref_weight": inputs["ref_weight"],
            "ref_bias": None,
            "target": inputs["target"].view(batch, seq),
        }

    def reference(self, inputs, params):
        beta, ignore_index = loss_params(params)
        return (dpo_loss(**self._split(inputs, params), beta=beta, ignore_index=ignore_index),)

    def _liger(self, provider, inputs, params) -> Built:
        beta, ignore_index = loss_params(params)
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        args = self._split({**inputs, **leaves}, params)
        cls = liger_chunked_loss("dpo_loss", "LigerFusedLinearDPOLoss")
        # LigerLMHeadDPO's settings; loss_type (added in 0.6.x) left at its default, "sigmoid".
        loss = cls(ignore_index=ignore_index, beta=beta, use_ref_model=True, compute_nll_loss=False,
                   average_log_prob=True, compiled=compiled_on(leaves["weight"]))

        def fn():
            out = loss(args["weight"], args["x"], args["target"], args["bias"],
                       args["ref_x"], args["ref_weight"], args["ref_bias"])
            return (out[0],)

        return self.built(fn, leaves, chunked_label("LigerFusedLinearDPOLoss", leaves["weight"]))

    def _huggingface(self, provider, inputs, params) -> Built:
        beta, ignore_index = loss_params(params)
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        args = self._split({**inputs, **leaves}, params)
        label = (f"PyTorch {torch.__version__} equivalent of the upstream HF DPO loss (TorchLMHeadDPO, "
                 "HFDPOLoss.get_batch_loss_metrics, sigmoid, averaged log-probabilities)")
        return self.built(lambda: (hf_dpo_loss(**args, beta=beta, ignore_index=ignore_index)[0],), leaves, label)

    BUILDERS = {"liger": _liger, "huggingface": _huggingface}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Fewest bytes without materialized logits. Forward reads both heads' hidden states and weights, the
        trained head's bias and the int64 targets, and writes the loss; backward reads them again and writes
        the trained head's weight and bias gradients; full reads once and writes both."""
        batch, seq, hidden, vocab = self.dims(params)
        e, rows = RERUN_BYTES[dtype], batch * seq
        reads = (2 * (rows * hidden + vocab * hidden) + vocab) * e + rows * DTYPE_BYTES["int64"]
        grads, loss = (vocab * hidden + vocab) * e, DTYPE_BYTES["fp32"]
        return {"forward": reads + loss, "backward": reads + grads, "full": reads + loss + grads}[mode]

    def flops(self, params, mode) -> int:
        """GEMMs at 2 FLOPs a multiply-add (forward: both heads' logits; backward: the trained head's weight
        gradient, no input gradient) plus the reductions' FLOPs a logit."""
        batch, seq, hidden, vocab = self.dims(params)
        rows = batch * seq
        fwd = 2 * (2 * rows * hidden * vocab) + (FWD_PER_POLICY_LOGIT + FWD_PER_REF_LOGIT) * rows * vocab
        bwd = 2 * rows * hidden * vocab + BWD_PER_LOGIT * rows * vocab
        return per_mode(fwd, bwd, mode)

    def matmul_shapes(self, params) -> list[tuple[int, int, int]]:
        """(m, n, k): the policy and reference logits x @ weight.T, and the weight gradient dlogits.T @ x."""
        batch, seq, hidden, vocab = self.dims(params)
        rows = batch * seq
        return [(rows, vocab, hidden), (rows, vocab, hidden), (vocab, hidden, rows)]


ADAPTER = DPOLoss()
