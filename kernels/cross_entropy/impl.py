"""Cross entropy's rerun adapter: mean token loss of logits against targets.

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_cross_entropy.py``: logits
[tokens, vocab] drawn from a standard normal (float32 upstream, so its runs carry no dtype), integer
targets drawn uniformly from the vocabulary, loss averaged over tokens (``reduction="mean"``). Tokens are
``batch * seq`` in the vocabulary sweep, ``tokens`` in the token sweep; the model sweep names a model
whose vocabulary ``MODEL_VOCAB`` holds. The comparison upstream is ``LigerCrossEntropyLoss`` against
``torch.nn.CrossEntropyLoss``, named ``torch`` by the current script and ``huggingface`` by the script of
2024 (Transformers computes its loss with that same module).

Liger's forward writes the logits' gradient into the logits tensor in place, so repeated forwards over
one pass see those values; upstream's benchmark reuses its tensor the same way.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.adapter import Adapter, Built
from kernels.providers import liger_attr, liger_label
from kernels.spec import DTYPE_BYTES
from kernels.tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, leaf, per_mode, randn

# Vocabulary sizes of the models upstream's model sweep names (``benchmark_model_configs.MODEL_REGISTRY``).
MODEL_VOCAB = {
    "llama_2_7b": 32000,
    "llama_3_8b": 128256,
    "qwen2.5_7b": 152064,
    "qwen2.5_14b": 152064,
    "qwen2.5_72b": 152064,
    "deepseek_v2_lite": 102400,
    "deepseek_v3": 129280,
}


class CrossEntropy(Adapter):
    KERNEL = "cross_entropy"
    OUTPUT_NAMES = ("loss",)
    GRAD_INPUTS = ("logits",)
    REFERENCE_DTYPE = torch.float64

    def resolved_params(self, params) -> dict:
        """The workload's parameters with the vocabulary a model-sweep workload leaves to its model."""
        p = dict(params)
        if "vocab" not in p and "model" in p:
            try:
                p["vocab"] = MODEL_VOCAB[p["model"]]
            except KeyError:
                raise ValueError(f"{self.KERNEL}: unknown model {p['model']!r}; known: {sorted(MODEL_VOCAB)}") from None
        return p

    def dims(self, params) -> tuple[int, int]:
        """(tokens, vocab) of a workload."""
        tokens, vocab = input_shapes(self.KERNEL, self.resolved_params(params), shown=params)["logits"]
        return tokens, vocab

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        tokens, vocab = self.dims(params)
        gen = generator(seed, device)
        logits = randn((tokens, vocab), RERUN_DTYPES[dtype], gen, device)
        target = torch.randint(vocab, (tokens,), generator=gen, device=device, dtype=torch.int64)
        return {"logits": logits, "target": target}

    def reference(self, inputs, params) -> tuple[torch.Tensor]:
        return (F.cross_entropy(inputs["logits"], inputs["target"], reduction="mean"),)

    def _loss_pass(self, loss_fn, inputs, label: str) -> Built:
        logits, target = leaf(inputs["logits"]), inputs["target"]
        return self.built(lambda: (loss_fn(logits, target),), {"logits": logits}, label)

    def _liger(self, provider, inputs, params) -> Built:
        loss_fn = liger_attr(inputs["logits"], "cross_entropy", "LigerCrossEntropyLoss")()
        return self._loss_pass(loss_fn, inputs, liger_label("LigerCrossEntropyLoss"))

    def _torch(self, provider, inputs, params) -> Built:
        label = f"PyTorch {torch.__version__} torch.nn.CrossEntropyLoss"
        if provider == "huggingface":
            label += " (upstream's 2024 script named it huggingface)"
        return self._loss_pass(torch.nn.CrossEntropyLoss(), inputs, label)

    BUILDERS = {"liger": _liger, "torch": _torch, "huggingface": _torch}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward: read logits and targets, write the loss. Backward: read logits, targets and the loss's
        gradient, write the logits' gradient. Full: those inputs once, the loss and the gradient once."""
        tokens, vocab = self.dims(params)
        e = RERUN_BYTES[dtype]
        logits, reads = tokens * vocab * e, tokens * (vocab * e + DTYPE_BYTES["int64"]) + e
        return {"forward": reads, "backward": reads + logits, "full": reads + e + logits}[mode]

    def flops(self, params, mode) -> int:
        """Per logit: forward 4 (running max, subtract, exp, sum); backward 3 (exp, divide by the sum, scale)."""
        tokens, vocab = self.dims(params)
        return per_mode(4 * tokens * vocab, 3 * tokens * vocab, mode)


ADAPTER = CrossEntropy()
