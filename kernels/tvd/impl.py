"""Total variation distance's rerun adapter (``kernels._adapter.RerunAdapter``): sum |P - Q| / 2.

``input`` holds P (the one gradients flow to), ``target`` Q, both probabilities [tokens, vocab]; the
distance is reduced by the workload's ``reduction`` (``batchmean``, upstream's only choice, when the
workload leaves it out).

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_tvd.py``: both the softmax of a
standard-normal draw (float32 upstream, so its runs carry no dtype), ``LigerTVDLoss`` against the
script's own PyTorch module, which this adapter restates since the script is not an importable package.
Upstream's graph also holds the softmax that made ``input``; here ``input`` is the leaf, so only the
distance is measured.
"""

from __future__ import annotations

from importlib.metadata import version

import torch

from kernels._adapter import Built, Unavailable
from kernels._providers import liger_triton_attr
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, required_input_shapes

KERNEL = "tvd"
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
    out = {}
    for name in ("input", "target"):
        draw = torch.randn(tuple(s[name]), generator=gen, device=device, dtype=torch.float32)
        out[name] = draw.softmax(dim=-1).to(td)
    return out


def _reduce(pointwise: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "none":
        return pointwise
    if reduction == "sum":
        return pointwise.sum()
    if reduction == "mean":
        return pointwise.sum() / pointwise.numel()
    return pointwise.sum() / pointwise.shape[0]


def reference(inputs, params) -> tuple[torch.Tensor]:
    return (_reduce((inputs["input"] - inputs["target"]).abs() / 2, _reduction(params)),)


class TorchTVDLoss(torch.nn.Module):
    """PyTorch equivalent of upstream benchmark_tvd.py's TorchTVDLoss: |p - q| / 2, then the reduction,
    in the inputs' dtype."""

    def __init__(self, reduction: str = DEFAULT_REDUCTION):
        super().__init__()
        self.reduction = reduction

    def forward(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return _reduce(torch.abs(p - q) / 2.0, self.reduction)


def build(provider, inputs, params) -> Built:
    p = inputs["input"].detach().clone().requires_grad_(True)
    q = inputs["target"]
    reduction = _reduction(params)
    if provider == "liger":
        loss_fn = liger_triton_attr(p, "tvd", "LigerTVDLoss")(reduction=reduction)
        label = f"Liger-Kernel {version('liger-kernel')} LigerTVDLoss"
    elif provider == "torch":
        loss_fn = TorchTVDLoss(reduction=reduction)
        label = f"PyTorch {torch.__version__} equivalent of upstream benchmark_tvd.py's TorchTVDLoss"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    return Built(lambda: (loss_fn(p, q),), {"input": p}, label, OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read input and target, write the loss. Backward: read input, target and the loss's
    gradient, write the input's gradient (the sign of the difference, scaled). Full: the inputs once,
    the loss and the gradient once. With ``reduction="none"`` the loss and its gradient are full
    [tokens, vocab] tensors."""
    tokens, vocab = required_input_shapes(KERNEL, params)["input"]
    e = RERUN_BYTES[dtype]
    one = tokens * vocab * e
    loss = one if _reduction(params) == "none" else e
    return {
        "forward": 2 * one + loss,
        "backward": 2 * one + loss + one,
        "full": 2 * one + 2 * loss + one,
    }[mode]


def flops(params, mode) -> int:
    """Per element: forward 3 (difference, absolute value and halving, sum); backward 3 (difference,
    sign, scale)."""
    tokens, vocab = required_input_shapes(KERNEL, params)["input"]
    n = tokens * vocab
    return {"forward": 3 * n, "backward": 3 * n, "full": 6 * n}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
