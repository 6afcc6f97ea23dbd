"""Tiled SwiGLU's rerun adapter (``kernels._adapter.RerunAdapter``): down(silu(gate(x)) * up(x)) computed over
``num_shards`` sequence shards, the forward recomputed shard by shard in the backward to save memory.

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_tiled_mlp.py``: x [batch, seq, hidden]
drawn from a normal distribution, the three projections of a Llama MLP (``nn.Linear`` initialised upstream,
drawn here at the same 1/sqrt(fan_in) scale), ``num_shards`` from the workload (``None``, Liger's
ceil(seq / hidden), when a workload leaves it out). Upstream compares:

- ``liger_tiled``: ``LigerTiledSwiGLUMLP`` (Liger's tiled MLP around its Triton SiLU-mul kernel);
- ``liger``: the untiled ``LigerSwiGLUMLP``; ``liger_triton`` is the same module under the name the
  cuTile comparison gives Liger's Triton kernels (its ``liger_cutile`` is not rebuilt here);
- ``deepspeed_tiled``: DeepSpeed's ``TiledMLP`` around a Llama MLP (upstream runs its own copy of DeepSpeed
  v0.18.2's algorithm); the real ``deepspeed`` package when it imports, else an equivalent written here;
- ``huggingface``: Transformers' ``LlamaMLP``, else a labelled PyTorch equivalent.

A tiled MLP's backward accumulates the weights' gradients into their ``.grad`` from inside its own
backward, so they never reach autograd's graph; ``SurfacedWeightGrads`` carries them back into it, so that
``torch.autograd.grad`` (the harness's correctness check) sees them as ``.backward()`` does.

This module also holds what tiled GeGLU's adapter shares with it (``build_tiled``).
"""

from __future__ import annotations

import importlib
import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from kernels._adapter import Built, Unavailable
from kernels._providers import LIGER_TRITON_NEEDS_ON_CPU, liger_triton_attr, version_label
from kernels.engines.gated_mlp import ACT_GELU_TANH, ACT_SILU
from kernels.engines.gated_mlp import rerun as mlp
from kernels.tiled_mlp import workload_functions

KERNEL = "tiled_swiglu"
PROVIDERS = ("liger_tiled", "liger", "liger_triton", "deepspeed_tiled", "huggingface")
IMPLIED = {"hidden_act": "silu", "activation_type": "swiglu"}
OUTPUT_NAMES = mlp.OUTPUT_NAMES
GRAD_INPUTS = mlp.GRAD_INPUTS
DETERMINISTIC_INPUTS = ()
# GEMMs at the rerun sizes (up to 32k tokens x 4096 x 14336) in float64 take too long; the harness turns
# TF32 off for the reference.
REFERENCE_DTYPE = torch.float32


def reference(inputs, params) -> tuple[torch.Tensor]:
    x, wg, wu, wd = inputs["x"], inputs["w_gate"], inputs["w_up"], inputs["w_down"]
    g = F.linear(x, wg)
    return (F.linear(g * torch.sigmoid(g) * F.linear(x, wu), wd),)


def build(provider, inputs, params) -> Built:
    return build_tiled(
        KERNEL,
        provider,
        inputs,
        params,
        act=ACT_SILU,
        liger_module="swiglu",
        liger_class="LigerSwiGLUMLP",
        liger_tiled_class="LigerTiledSwiGLUMLP",
    )


make_inputs, bytes_moved, flops, matmul_shapes = workload_functions(KERNEL)


# What tiled SwiGLU and tiled GeGLU share.


def num_shards(params) -> int | None:
    """The workload's shard count; None leaves it to the module (Liger's and DeepSpeed's ceil(seq / hidden))."""
    shards = params.get("num_shards")
    return None if shards is None else int(shards)


def hidden_act(act: int) -> str:
    """Transformers' ``hidden_act`` name of a gated-MLP activation, as upstream's LlamaConfig sets it."""
    return "gelu_pytorch_tanh" if act == ACT_GELU_TANH else "silu"


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


