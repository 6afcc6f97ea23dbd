"""The adapter of a divergence between two distributions over the vocabulary (``kl_div``, ``tvd``, ``jsd``):
``input`` (the one gradients flow to) and ``target``, both [tokens, vocab], drawn as (log-)softmaxes of
standard-normal draws; Liger's loss module against a PyTorch one; element-wise bytes and FLOPs models.
Upstream's graphs also hold the (log-)softmax that made ``input``; here ``input`` is the leaf, so only the
divergence is measured."""

from __future__ import annotations

import torch

from kernels.adapter import Adapter, Built
from kernels.providers import liger_attr, liger_label
from kernels.tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, leaf, per_mode

DEFAULT_REDUCTION = "batchmean"
REDUCTIONS = ("batchmean", "sum", "mean", "none")

SOFTMAX = "softmax"
LOG_SOFTMAX = "log_softmax"


def reduce(pointwise: torch.Tensor, how: str) -> torch.Tensor:
    """``pointwise`` reduced as ``how`` says; ``mean`` is the sum over the element count."""
    if how == "none":
        return pointwise
    if how == "sum":
        return pointwise.sum()
    if how == "mean":
        return pointwise.sum() / pointwise.numel()
    return pointwise.sum() / pointwise.shape[0]


class DivergenceAdapter(Adapter):
    """A divergence's adapter. A subclass sets ``KERNEL``, how ``input`` and ``target`` are drawn
    (``INPUT_AS``, ``TARGET_AS``: ``SOFTMAX`` or ``LOG_SOFTMAX``), Liger's loss ``LIGER`` (module, class), the
    ``[tokens, vocab]`` tensors its backward reads (``BACKWARD_READS``) and ``FLOPS_PER_ELEMENT`` (forward,
    backward), and defines ``liger_kwargs`` and ``torch_loss`` (with its label)."""

    OUTPUT_NAMES = ("loss",)
    GRAD_INPUTS = ("input",)
    REFERENCE_DTYPE = torch.float64
    INPUT_AS: str
    TARGET_AS: str
    LIGER: tuple[str, str]
    BACKWARD_READS: int
    FLOPS_PER_ELEMENT: tuple[int, int]

    def reduction(self, params) -> str:
        """The workload's ``reduction`` (``batchmean``, upstream's only choice, when it leaves it out)."""
        chosen = str(params.get("reduction", DEFAULT_REDUCTION))
        if chosen not in REDUCTIONS:
            raise ValueError(f"{self.KERNEL}: unknown reduction {chosen!r}; expected one of {REDUCTIONS}")
        return chosen

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        """``input`` then ``target``, each the ``softmax`` or ``log_softmax`` over the last dimension of a
        float32 standard-normal draw, cast to the run's dtype."""
        s = input_shapes(self.KERNEL, params)
        gen = generator(seed, device)
        td = RERUN_DTYPES[dtype]
        out = {}
        for name, transform in (("input", self.INPUT_AS), ("target", self.TARGET_AS)):
            draw = torch.randn(tuple(s[name]), generator=gen, device=device, dtype=torch.float32)
            out[name] = getattr(draw, transform)(dim=-1).to(td)
        return out

    def per_element_loss(self, params) -> bool:
        """Whether the loss is a full [tokens, vocab] tensor (``reduction="none"``) rather than one value."""
        return self.reduction(params) == "none"

    def liger_kwargs(self, params) -> dict:
        raise NotImplementedError

    def torch_loss(self, params) -> tuple[torch.nn.Module, str]:
        """The PyTorch loss module and its label (after ``PyTorch <version> ``)."""
        raise NotImplementedError

    def _loss_pass(self, loss_fn, inputs, label: str) -> Built:
        """A pass of ``loss_fn(input, target)`` over a fresh leaf copy of ``input``."""
        x, target = leaf(inputs["input"]), inputs["target"]
        return self.built(lambda: (loss_fn(x, target),), {"input": x}, label)

    def _liger(self, provider, inputs, params) -> Built:
        module, name = self.LIGER
        loss_fn = liger_attr(inputs["input"], module, name)(**self.liger_kwargs(params))
        return self._loss_pass(loss_fn, inputs, liger_label(name))

    def _torch(self, provider, inputs, params) -> Built:
        loss_fn, label = self.torch_loss(params)
        return self._loss_pass(loss_fn, inputs, f"PyTorch {torch.__version__} {label}")

    BUILDERS = {"liger": _liger, "torch": _torch}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward: read input and target, write the loss. Backward: read ``BACKWARD_READS`` [tokens, vocab]
        tensors and the loss's gradient, write the input's gradient. Full: the inputs once, the loss and the
        gradient once. With ``per_element_loss`` the loss and its gradient are full [tokens, vocab] tensors."""
        tokens, vocab = input_shapes(self.KERNEL, params)["input"]
        e = RERUN_BYTES[dtype]
        one = tokens * vocab * e
        loss = one if self.per_element_loss(params) else e
        return {
            "forward": 2 * one + loss,
            "backward": self.BACKWARD_READS * one + loss + one,
            "full": 2 * one + 2 * loss + one,
        }[mode]

    def flops(self, params, mode) -> int:
        tokens, vocab = input_shapes(self.KERNEL, params)["input"]
        forward, backward = self.FLOPS_PER_ELEMENT
        return per_mode(forward * tokens * vocab, backward * tokens * vocab, mode)
