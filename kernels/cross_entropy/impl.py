"""Cross entropy's rerun adapter (``kernels._adapter.RerunAdapter``): mean token loss of logits against targets.

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

from importlib.metadata import version

import torch
import torch.nn.functional as F

from kernels._adapter import Built, Unavailable
from kernels._providers import liger_triton_attr
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, randn, required_input_shapes

KERNEL = "cross_entropy"
PROVIDERS = ("liger", "torch", "huggingface")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("loss",)
GRAD_INPUTS = ("logits",)
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64

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
_INDEX_BYTES = 8


def resolved_params(params) -> dict:
    """The workload's parameters with the vocabulary a model-sweep workload leaves to its model."""
    p = dict(params)
    if "vocab" not in p and "model" in p:
        try:
            p["vocab"] = MODEL_VOCAB[p["model"]]
        except KeyError:
            raise ValueError(f"{KERNEL}: unknown model {p['model']!r}; known: {sorted(MODEL_VOCAB)}") from None
    return p


def _shapes(params) -> dict[str, list[int]]:
    return required_input_shapes(KERNEL, resolved_params(params), shown=params)


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = _shapes(params)
    tokens, vocab = s["logits"]
    gen = generator(seed, device)
    logits = randn((tokens, vocab), RERUN_DTYPES[dtype], gen, device)
    target = torch.randint(vocab, (tokens,), generator=gen, device=device, dtype=torch.int64)
    return {"logits": logits, "target": target}


def reference(inputs, params) -> tuple[torch.Tensor]:
    return (F.cross_entropy(inputs["logits"], inputs["target"], reduction="mean"),)


def build(provider, inputs, params) -> Built:
    logits = inputs["logits"].detach().clone().requires_grad_(True)
    target = inputs["target"]
    if provider == "liger":
        loss_fn = liger_triton_attr(logits, "cross_entropy", "LigerCrossEntropyLoss")()
        label = f"Liger-Kernel {version('liger-kernel')} LigerCrossEntropyLoss"
    elif provider == "torch":
        loss_fn = torch.nn.CrossEntropyLoss()
        label = f"PyTorch {torch.__version__} torch.nn.CrossEntropyLoss"
    elif provider == "huggingface":
        loss_fn = torch.nn.CrossEntropyLoss()
        label = (f"PyTorch {torch.__version__} torch.nn.CrossEntropyLoss "
                 "(upstream's 2024 script named it huggingface)")
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    return Built(lambda: (loss_fn(logits, target),), {"logits": logits}, label, OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read logits and targets, write the loss. Backward: read logits, targets and the loss's
    gradient, write the logits' gradient. Full: those inputs once, the loss and the gradient once."""
    tokens, vocab = _shapes(params)["logits"]
    e = RERUN_BYTES[dtype]
    logits = tokens * vocab * e
    target = tokens * _INDEX_BYTES
    return {
        "forward": logits + target + e,
        "backward": logits + target + e + logits,
        "full": logits + target + e + e + logits,
    }[mode]


def flops(params, mode) -> int:
    """Per logit: forward 4 (running max, subtract, exp, sum); backward 3 (exp, divide by the sum, scale)."""
    tokens, vocab = _shapes(params)["logits"]
    n = tokens * vocab
    return {"forward": 4 * n, "backward": 3 * n, "full": 7 * n}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
