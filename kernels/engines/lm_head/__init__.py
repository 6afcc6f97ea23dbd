"""Inputs, Liger loaders and the cost model shared by the LM-head loss adapters (preference, KTO, distillation,
GRPO, fused linear JSD).

Every such loss projects hidden states through an LM head (logits = x @ weight.T) and reduces the logits;
the GEMMs dominate the pass, so the cost model counts them and a few FLOPs a logit for the reductions.
"""

from __future__ import annotations

import importlib
import inspect
import math

import torch

from kernels.adapter import Adapter, Unavailable
from kernels.providers import liger_label, version_label
from kernels.spec import DTYPE_BYTES
from kernels.tensors import RERUN_BYTES, per_mode



def _nn_linear_uniform(shape: tuple[int, ...], in_features: int, gen: torch.Generator, device) -> torch.Tensor:
    bound = 1.0 / math.sqrt(in_features)
    u = torch.rand(shape, generator=gen, device=device, dtype=torch.float32)
    return u.mul_(2 * bound).sub_(bound)


def linear_weight(
    out_features: int,
    in_features: int,
    gen: torch.Generator,
    device,
) -> torch.Tensor:
    """A float32 weight drawn like ``torch.nn.Linear``'s default initialization, U(-1/sqrt(in), 1/sqrt(in)),
    the weights the upstream scripts time (they never overwrite them), here from a seeded generator."""
    return _nn_linear_uniform((out_features, in_features), in_features, gen, device)


def linear_bias(out_features: int, in_features: int, gen: torch.Generator, device) -> torch.Tensor:
    """A float32 bias as ``torch.nn.Linear`` initializes it, U(-1/sqrt(in), 1/sqrt(in))."""
    return _nn_linear_uniform((out_features,), in_features, gen, device)


def flag(value) -> bool:
    """A workload's boolean parameter, stored as JSON true/false (or its string)."""
    return value is True or str(value).lower() == "true"


def loss_params(params) -> tuple[float, int]:
    """(beta, ignore_index) of a preference-loss workload."""
    return float(params["beta"]), int(params["ignore_index"])


def liger_chunked_loss(
    module: str,
    name: str,
    takes: tuple[str, ...] = (),
):
    """``name`` from ``liger_kernel.chunked_loss.<module>``; these losses are plain PyTorch (no Triton), so
    they run on any device. Unavailable when liger_kernel cannot be imported, or where this release's class
    takes none of a keyword argument in ``takes`` (the workload names a setting the release predates)."""
    try:
        cls = getattr(importlib.import_module(f"liger_kernel.chunked_loss.{module}"), name)
    except Exception as exc:  # noqa: BLE001 - any import-time failure makes the provider unavailable
        raise Unavailable(f"liger_kernel not importable: {exc}") from exc
    accepted = inspect.signature(cls.__init__).parameters
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    missing = [] if open_ended else [arg for arg in takes if arg not in accepted]
    if missing:
        raise Unavailable(f"Liger-Kernel {version_label('liger-kernel')} {name} takes no {', '.join(missing)}: "
                          "the release predates the workload's setting")
    return cls


def compiled_on(device_tensor: torch.Tensor) -> bool:
    """Liger's chunked losses run ``torch.compile``d by default, as the upstream scripts time them; on CUDA the
    adapters keep that. Off CUDA (the CPU tests) they run eager: Inductor's CPU build of every chunk shape
    takes tens of seconds and computes the same loss."""
    return device_tensor.is_cuda


def chunked_label(
    cls_name: str,
    device_tensor: torch.Tensor,
) -> str:
    """The label of one of Liger's chunked losses, saying whether it runs compiled."""
    how = "torch.compile" if compiled_on(device_tensor) else "eager, no torch.compile off CUDA"
    return liger_label(cls_name, f"chunked PyTorch, {how}")


def lm_head_bytes(
    heads: list[tuple[int, int, int, bool]],
    dtype: str,
    mode: str,
    index_reads: int,
) -> int:
    """Fewest bytes without materialized logits. ``heads``: (rows, hidden, vocab, trained) per LM head.
    Forward reads every x and weight and ``index_reads`` int64 targets and writes the loss; backward reads
    them again and writes dx and dweight of the trained heads; full reads once and writes both."""
    e = RERUN_BYTES[dtype]
    reads = sum((rows * hidden + vocab * hidden) * e for rows, hidden, vocab, _ in heads) + index_reads * DTYPE_BYTES["int64"]
    grads = sum((rows * hidden + vocab * hidden) * e for rows, hidden, vocab, trained in heads if trained)
    loss = DTYPE_BYTES["fp32"]
    return {"forward": reads + loss, "backward": reads + grads, "full": reads + loss + grads}[mode]


def lm_head_flops(
    heads: list[tuple[int, int, int, bool]],
    mode: str,
    fwd_per_logit: int,
    bwd_per_logit: int,
) -> int:
    """GEMMs at 2 FLOPs a multiply-add (forward: each head's logits; backward: dx and dweight of the trained
    heads) plus the reductions' FLOPs a logit (log-softmax, gathers, divergences)."""
    fwd = sum(2 * r * h * v + fwd_per_logit * r * v for r, h, v, _ in heads)
    bwd = sum(4 * r * h * v + bwd_per_logit * r * v for r, h, v, trained in heads if trained)
    return per_mode(fwd, bwd, mode)


def lm_head_matmuls(heads: list[tuple[int, int, int, bool]]) -> list[tuple[int, int, int]]:
    """(m, n, k): each head's logits x @ weight.T; for trained heads also dlogits @ weight and dlogits.T @ x."""
    shapes = []
    for rows, hidden, vocab, trained in heads:
        shapes.append((rows, vocab, hidden))
        if trained:
            shapes += [(rows, hidden, vocab), (vocab, hidden, rows)]
    return shapes


class LMHeadAdapter(Adapter):
    """The adapter of a loss over LM heads: a subclass gives ``heads(params)``, (rows, hidden, vocab, trained)
    per head, the int64 ``index_reads(params)`` and the reductions' FLOPs a logit (``FLOPS_PER_LOGIT``,
    forward and backward); the cost model and the GEMM shapes follow from them."""

    OUTPUT_NAMES = ("loss",)
    # Float64 logits at the rerun sizes (vocab 128256, up to 131072 rows) would not fit beside their
    # softmax intermediates; float32 (TF32 off) is far more precise than the bfloat16 passes it checks.
    REFERENCE_DTYPE = torch.float32
    FLOPS_PER_LOGIT: tuple[int, int]

    def heads(self, params) -> list[tuple[int, int, int, bool]]:
        raise NotImplementedError

    def index_reads(self, params) -> int:
        raise NotImplementedError

    def bytes_moved(self, params, dtype, mode) -> int:
        """``lm_head_bytes`` of the heads, with ``index_reads`` int64 values read."""
        return lm_head_bytes(self.heads(params), dtype, mode, self.index_reads(params))

    def flops(self, params, mode) -> int:
        return lm_head_flops(self.heads(params), mode, *self.FLOPS_PER_LOGIT)

    def matmul_shapes(self, params) -> list[tuple[int, int, int]]:
        return lm_head_matmuls(self.heads(params))
