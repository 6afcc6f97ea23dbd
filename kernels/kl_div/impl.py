"""KL divergence's rerun adapter (``kernels._adapter.RerunAdapter``): KL(target || exp(input)).

``input`` holds log-probabilities (the student, the one gradients flow to), ``target`` probabilities,
both [tokens, vocab]; the loss is ``torch.nn.KLDivLoss``'s, reduced by the workload's ``reduction``
(``batchmean``, upstream's only choice, when the workload leaves it out).

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_kl_div.py``: ``input`` the log-softmax and
``target`` the softmax of standard-normal draws (float32 upstream, so its runs carry no dtype),
``LigerKLDIVLoss`` against ``torch.nn.KLDivLoss``. Upstream's graph also holds the log-softmax that made
``input``; here ``input`` is the leaf, so only the divergence is measured.
"""

from __future__ import annotations

from importlib.metadata import version

import torch

from kernels._adapter import Built, Unavailable
from kernels._providers import liger_triton_attr
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, required_input_shapes

KERNEL = "kl_div"
PROVIDERS = ("liger", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("loss",)
GRAD_INPUTS = ("input",)
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64
DEFAULT_REDUCTION = "batchmean"
REDUCTIONS = ("batchmean", "sum", "mean", "none")


def _reduction(params) -> str:
    reduction = str(params.get("reduction", DEFAULT_REDUCTION))
    if reduction not in REDUCTIONS:
        raise ValueError(f"{KERNEL}: unknown reduction {reduction!r}; expected one of {REDUCTIONS}")
    return reduction


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = required_input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = RERUN_DTYPES[dtype]
    log_q = torch.randn(tuple(s["input"]), generator=gen, device=device, dtype=torch.float32).log_softmax(dim=-1)
    p = torch.randn(tuple(s["target"]), generator=gen, device=device, dtype=torch.float32).softmax(dim=-1)
    return {"input": log_q.to(td), "target": p.to(td)}


def reference(inputs, params) -> tuple[torch.Tensor]:
    log_q, p = inputs["input"], inputs["target"]
    pointwise = torch.xlogy(p, p) - p * log_q
    reduction = _reduction(params)
    if reduction == "none":
        return (pointwise,)
    if reduction == "sum":
        return (pointwise.sum(),)
    if reduction == "mean":
        return (pointwise.mean(),)
    return (pointwise.sum() / log_q.shape[0],)


def build(provider, inputs, params) -> Built:
    log_q = inputs["input"].detach().clone().requires_grad_(True)
    p = inputs["target"]
    reduction = _reduction(params)
    if provider == "liger":
        loss_fn = liger_triton_attr(log_q, "kl_div", "LigerKLDIVLoss")(reduction=reduction)
        label = f"Liger-Kernel {version('liger-kernel')} LigerKLDIVLoss"
    elif provider == "torch":
        loss_fn = torch.nn.KLDivLoss(reduction=reduction)
        label = f"PyTorch {torch.__version__} torch.nn.KLDivLoss"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    return Built(lambda: (loss_fn(log_q, p),), {"input": log_q}, label, OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read input and target, write the loss. Backward: read the target and the loss's gradient,
    write the input's gradient (-target scaled). Full: the inputs once, the loss and the gradient once.
    With ``reduction="none"`` the loss and its gradient are full [tokens, vocab] tensors."""
    tokens, vocab = required_input_shapes(KERNEL, params)["input"]
    e = RERUN_BYTES[dtype]
    one = tokens * vocab * e
    loss = one if _reduction(params) == "none" else e
    return {
        "forward": 2 * one + loss,
        "backward": one + loss + one,
        "full": 2 * one + 2 * loss + one,
    }[mode]


def flops(params, mode) -> int:
    """Per element: forward 4 (log of the target, difference, product, sum); backward 2 (negate and
    scale the target by the loss's gradient)."""
    tokens, vocab = required_input_shapes(KERNEL, params)["input"]
    n = tokens * vocab
    return {"forward": 4 * n, "backward": 2 * n, "full": 6 * n}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
