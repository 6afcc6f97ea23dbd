"""Fused linear KTO loss's rerun adapter, as Liger-Kernel's
``benchmark/scripts/benchmark_kto_loss.py`` runs it: ``LigerFusedLinearKTOLoss`` with a reference model
(``use_ref_model=True``) against TorchLMHeadKTO (the upstream HF KTO loss).

Inputs are drawn as the script draws them: x and the reference model's hidden states ``ref_x`` normal;
targets uniform over the vocabulary, then a random count (1 to half the tokens, exclusive) of random
positions set to ``ignore_index``; one preference label per sequence (chosen or rejected, a fair coin);
a precomputed KL estimate ``kl`` of one normal value; and both LM heads (``weight``, ``bias`` and
``ref_weight``, ``ref_bias``) as ``torch.nn.Linear`` initializes them, uniform on +-1/sqrt(hidden). The
spec's x rows are ``batch`` sequences of ``seq`` tokens. The workloads say ``bias: true``; both heads get a
bias here, as the script's memory benchmark and its current speed benchmark build them (the speed
benchmark of the script that timed the shipped data left the reference head without one).

Gradients are taken for the trained head's weight and bias only: the script's x is drawn without
``requires_grad``, so Liger computes no input gradient, and the reference head is a constant to both losses.

The reference is Liger's loss (summed sequence log-probabilities, its default, as the script builds it) in
float32 (TF32 off): at the rerun sizes (up to 16384 rows, vocab 128256, two heads) float64 logits would not
fit, and float32 is far more precise than the bfloat16 passes it checks. The huggingface provider computes
the HF loss on averaged log-probabilities (``get_batch_loss_metrics``' default), a different number, so its
comparison with the reference fails; see ``kernels.kto_loss.loss``.
"""

from __future__ import annotations


import torch

from kernels.adapter import Adapter, Built
from kernels.spec import DTYPE_BYTES
from kernels.tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, leaf_copies, per_mode
from kernels.engines.lm_head import (
    chunked_label,
    compiled_on,
    flag,
    liger_chunked_loss,
    linear_bias,
    linear_weight,
    loss_params,
)
from kernels.kto_loss.loss import hf_kto_loss, kto_loss

# A logit forward, per head: the bias add, the log-softmax (max, exp, sum, log) and the gather; backward,
# for the trained head: the log-softmax gradient and the bias gradient's reduction.
FWD_PER_LOGIT = 5
BWD_PER_LOGIT = 3


