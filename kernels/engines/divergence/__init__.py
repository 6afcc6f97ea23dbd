"""What the divergence adapters (``kl_div``, ``tvd``, ``jsd``) share: the ``reduction`` parameter, inputs drawn
as (log-)softmaxes of standard-normal draws, the Liger-against-PyTorch ``build``, and the element-wise
bytes and FLOPs models over [tokens, vocab]."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version

import torch

from kernels._adapter import Built, Unavailable
from kernels._providers import liger_triton_attr
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, required_input_shapes

OUTPUT_NAMES = ("loss",)
DEFAULT_REDUCTION = "batchmean"
REDUCTIONS = ("batchmean", "sum", "mean", "none")

SOFTMAX = "softmax"
LOG_SOFTMAX = "log_softmax"


def reduction(kernel: str, params) -> str:
    """The workload's ``reduction`` (``batchmean``, upstream's only choice, when it leaves it out)."""
    chosen = str(params.get("reduction", DEFAULT_REDUCTION))
    if chosen not in REDUCTIONS:
        raise ValueError(f"{kernel}: unknown reduction {chosen!r}; expected one of {REDUCTIONS}")
    return chosen


def reduce(pointwise: torch.Tensor, how: str) -> torch.Tensor:
    """``pointwise`` reduced as ``how`` says; ``mean`` is the sum over the element count."""
    if how == "none":
        return pointwise
    if how == "sum":
        return pointwise.sum()
    if how == "mean":
        return pointwise.sum() / pointwise.numel()
    return pointwise.sum() / pointwise.shape[0]


def draw_distributions(kernel: str, params, dtype, seed, device, *, input_as: str, target_as: str) -> dict[str, torch.Tensor]:
    """``input`` then ``target``, each the ``softmax`` or ``log_softmax`` (``input_as``, ``target_as``) over the
    last dimension of a float32 standard-normal draw, cast to the run's dtype."""
    s = required_input_shapes(kernel, params)
    gen = generator(seed, device)
    td = RERUN_DTYPES[dtype]
    out = {}
    for name, transform in (("input", input_as), ("target", target_as)):
        draw = torch.randn(tuple(s[name]), generator=gen, device=device, dtype=torch.float32)
        out[name] = getattr(draw, transform)(dim=-1).to(td)
    return out


def build_divergence(
    kernel: str,
    provider: str,
    inputs,
    *,
    liger_module: str,
    liger_class: str,
    liger_kwargs: dict,
    torch_loss: Callable[[], torch.nn.Module],
    torch_label: str,
) -> Built:
    """A divergence adapter's ``build``: ``liger`` is ``liger_class(**liger_kwargs)`` from Liger's
    ``liger_module``, ``torch`` is ``torch_loss()`` labelled ``PyTorch <version> <torch_label>``; both take
    (``input``, ``target``) with ``input`` the leaf gradients flow to."""
    leaf = inputs["input"].detach().clone().requires_grad_(True)
    target = inputs["target"]
    if provider == "liger":
        loss_fn = liger_triton_attr(leaf, liger_module, liger_class)(**liger_kwargs)
        label = f"Liger-Kernel {version('liger-kernel')} {liger_class}"
    elif provider == "torch":
        loss_fn = torch_loss()
        label = f"PyTorch {torch.__version__} {torch_label}"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {kernel}")
    return Built(lambda: (loss_fn(leaf, target),), {"input": leaf}, label, OUTPUT_NAMES)


def bytes_moved(kernel: str, params, dtype, mode, *, backward_reads: int, loss_per_element: bool) -> int:
    """Forward: read input and target, write the loss. Backward: read ``backward_reads`` [tokens, vocab]
    tensors and the loss's gradient, write the input's gradient. Full: the inputs once, the loss and the
    gradient once. With ``loss_per_element`` the loss and its gradient are full [tokens, vocab] tensors."""
    tokens, vocab = required_input_shapes(kernel, params)["input"]
    e = RERUN_BYTES[dtype]
    one = tokens * vocab * e
    loss = one if loss_per_element else e
    return {
        "forward": 2 * one + loss,
        "backward": backward_reads * one + loss + one,
        "full": 2 * one + 2 * loss + one,
    }[mode]


def flops(kernel: str, params, mode, *, forward: int, backward: int) -> int:
    """``forward`` and ``backward`` FLOPs per [tokens, vocab] element; full is both."""
    tokens, vocab = required_input_shapes(kernel, params)["input"]
    n = tokens * vocab
    return {"forward": forward * n, "backward": backward * n, "full": (forward + backward) * n}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    """No GEMMs."""
    return []
