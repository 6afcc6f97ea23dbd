"""The rerun adapter contract: what a covered kernel's ``kernels/<kernel>/impl.py`` gives the GPU harness.

A kernel family is *covered* (re-measured on a GPU by ``kernelindex_pipeline.gpu``) when its package has
an ``impl`` module that satisfies ``RerunAdapter``, or whose ``ADAPTER`` object does (kernels that share
one family's arithmetic, such as the preference losses, each bind a configured instance of the family's
class). The harness loads it with ``load_adapter``, which names everything the module lacks; nothing in
the harness falls back to a default. Importing this module needs no torch.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

if TYPE_CHECKING:
    import torch


@dataclass
class Built:
    """One provider's pass over one workload's inputs.

    ``fn()`` runs the forward pass and returns a tuple of output tensors, in ``output_names`` order;
    ``leaves`` are the tensors gradients are taken for, keyed by input name (the inputs themselves, or a
    module's parameters standing for them); ``label`` names the implementation in the evidence record.
    """

    fn: Callable[[], tuple]
    leaves: dict[str, torch.Tensor]
    label: str
    output_names: tuple[str, ...]


class Unavailable(RuntimeError):
    """A provider cannot run here (package missing, no CUDA for a GPU-only library, unknown provider).

    ``build`` raises it; the harness records the provider as ``unavailable`` with the message as the
    reason, measures the others, and writes no timing records for it.
    """


class AdapterError(TypeError):
    """A kernel's ``impl`` module does not satisfy ``RerunAdapter``; the message names what is wrong."""


@runtime_checkable
class RerunAdapter(Protocol):
    """The module ``kernels/<kernel>/impl.py`` of a covered kernel, as the GPU harness uses it.

    Every member is required; a module that lacks one is refused by ``load_adapter``.

    Constants:

    - ``KERNEL``: the kernel's name, as in ``kernels.REGISTRY`` (and the package's name).
    - ``PROVIDERS``: the providers ``build`` knows; KernelIndex's own kernels, where there are any, as
      ``"kernelindex"``.
    - ``IMPLIED``: workload parameters the kernel itself fixes (GeGLU's activation, say), recorded with
      every record so that the workload pairs with upstream runs; ``{}`` when none.
    - ``OUTPUT_NAMES``: the names of the forward pass's outputs, in order.
    - ``GRAD_INPUTS``: the inputs gradients are checked for (weights included), in order.
    - ``DETERMINISTIC_INPUTS``: inputs computed from the parameters rather than drawn (position
      tables, say), so the same for every seed; ``()`` when none.
    - ``REFERENCE_DTYPE``: the precision ``reference`` runs in (``torch.float64``, or ``torch.float32``
      where float64 GEMMs at the rerun sizes would take too long; the harness turns TF32 off).

    Functions (``params``: the workload's canonical parameters; ``dtype``: ``"bf16"``, ``"fp16"`` or
    ``"fp32"``; ``mode``: ``"forward"``, ``"backward"`` or ``"full"``):

    - ``make_inputs(params, dtype, seed, device)``: the workload's input tensors by name, with the shapes
      ``kernels.lookup(KERNEL).input_tensors`` gives, drawn from a generator seeded with ``seed``
      (never all zeros; the same seed gives the same tensors).
    - ``reference(inputs, params)``: the outputs, as a tuple in ``OUTPUT_NAMES`` order, computed by plain
      PyTorch from ``inputs`` already upcast to ``REFERENCE_DTYPE``; differentiable, so that the harness
      takes the reference gradients from it.
    - ``build(provider, inputs, params)``: a ``Built`` pass of ``provider`` over ``inputs``; raises
      ``Unavailable`` with the reason when the provider cannot run here.
    - ``bytes_moved(params, dtype, mode)``: the fewest bytes the pass must move through device memory
      (each input read once, each output written once), for the achieved-bandwidth figures.
    - ``flops(params, mode)``: the floating-point operations of the pass.
    - ``matmul_shapes(params)``: the (m, n, k) GEMM problems of a GEMM-bound pass, whose bf16 rate the
      session measures as the matmul ceiling; ``[]`` for kernels without GEMMs.

    A new kernel family (cross entropy, softmax, KL divergence, ...) is covered by adding its
    ``impl.py`` with these members; ``tests/test_rerun_adapters.py`` checks every ``impl.py``.
    """

    KERNEL: str
    PROVIDERS: tuple[str, ...]
    IMPLIED: Mapping[str, str]
    OUTPUT_NAMES: tuple[str, ...]
    GRAD_INPUTS: tuple[str, ...]
    DETERMINISTIC_INPUTS: tuple[str, ...]
    REFERENCE_DTYPE: torch.dtype

    def make_inputs(self, params: Mapping[str, object], dtype: str, seed: int, device) -> dict[str, torch.Tensor]:
        ...

    def reference(self, inputs: Mapping[str, torch.Tensor], params: Mapping[str, object]) -> tuple[torch.Tensor, ...]:
        ...

    def build(self, provider: str, inputs: Mapping[str, torch.Tensor], params: Mapping[str, object]) -> Built:
        ...

    def bytes_moved(self, params: Mapping[str, object], dtype: str, mode: str) -> int:
        ...

    def flops(self, params: Mapping[str, object], mode: str) -> int:
        ...

    def matmul_shapes(self, params: Mapping[str, object]) -> list[tuple[int, int, int]]:
        ...


ADAPTER_CONSTANTS: tuple[str, ...] = tuple(RerunAdapter.__annotations__)
ADAPTER_FUNCTIONS: tuple[str, ...] = tuple(
    name for name, value in vars(RerunAdapter).items() if inspect.isfunction(value) and not name.startswith("_"))


def _parameter_names(fn) -> list[str]:
    return [p.name for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def adapter_problems(adapter: object) -> list[str]:
    """What keeps ``adapter`` (an ``impl`` module or its ``ADAPTER``) from satisfying ``RerunAdapter``: missing
    members, functions that are not callable or take other parameters; empty when it satisfies the contract."""
    problems = [f"missing {name}" for name in ADAPTER_CONSTANTS + ADAPTER_FUNCTIONS if not hasattr(adapter, name)]
    for name in ADAPTER_FUNCTIONS:
        fn = getattr(adapter, name, None)
        if fn is None:
            continue
        if not callable(fn):
            problems.append(f"{name} is not callable")
            continue
        want, got = _parameter_names(getattr(RerunAdapter, name)), _parameter_names(fn)
        if got != want:
            problems.append(f"{name} takes ({', '.join(got)}), expected ({', '.join(want)})")
    return problems


def load_adapter(kernel: str) -> RerunAdapter:
    """The rerun adapter ``kernels.<kernel>.impl`` (or its ``ADAPTER``); AdapterError naming what it lacks if
    it falls short."""
    module = importlib.import_module(f"kernels.{kernel}.impl")
    adapter = getattr(module, "ADAPTER", module)
    problems = adapter_problems(adapter)
    if not problems and adapter.KERNEL != kernel:
        problems.append(f"KERNEL is {adapter.KERNEL!r}, expected {kernel!r}")
    if problems:
        raise AdapterError(f"kernels.{kernel}.impl does not satisfy kernels._adapter.RerunAdapter: "
                           + "; ".join(problems))
    return cast(RerunAdapter, adapter)
