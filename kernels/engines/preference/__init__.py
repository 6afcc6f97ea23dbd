"""The rerun adapter of a paired preference loss over an LM head (ORPO, CPO, SimPO), one class for the three.

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_{orpo,cpo,simpo}_loss.py``: x drawn from a
normal distribution, targets (and ORPO's separate NLL targets) uniform over the vocabulary, none ignored,
and the LM head weight as ``torch.nn.Linear`` initializes it (the scripts keep that weight). The spec's x
rows are whole sequences of ``seq`` tokens; the first half of the sequences are the chosen responses, the
second half the rejected ones, as both upstream losses split the batch.

The reference runs in float32 (TF32 off): at the rerun sizes (up to 131072 rows, vocab 128256) float64
logits alone would exceed the GPU, and float32 is far more precise than the bfloat16 passes it checks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.adapter import Built
from kernels.tensors import RERUN_DTYPES, generator, input_shapes, leaf_copies
from kernels.engines.lm_head import LMHeadAdapter, chunked_label, compiled_on, liger_chunked_loss, linear_weight
from kernels.engines.preference.hf import preference_loss

IGNORE_INDEX = -100


@dataclass(frozen=True)
class PreferenceAdapter(LMHeadAdapter):
    """The adapter of one preference loss.

    ``kind``: the loss the reference computes ("orpo", "cpo", "simpo"); ``baseline``: the loss upstream's
    huggingface provider computes, with ``baseline_what`` naming it in the label; ``liger``: (module, class)
    under ``liger_kernel.chunked_loss``; ``nll_target``: whether the loss takes ORPO's separate NLL targets.
    """

    KERNEL: str
    kind: str
    baseline: str
    baseline_what: str
    liger: tuple[str, str]
    nll_target: bool = False

    GRAD_INPUTS = ("x", "weight")
    # Log-softmax (max, exp, sum, log) and the gather a logit forward; its gradient backward.
    FLOPS_PER_LOGIT = (4, 2)

    def dims(self, params) -> tuple[int, int, int, int]:
        """(sequences, seq, hidden, vocab): the spec's rows split into sequences of ``seq`` tokens."""
        s = input_shapes(self.KERNEL, params)
        rows, hidden = s["x"]
        seq = int(params["seq"])
        if rows % seq or (rows // seq) % 2:
            raise ValueError(f"{self.KERNEL}: {rows} rows are not an even number of sequences of {seq} tokens")
        return rows // seq, seq, hidden, s["weight"][0]

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        sequences, seq, hidden, vocab = self.dims(params)
        rows = sequences * seq
        gen = generator(seed, device)
        td = RERUN_DTYPES[dtype]
        x = torch.randn((rows, hidden), generator=gen, device=device, dtype=torch.float32)
        target = torch.randint(0, vocab, (rows,), generator=gen, device=device, dtype=torch.int64)
        out = {"x": x.to(td), "weight": linear_weight(vocab, hidden, gen, device).to(td), "target": target}
        if self.nll_target:
            out["nll_target"] = torch.randint(0, vocab, (rows,), generator=gen, device=device, dtype=torch.int64)
        return out

    def _split(self, inputs, params):
        """x, target (and NLL targets) as (sequences, seq, ...) views, the layout the upstream losses take."""
        sequences, seq, hidden, _ = self.dims(params)
        x = inputs["x"].view(sequences, seq, hidden)
        target = inputs["target"].view(sequences, seq)
        nll = inputs["nll_target"].view(sequences, seq) if self.nll_target else None
        return x, target, nll

    def reference(self, inputs, params):
        x, target, nll = self._split(inputs, params)
        return (preference_loss(x, inputs["weight"], target, self.kind, nll_target=nll, ignore_index=IGNORE_INDEX),)

    def _liger(self, provider, inputs, params) -> Built:
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        split, weight = {**inputs, **leaves}, leaves["weight"]
        module, name = self.liger
        loss = liger_chunked_loss(module, name)(ignore_index=IGNORE_INDEX, compiled=compiled_on(weight))

        def fn():
            x, target, nll = self._split(split, params)
            extra = {"nll_target": nll} if self.nll_target else {}
            return (loss(weight, x, target, None, **extra)[0],)

        return self.built(fn, leaves, chunked_label(name, weight))

    def _huggingface(self, provider, inputs, params) -> Built:
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        split, weight = {**inputs, **leaves}, leaves["weight"]

        def fn():
            x, target, nll = self._split(split, params)
            return (preference_loss(x, weight, target, self.baseline, nll_target=nll, ignore_index=IGNORE_INDEX),)

        return self.built(fn, leaves, f"PyTorch {torch.__version__} equivalent of the upstream {self.baseline_what}")

    BUILDERS = {"liger": _liger, "huggingface": _huggingface}

    def heads(self, params) -> list[tuple[int, int, int, bool]]:
        sequences, seq, hidden, vocab = self.dims(params)
        return [(sequences * seq, hidden, vocab, True)]

    def index_reads(self, params) -> int:
        """The targets, and ORPO's NLL targets."""
        sequences, seq, _, _ = self.dims(params)
        return sequences * seq * (2 if self.nll_target else 1)
