"""The adapter of a tiled gated MLP (tiled SwiGLU and tiled GeGLU): down(act(gate(x)) * up(x)) computed over
``num_shards`` sequence shards, the forward recomputed shard by shard in the backward to save memory.

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_tiled_mlp.py``: x [batch, seq, hidden]
drawn from a normal distribution, the three projections of a Llama MLP (``nn.Linear`` initialised upstream,
drawn here at the same 1/sqrt(fan_in) scale), ``num_shards`` from the workload (``None``, Liger's
ceil(seq / hidden), when a workload leaves it out). Upstream compares:

- ``liger_tiled``: Liger's tiled MLP (``LigerTiledSwiGLUMLP``, ``LigerTiledGEGLUMLP``) around its Triton
  gated-multiply kernel;
- ``liger``: Liger's untiled MLP; ``liger_triton`` is the same module under the name the cuTile comparison
  gives Liger's Triton kernels (its ``liger_cutile`` is not rebuilt here);
- ``deepspeed_tiled``: DeepSpeed's ``TiledMLP`` around a Llama MLP (upstream runs its own copy of DeepSpeed
  v0.18.2's algorithm); the real ``deepspeed`` package when it imports, else an equivalent written here;
- ``huggingface``: Transformers' ``LlamaMLP``, else a labelled PyTorch equivalent.

A tiled MLP's backward accumulates the weights' gradients into their ``.grad`` from inside its own
backward, so they never reach autograd's graph; ``SurfacedWeightGrads`` carries them back into it, so that
``torch.autograd.grad`` (the harness's correctness check) sees them as ``.backward()`` does.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from kernels.adapter import Built
from kernels.providers import liger_attr, liger_label, version_label
from kernels.tensors import leaf
from kernels.engines.gated_mlp.rerun import GatedMLPAdapter, loaded, module_leaves, projections, torch_activation


def num_shards(params) -> int | None:
    """The workload's shard count; None leaves it to the module (Liger's and DeepSpeed's ceil(seq / hidden))."""
    shards = params.get("num_shards")
    return None if shards is None else int(shards)


class SurfacedWeightGrads(torch.autograd.Function):
    """``module(x)`` with the module's weights as explicit inputs, so that the weight gradients a tiled MLP
    accumulates into ``.grad`` inside its own backward come back to autograd as this function's input
    gradients. Whatever ``.grad`` held before is restored first, so ``.backward()`` still accumulates once."""

    @staticmethod
    def forward(ctx, module, x, *weights):
        x_inner = x.detach().requires_grad_(x.requires_grad)
        with torch.enable_grad():
            out = module(x_inner)
        ctx.inner = (x_inner, out, weights)
        return out.detach()

    @staticmethod
    def backward(ctx, dy):
        x_inner, out, weights = ctx.inner
        held = [w.grad for w in weights]
        for w in weights:
            w.grad = None
        x_inner.grad = None
        # The harness repeats the backward over one forward (upstream's retain_graph=True), so keep the graph.
        torch.autograd.backward(out, dy, retain_graph=True)
        grads = [w.grad for w in weights]
        for w, g in zip(weights, held):
            w.grad = g
        return (None, x_inner.grad, *grads)


class GatedMLP(torch.nn.Module):
    """Transformers' ``LlamaMLP`` in plain PyTorch (gate, up and down projections without bias), for the
    DeepSpeed provider where Transformers is not importable."""

    def __init__(self, hidden: int, intermediate: int, act: int):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = torch.nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = torch.nn.Linear(intermediate, hidden, bias=False)
        self.act_fn = torch_activation(act)

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class TiledMLPEquivalent(torch.autograd.Function):
    """DeepSpeed's ``TiledMLP`` algorithm (``deepspeed.runtime.sequence_parallel.ulysses_sp``, v0.18.2, as
    upstream's benchmark runs it): the forward over sequence shards without a graph; the backward recomputes
    each shard's forward and back-propagates it, writing the shard's input gradient into its slice of one
    buffer and accumulating the weights' gradients into their ``.grad``."""

    @staticmethod
    def forward(ctx, fn, module, x, shards, compute_params):
        ctx.fn, ctx.module, ctx.shards = fn, module, shards
        ctx.save_for_backward(x)
        with torch.no_grad():
            return torch.cat([fn(module, part) for part in torch.chunk(x, chunks=shards, dim=-2)], dim=-2)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        wants_grad = x.requires_grad
        hidden = x.shape[-1]
        flat = x.detach().view(-1, hidden)
        dy_flat = dy.reshape(-1, hidden)
        dx = torch.zeros_like(flat)
        offset = 0
        for part in torch.chunk(flat, chunks=ctx.shards, dim=0):
            rows = part.shape[0]
            part.requires_grad_(wants_grad)
            part.grad = dx.narrow(0, offset, rows)
            with torch.enable_grad():
                out = ctx.fn(ctx.module, part)
            torch.autograd.backward(out, dy_flat.narrow(0, offset, rows))
            offset += rows
        return None, None, dx.view(x.shape), None, None


