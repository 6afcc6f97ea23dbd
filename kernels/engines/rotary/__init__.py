"""What the rotary-embedding adapters share (RoPE, Llama 4 RoPE, Qwen2-VL M-RoPE): q and k rotated by position
tables (the ``DETERMINISTIC_INPUTS``, the same for every seed), passes over leaf copies of q and k, and the
cost model (``RotaryAdapter``)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from kernels.adapter import Adapter, Built
from kernels.providers import liger_attr, liger_label, transformers_or
from kernels.tensors import RERUN_BYTES, input_shapes, leaf_copies, numel, per_mode


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(-x2, x1) of x's two halves along the last dimension, as Transformers' ``rotate_half``."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryAdapter(Adapter):
    """A rotary embedding's adapter, each provider a ``rotation`` of q and k by the tables
    (``DETERMINISTIC_INPUTS``). A subclass sets ``KERNEL`` and its tables, and either its own builders or the
    functions the ones here take: ``KERNELINDEX`` (KernelIndex's op and its label), ``LIGER`` (module and
    function under ``liger_kernel.transformers``), ``TRANSFORMERS`` (module and function, and what to call
    it) and ``EQUIVALENT`` (Transformers' arithmetic in PyTorch, where Transformers is not importable)."""

    OUTPUT_NAMES = ("q", "k")
    GRAD_INPUTS = ("q", "k")
    REFERENCE_DTYPE = torch.float64
    KERNELINDEX: tuple[Callable, str]
    LIGER: tuple[str, str]
    TRANSFORMERS: tuple[str, str, str]
    EQUIVALENT: Callable

    def rotation(self, rotate, inputs, label: str, *extra) -> Built:
        """A pass of ``rotate(q, k, *tables, *extra)`` over fresh leaf copies of q and k."""
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        tables = [inputs[name] for name in self.DETERMINISTIC_INPUTS]
        return self.built(lambda: rotate(leaves["q"], leaves["k"], *tables, *extra), leaves, label)

    def _kernelindex(self, provider, inputs, params) -> Built:
        op, label = self.KERNELINDEX
        return self.rotation(op, inputs, label)

    def _liger(self, provider, inputs, params) -> Built:
        module, name = self.LIGER
        return self.rotation(liger_attr(inputs["q"], module, name), inputs, liger_label(name))

    def _huggingface(self, provider, inputs, params) -> Built:
        module, name, what = self.TRANSFORMERS
        rotate, label = transformers_or(module, name, self.EQUIVALENT, what)
        return self.rotation(rotate, inputs, label)

    BUILDERS = {"kernelindex": _kernelindex, "liger": _liger, "huggingface": _huggingface}

    def table_bytes(self, params, dtype) -> int:
        """Bytes of the tables, as the spec lists them in the run's dtype."""
        s = input_shapes(self.KERNEL, params)
        return sum(numel(s[name]) for name in self.DETERMINISTIC_INPUTS) * RERUN_BYTES[dtype]

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward: read q, k and the tables; write q', k'. Backward: read dq', dk' and the tables; write dq,
        dk. Full: every distinct input once (q, k, the tables, dq', dk'), every output once (q', k', dq, dk)."""
        s = input_shapes(self.KERNEL, params)
        qk = (numel(s["q"]) + numel(s["k"])) * RERUN_BYTES[dtype]
        tables = self.table_bytes(params, dtype)
        one = 2 * qk + tables
        return {"forward": one, "backward": one, "full": 2 * one - tables}[mode]

    def flops(self, params, mode) -> int:
        """Two multiplies and one add per element of q and k, each way (a complex multiply's 6 real operations
        a pair of elements alike)."""
        s = input_shapes(self.KERNEL, params)
        one = 3 * (numel(s["q"]) + numel(s["k"]))
        return per_mode(one, one, mode)