def _weights(module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return module.gate_proj.weight, module.up_proj.weight, module.down_proj.weight


def _leaves(module, x_leaf) -> dict[str, torch.Tensor]:
    wg, wu, wd = _weights(module)
    return {"x": x_leaf, "w_gate": wg, "w_up": wu, "w_down": wd}


def _loaded(module, inputs):
    """``module`` on the inputs' device and dtype, its projections holding the workload's weights."""
    x = inputs["x"]
    module = module.to(device=x.device, dtype=x.dtype)
    with torch.no_grad():
        for weight, name in zip(_weights(module), ("w_gate", "w_up", "w_down")):
            weight.copy_(inputs[name])
    return module


class GatedMLP(torch.nn.Module):
    """Transformers' ``LlamaMLP`` in plain PyTorch (gate, up and down projections without bias), for the
    DeepSpeed provider where Transformers is not importable."""

    def __init__(self, hidden: int, intermediate: int, act: int):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = torch.nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = torch.nn.Linear(intermediate, hidden, bias=False)
        self.act_fn = (lambda t: F.gelu(t, approximate="tanh")) if act == ACT_GELU_TANH else F.silu

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


def _deepspeed_tiled_mlp():
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
        return self.tiled.apply(_mlp_forward, self.mlp, x, max(1, shards), list(_weights(self.mlp)))


def _llama_mlp(hidden: int, intermediate: int, act: int):
    """Transformers' ``LlamaMLP`` and its label, or ``GatedMLP`` labelled as its equivalent."""
    try:
        from transformers.models.llama.configuration_llama import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaMLP
    except Exception:  # noqa: BLE001 - without Transformers the PyTorch equivalent stands in
        return GatedMLP(hidden, intermediate, act), "PyTorch equivalent of Transformers LlamaMLP"
    config = LlamaConfig(hidden_size=hidden, intermediate_size=intermediate, hidden_act=hidden_act(act))
    return LlamaMLP(config), f"Transformers {version_label('transformers')} LlamaMLP"


def build_tiled(
    kernel: str,
    provider: str,
    inputs,
    params,
    *,
    act: int,
    liger_module: str,
    liger_class: str,
    liger_tiled_class: str,
) -> Built:
    """A tiled gated-MLP adapter's ``build``: ``act`` is the activation, ``liger_module``/``liger_class`` the
    untiled Liger MLP, ``liger_tiled_class`` the tiled one (in ``liger_kernel.transformers.tiled_mlp``)."""
    x = inputs["x"]
    hidden, intermediate = inputs["w_up"].shape[1], inputs["w_up"].shape[0]
    act_name = hidden_act(act)
    shards = num_shards(params)
    # Liger's MLPs read only these fields of the Transformers config upstream hands them.
    config = SimpleNamespace(hidden_size=hidden, intermediate_size=intermediate, hidden_act=act_name)
    if provider == "huggingface":
        return mlp.build_mlp(kernel, provider, inputs, act_name, act, liger_class)
    x_leaf = x.detach().clone().requires_grad_(True)
    if provider in ("liger", "liger_triton"):
        cls = liger_triton_attr(x, liger_module, liger_class, LIGER_TRITON_NEEDS_ON_CPU)
        module = _loaded(cls(config), inputs)
        label = f"Liger-Kernel {version_label('liger-kernel')} {liger_class} (untiled, Triton)"
        return Built(lambda: (module(x_leaf),), _leaves(module, x_leaf), label, OUTPUT_NAMES)
    if provider == "liger_tiled":
        cls = liger_triton_attr(x, "tiled_mlp", liger_tiled_class, LIGER_TRITON_NEEDS_ON_CPU)
        module = _loaded(cls(config, num_shards=shards), inputs)
        label = f"Liger-Kernel {version_label('liger-kernel')} {liger_tiled_class} (num_shards={shards})"
    elif provider == "deepspeed_tiled":
        tiled, tiled_label = _deepspeed_tiled_mlp()
        inner, inner_label = _llama_mlp(hidden, intermediate, act)
        module = DeepSpeedTiled(_loaded(inner, inputs), tiled, shards)
        label = f"{tiled_label} around {inner_label} (hidden_act={act_name}, num_shards={shards})"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {kernel}")
    inner = module.mlp if isinstance(module, DeepSpeedTiled) else module
    weights = _weights(inner)
    return Built(
        lambda: (SurfacedWeightGrads.apply(module, x_leaf, *weights),),
        _leaves(inner, x_leaf),
        label,
        OUTPUT_NAMES,
    )