def _mlp_forward(module, x):
    return module.down_proj(module.act_fn(module.gate_proj(x)) * module.up_proj(x))


def deepspeed_tiled_mlp():
    """DeepSpeed's ``TiledMLP`` and its label; the equivalent here, labelled with why, when it does not import."""
    try:
        tiled = importlib.import_module("deepspeed.runtime.sequence_parallel.ulysses_sp").TiledMLP
    except Exception as exc:  # noqa: BLE001 - any import-time failure means the package cannot be used here
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
        return TiledMLPEquivalent, (f"PyTorch equivalent of DeepSpeed v0.18.2 TiledMLP "
                                    f"(deepspeed not importable: {reason})")
    return tiled, f"DeepSpeed {version_label('deepspeed')} TiledMLP"


class DeepSpeedTiled(torch.nn.Module):
    """A Llama MLP run through a DeepSpeed-style ``TiledMLP`` with ``shards`` shards (None: ceil(seq / hidden)),
    as upstream's ``DeepSpeedTiledMLPWrapper`` runs it."""

    def __init__(self, inner, tiled, shards: int | None):
        super().__init__()
        self.mlp, self.tiled, self.shards = inner, tiled, shards

    def forward(self, x):
        shards = self.shards if self.shards is not None else math.ceil(x.shape[-2] / x.shape[-1])
        return self.tiled.apply(_mlp_forward, self.mlp, x, max(1, shards), list(projections(self.mlp)))


def llama_mlp(hidden: int, intermediate: int, act: int, hidden_act: str):
    """Transformers' ``LlamaMLP`` and its label, or ``GatedMLP`` labelled as its equivalent."""
    try:
        from transformers.models.llama.configuration_llama import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaMLP
    except Exception:  # noqa: BLE001 - without Transformers the PyTorch equivalent stands in
        return GatedMLP(hidden, intermediate, act), "PyTorch equivalent of Transformers LlamaMLP"
    config = LlamaConfig(hidden_size=hidden, intermediate_size=intermediate, hidden_act=hidden_act)
    return LlamaMLP(config), f"Transformers {version_label('transformers')} LlamaMLP"


@dataclass(frozen=True, eq=False)
class TiledMLPAdapter(GatedMLPAdapter):
    """A tiled gated MLP's adapter: ``GatedMLPAdapter``'s inputs, reference, Transformers baseline and cost
    model (the MLP's GEMM FLOPs, the same for every provider: the tiled providers' recomputed forward is their
    cost, not the workload's), with the tiled providers; ``LIGER_TILED`` is Liger's tiled class in
    ``liger_kernel.transformers.tiled_mlp``."""

    LIGER_TILED: str

    def _config(self, inputs) -> SimpleNamespace:
        """The fields of the Transformers config upstream hands Liger's MLPs that they read."""
        return SimpleNamespace(hidden_size=inputs["w_up"].shape[1], intermediate_size=inputs["w_up"].shape[0],
                               hidden_act=self.hidden_act)

    def _surfaced(self, module, inner, inputs, label: str) -> Built:
        """A pass of ``module`` whose MLP ``inner`` holds the weights, its weight gradients surfaced."""
        x = leaf(inputs["x"])
        weights = projections(inner)
        return self.built(lambda: (SurfacedWeightGrads.apply(module, x, *weights),), module_leaves(inner, x), label)

    def _liger_untiled(self, provider, inputs, params) -> Built:
        module_name, name = self.LIGER
        module = loaded(liger_attr(inputs["x"], module_name, name)(self._config(inputs)), inputs)
        x = leaf(inputs["x"])
        return self.built(lambda: (module(x),), module_leaves(module, x), liger_label(name, "untiled, Triton"))

    def _liger_tiled(self, provider, inputs, params) -> Built:
        shards = num_shards(params)
        cls = liger_attr(inputs["x"], "tiled_mlp", self.LIGER_TILED)
        module = loaded(cls(self._config(inputs), num_shards=shards), inputs)
        return self._surfaced(module, module, inputs, liger_label(self.LIGER_TILED, f"num_shards={shards}"))

    def _deepspeed_tiled(self, provider, inputs, params) -> Built:
        shards = num_shards(params)
        hidden, intermediate = inputs["w_up"].shape[1], inputs["w_up"].shape[0]
        tiled, tiled_label = deepspeed_tiled_mlp()
        inner, inner_label = llama_mlp(hidden, intermediate, self.ACTIVATION, self.hidden_act)
        inner = loaded(inner, inputs)
        label = f"{tiled_label} around {inner_label} (hidden_act={self.hidden_act}, num_shards={shards})"
        return self._surfaced(DeepSpeedTiled(inner, tiled, shards), inner, inputs, label)

    BUILDERS = {"liger_tiled": _liger_tiled, "liger": _liger_untiled, "liger_triton": _liger_untiled,
                "deepspeed_tiled": _deepspeed_tiled, "huggingface": GatedMLPAdapter._huggingface}
