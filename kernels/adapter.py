"""The rerun adapter contract: what a kernel family's ``kernels/<kernel>/impl.py`` gives the GPU harness.

Every family's ``impl`` module binds ``ADAPTER``, an instance of a subclass of ``Adapter``, which satisfies
``RerunAdapter`` (what the harness sees). ``Adapter`` gives what most families share: no implied
parameters, no deterministic inputs, no GEMMs, and ``build`` dispatching through the family's ``BUILDERS``
table (provider -> builder), refusing an unknown provider. The harness loads an adapter with
``load_adapter``, which names everything it lacks. Importing this module needs no torch.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
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
    """A kernel family's rerun adapter (``kernels/<kernel>/impl.py``'s ``ADAPTER``), as the GPU harness uses it.

    Every member is required; an adapter that lacks one is refused by ``load_adapter``. ``Adapter`` gives
    the defaults most families share.

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
    - ``BACKWARD_CONSUMES_GRAPH``: whether the family's backward passes overwrite what their forward saved
      (Megatron's cross entropy turns its saved softmax into the gradient in place), so that one forward's
      graph takes one backward only. The harness then times each backward repetition on a fresh forward,
      run untimed before it, and the source replica times forward and backward together, as the source's
      script for such a family does.

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

    ``tests/test_rerun_adapters.py`` checks every family against this contract.
    """

    KERNEL: str
    PROVIDERS: tuple[str, ...]
    IMPLIED: Mapping[str, str]
    OUTPUT_NAMES: tuple[str, ...]
    GRAD_INPUTS: tuple[str, ...]
    DETERMINISTIC_INPUTS: tuple[str, ...]
    REFERENCE_DTYPE: torch.dtype
    BACKWARD_CONSUMES_GRAPH: bool

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

# A builder: (adapter, provider, inputs, params) -> the provider's Built pass, as ``build`` returns it.
Builder = Callable[["Adapter", str, Mapping[str, "torch.Tensor"], Mapping[str, object]], Built]


class Adapter:
    """The base of every family's adapter: a subclass sets ``KERNEL``, ``OUTPUT_NAMES``, ``GRAD_INPUTS``,
    ``REFERENCE_DTYPE`` and ``BUILDERS`` and defines ``make_inputs``, ``reference``, ``bytes_moved`` and
    ``flops`` (``RerunAdapter`` says what each means); it overrides a default here only where the family
    differs.

    ``BUILDERS`` maps each provider to its builder, a function called as ``build`` is, with the adapter
    first; ``PROVIDERS`` is its keys, in order, unless the family lists fewer (a builder kept for the CPU
    tests, say).
    """

    IMPLIED: Mapping[str, str] = MappingProxyType({})
    DETERMINISTIC_INPUTS: tuple[str, ...] = ()
    BACKWARD_CONSUMES_GRAPH = False
    BUILDERS: Mapping[str, Builder] = MappingProxyType({})

    @property
    def PROVIDERS(self) -> tuple[str, ...]:  # noqa: N802 - the contract's constant
        return tuple(self.BUILDERS)

    def build(self, provider: str, inputs: Mapping[str, torch.Tensor], params: Mapping[str, object]) -> Built:
        builder = self.BUILDERS.get(provider)
        if builder is None:
            raise Unavailable(f"unknown provider {provider!r} for {self.KERNEL}")
        return builder(self, provider, inputs, params)

    def matmul_shapes(self, params: Mapping[str, object]) -> list[tuple[int, int, int]]:
        """No GEMMs."""
        return []

    def built(self, fn: Callable[[], tuple], leaves: dict[str, torch.Tensor], label: str) -> Built:
        """A ``Built`` pass with this family's ``OUTPUT_NAMES``."""
        return Built(fn, leaves, label, self.OUTPUT_NAMES)


def _parameter_names(fn) -> list[str]:
    return [p.name for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def adapter_problems(adapter: object) -> list[str]:
    """What keeps ``adapter`` from satisfying ``RerunAdapter``: missing members, functions that are not
    callable or take other parameters; empty when it satisfies the contract."""
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
    if isinstance(adapter, Adapter):
        unbuilt = [p for p in adapter.PROVIDERS if p not in adapter.BUILDERS]
        if unbuilt:
            problems.append(f"no builder for {', '.join(unbuilt)}")
    return problems


def load_adapter(kernel: str) -> RerunAdapter:
    """The rerun adapter of ``kernel``, ``kernels.<kernel>.impl.ADAPTER``; AdapterError naming what it lacks if
    it falls short."""
    adapter = getattr(importlib.import_module(f"kernels.{kernel}.impl"), "ADAPTER", None)
    if adapter is None:
        problems = ["missing ADAPTER"]
    elif not isinstance(adapter, Adapter):
        problems = [f"ADAPTER is a {type(adapter).__name__}, not a kernels.adapter.Adapter"]
    else:
        problems = adapter_problems(adapter)
    if not problems and adapter.KERNEL != kernel:
        problems.append(f"KERNEL is {adapter.KERNEL!r}, expected {kernel!r}")
    if problems:
        raise AdapterError(f"kernels.{kernel}.impl does not satisfy kernels.adapter.RerunAdapter: "
                           + "; ".join(problems))
    return cast(RerunAdapter, adapter)