class KTOLoss(Adapter):
    KERNEL = "kto_loss"
    OUTPUT_NAMES = ("loss",)
    GRAD_INPUTS = ("weight", "bias")
    REFERENCE_DTYPE = torch.float32

    def dims(self, params) -> tuple[int, int, int, int]:
        """(batch, seq, hidden, vocab): the spec's rows split into sequences of ``seq`` tokens."""
        s = input_shapes(self.KERNEL, params)
        rows, hidden = s["x"]
        seq = int(params["seq"])
        if rows % seq or rows < 4:
            raise ValueError(f"{self.KERNEL}: {rows} rows are not whole sequences of {seq} tokens (4 rows at least)")
        if not flag(params.get("bias", False)):
            raise ValueError(f"{self.KERNEL}: the adapter covers the script's biased heads (bias true), "
                             f"not bias {params.get('bias')!r}")
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
        chosen = torch.randint(0, 2, (batch,), generator=gen, device=device).bool()
        kl = torch.randn((1,), generator=gen, device=device, dtype=torch.float32)
        count = int(torch.randint(1, rows // 2, (1,), generator=gen, device=device).item())
        target[torch.randperm(rows, generator=gen, device=device)[:count]] = ignore_index
        return {
            "x": x.to(td),
            "weight": linear_weight(vocab, hidden, gen, device).to(td),
            "target": target,
            "bias": linear_bias(vocab, hidden, gen, device).to(td),
            "ref_x": ref_x.to(td),
            "ref_weight": linear_weight(vocab, hidden, gen, device).to(td),
            "ref_bias": linear_bias(vocab, hidden, gen, device).to(td),
            "preference_labels": chosen,
            "kl": kl.to(td),
        }

    def _split(self, inputs, params) -> dict[str, torch.Tensor]:
        """The loss's arguments, x, ref_x (batch, seq, hidden) and targets (batch, seq) as the upstream losses
        take them, the heads and labels as they are."""
        batch, seq, hidden, _ = self.dims(params)
        return {
            "x": inputs["x"].view(batch, seq, hidden),
            "weight": inputs["weight"],
            "bias": inputs["bias"],
            "ref_x": inputs["ref_x"].view(batch, seq, hidden),
            "ref_weight": inputs["ref_weight"],
            "ref_bias": inputs["ref_bias"],
            "target": inputs["target"].view(batch, seq),
            "chosen": inputs["preference_labels"],
            "kl": inputs["kl"],
        }

    def reference(self, inputs, params):
        beta, ignore_index = loss_params(params)
        return (kto_loss(**self._split(inputs, params), beta=beta, ignore_index=ignore_index),)

    def _liger(self, provider, inputs, params) -> Built:
        beta, ignore_index = loss_params(params)
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        args = self._split({**inputs, **leaves}, params)
        cls = liger_chunked_loss("kto_loss", "LigerFusedLinearKTOLoss")
        loss = cls(ignore_index=ignore_index, beta=beta, use_ref_model=True, compiled=compiled_on(leaves["weight"]))

        def fn():
            out = loss(
                _input=args["x"],
                lin_weight=args["weight"],
                target=args["target"],
                preference_labels=args["chosen"],
                bias=args["bias"],
                ref_input=args["ref_x"],
                ref_weight=args["ref_weight"],
                ref_bias=args["ref_bias"],
                kl=args["kl"],
            )
            return (out[0],)

        return self.built(fn, leaves, chunked_label("LigerFusedLinearKTOLoss", leaves["weight"]))

    def _huggingface(self, provider, inputs, params) -> Built:
        beta, ignore_index = loss_params(params)
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        args = self._split({**inputs, **leaves}, params)
        label = (f"PyTorch {torch.__version__} equivalent of the upstream HF KTO loss (TorchLMHeadKTO, "
                 "HFKTOLoss.get_batch_loss_metrics, averaged log-probabilities)")
        return self.built(lambda: (hf_kto_loss(**args, beta=beta, ignore_index=ignore_index)[0],), leaves, label)

    BUILDERS = {"liger": _liger, "huggingface": _huggingface}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Fewest bytes without materialized logits. Forward reads both heads' hidden states, weights and
        biases, the int64 targets, the labels and kl, and writes the loss; backward reads them again and writes
        the trained head's weight and bias gradients; full reads once and writes both."""
        batch, seq, hidden, vocab = self.dims(params)
        e, rows = RERUN_BYTES[dtype], batch * seq
        reads = 2 * (rows * hidden + vocab * hidden + vocab) * e + rows * DTYPE_BYTES["int64"] + batch * DTYPE_BYTES["bool"] + e
        grads, loss = (vocab * hidden + vocab) * e, DTYPE_BYTES["fp32"]
        return {"forward": reads + loss, "backward": reads + grads, "full": reads + loss + grads}[mode]

    def flops(self, params, mode) -> int:
        """GEMMs at 2 FLOPs a multiply-add (forward: both heads' logits; backward: the trained head's weight
        gradient, no input gradient) plus the reductions' FLOPs a logit."""
        batch, seq, hidden, vocab = self.dims(params)
        rows = batch * seq
        fwd = 2 * (2 * rows * hidden * vocab + FWD_PER_LOGIT * rows * vocab)
        bwd = 2 * rows * hidden * vocab + BWD_PER_LOGIT * rows * vocab
        return per_mode(fwd, bwd, mode)

    def matmul_shapes(self, params) -> list[tuple[int, int, int]]:
        """(m, n, k): the policy and reference logits x @ weight.T, and the weight gradient dlogits.T @ x."""
        batch, seq, hidden, vocab = self.dims(params)
        rows = batch * seq
        return [(rows, vocab, hidden), (rows, vocab, hidden), (vocab, hidden, rows)]


ADAPTER = KTOLoss()
