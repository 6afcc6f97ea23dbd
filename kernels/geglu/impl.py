"""GeGLU MLP (down(gelu_tanh(gate(x)) * up(x))): inputs, references, providers, KernelIndex's kernels.

KernelIndex's MLP is one autograd.Function: GEMMs (through PyTorch's BLAS library, or the one named by
MLP_OPTIONS["blas"]) for the projections, one Triton kernel for the gated activation in each direction.
From MLP_OPTIONS["fuse_min_tokens"] tokens up, gate and up come from one GEMM against [w_gate; w_up]; x,
that [gate | up] product and the activation product h are saved, so the backward kernel only writes
d(gate) and d(up), side by side, and dx and both weight gradients are one GEMM each over 2 x intermediate
(below it: two GEMMs each; with MLP_OPTIONS["save_h"] off, h is recomputed over dh).
The activation's tanh is written through exp so the kernel also runs under Triton's interpreter.
The same code serves SwiGLU (``ACT_SILU``).
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

import kernels
from kernels._impl_common import (
    BYTES_PER_ELEMENT,
    Built,
    CachedLaunch,
    Unavailable,
    generator,
    leaf_copies,
    numel,
    package_version,
    randn,
    torch_dtype,
)

KERNEL = "geglu"
GRAD_INPUTS = ("x", "w_gate", "w_up", "w_down")
OUTPUT_NAMES = ("y",)
PROVIDERS = ("kernelindex", "liger", "huggingface")
REFERENCE_DTYPE = torch.float32  # GEMMs at this size in float64 are too slow; TF32 is switched off by the harness
IMPLIED = {"hidden_act": "gelu_pytorch_tanh"}

ACT_GELU_TANH = 0
ACT_SILU = 1


def mlp_shapes(kernel: str, params):
    return {t["name"]: t["shape"] for t in kernels.lookup(kernel).input_tensors(params, None)}


def make_mlp_inputs(kernel: str, params: dict, dtype: str, seed: int, device) -> dict[str, torch.Tensor]:
    shapes = mlp_shapes(kernel, params)
    gen = generator(seed, device)
    td = torch_dtype(dtype)
    hidden, inter = shapes["w_up"][1], shapes["w_up"][0]
    return {
        "x": randn(shapes["x"], td, gen, device),
        "w_gate": randn(shapes["w_gate"], td, gen, device, scale=1.0 / math.sqrt(hidden)),
        "w_up": randn(shapes["w_up"], td, gen, device, scale=1.0 / math.sqrt(hidden)),
        "w_down": randn(shapes["w_down"], td, gen, device, scale=1.0 / math.sqrt(inter)),
    }


def make_inputs(params: dict, dtype: str, seed: int, device) -> dict[str, torch.Tensor]:
    return make_mlp_inputs(KERNEL, params, dtype, seed, device)


def gelu_tanh_ref(a):
    return 0.5 * a * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a * a * a)))


def reference(inputs: dict, params: dict | None = None) -> tuple[torch.Tensor]:
    x, wg, wu, wd = inputs["x"], inputs["w_gate"], inputs["w_up"], inputs["w_down"]
    return (F.linear(gelu_tanh_ref(F.linear(x, wg)) * F.linear(x, wu), wd),)


# --------------------------------------------------------------------------------------------------
# Triton: gated activation over gu = [gate | up] (row stride 2*I), forward and backward.


@triton.jit
def _tanh_via_exp(z):
    return 2.0 / (1.0 + tl.exp(-2.0 * z)) - 1.0


@triton.jit
def _act_and_grad(g, ACT: tl.constexpr):
    if ACT == 0:
        k0: tl.constexpr = 0.7978845608028654  # sqrt(2/pi)
        k1: tl.constexpr = 0.044715
        t = _tanh_via_exp(k0 * (g + k1 * g * g * g))
        a = 0.5 * g * (1.0 + t)
        da = 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * (k0 * (1.0 + 3.0 * k1 * g * g))
    else:
        sg = 1.0 / (1.0 + tl.exp(-g))
        a = g * sg
        da = sg * (1.0 + g * (1.0 - sg))
    return a, da


@triton.jit
def _glu_fwd_kernel(g_ptr, u_ptr, h_ptr, n_rows, inter, gu_stride, ACT: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < inter)
    r64 = rows[:, None].to(tl.int64)
    g = tl.load(g_ptr + r64 * gu_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + r64 * gu_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    a, _ = _act_and_grad(g, ACT)
    tl.store(h_ptr + r64 * inter + cols[None, :], (a * u).to(h_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _glu_bwd_kernel(g_ptr, u_ptr, dh_ptr, dg_ptr, du_ptr, n_rows, inter, gu_stride, dgu_stride, ACT: tl.constexpr,
                    WRITE_H: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Reads g, u, dh; writes d gate, d up and (WRITE_H) h over dh, element by element."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < inter)
    r64 = rows[:, None].to(tl.int64)
    off = r64 * inter + cols[None, :]
    g = tl.load(g_ptr + r64 * gu_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + r64 * gu_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dh = tl.load(dh_ptr + off, mask=mask, other=0.0).to(tl.float32)
    a, da = _act_and_grad(g, ACT)
    if WRITE_H:
        tl.store(dh_ptr + off, (a * u).to(dh_ptr.dtype.element_ty), mask=mask)
    tl.store(dg_ptr + r64 * dgu_stride + cols[None, :], (dh * u * da).to(dg_ptr.dtype.element_ty), mask=mask)
    tl.store(du_ptr + r64 * dgu_stride + cols[None, :], (dh * a).to(du_ptr.dtype.element_ty), mask=mask)


_BLOCK_M, _BLOCK_N, _WARPS = 4, 1024, 8


_FWD = CachedLaunch(_glu_fwd_kernel)
_BWD = CachedLaunch(_glu_bwd_kernel)

# How the MLP is put together (the fastest on one H200 at the geglu and swiglu rerun sizes; see
# docs/rerun-notes.md). Gate/up fusion: one GEMM against [w_gate; w_up] for gate and up, one GEMM over
# K = 2I for dx and one for both weight gradients, instead of two each. It pays for concatenating the
# weights on every call, which is about 360 / tokens of the gate/up GEMM time at the measured copy and
# matmul rates, so it is used from fuse_min_tokens tokens up (8192 tokens: 3% slower forward; 32768 and
# 65536: 1-4% faster). save_h: keep the activation product from the forward pass (one more tokens x I
# tensor alive between the passes) instead of recomputing it in the backward kernel.
# blas: the library PyTorch sends the GEMMs to (None: PyTorch's choice, cuBLAS on NVIDIA; "cublaslt":
# no faster at these sizes, docs/rerun-notes.md v7).
MLP_OPTIONS = {"fuse_min_tokens": 16384, "save_h": True, "blas": None}


def _blas_in_effect(device: torch.device) -> str | None:
    """MLP_OPTIONS["blas"] where it applies (CUDA tensors), else None: PyTorch's own choice."""
    return MLP_OPTIONS["blas"] if device.type == "cuda" else None


def blas_label(device: torch.device) -> str:
    return "cuBLASLt" if _blas_in_effect(device) == "cublaslt" else "cuBLAS"


@contextlib.contextmanager
def _blas_library(device: torch.device):
    """The MLP's CUDA GEMMs under MLP_OPTIONS["blas"], PyTorch's process-wide choice restored afterwards
    (read in each direction: the backward runs under the setting current when it runs)."""
    lib = _blas_in_effect(device)
    if lib is None:
        yield
        return
    prev = torch.backends.cuda.preferred_blas_library()
    torch.backends.cuda.preferred_blas_library(lib)
    try:
        yield
    finally:
        torch.backends.cuda.preferred_blas_library(prev)


def _grid(n_rows, inter):
    return (triton.cdiv(n_rows, _BLOCK_M), triton.cdiv(inter, _BLOCK_N))


def glu_forward(g: torch.Tensor, u: torch.Tensor, act: int) -> torch.Tensor:
    """h = act(g) * u; g and u are [N, I] with unit column stride and a shared row stride."""
    n_rows, inter = g.shape
    h = torch.empty((n_rows, inter), dtype=g.dtype, device=g.device)
    stride = g.stride(0)
    _FWD(_grid(n_rows, inter), (g.dtype, g.device.index, n_rows, inter, stride, act),
         (g, u, h, n_rows, inter, stride, act, _BLOCK_M, _BLOCK_N), _WARPS, tensors=(g, u, h))
    return h


def glu_backward(g: torch.Tensor, u: torch.Tensor, dh: torch.Tensor, act: int, dg: torch.Tensor,
                 du: torch.Tensor, write_h: bool = True) -> None:
    """Writes d gate into dg, d up into du (both [N, I], shared row stride) and, if asked, h over dh."""
    n_rows, inter = dh.shape
    gs, ds = g.stride(0), dg.stride(0)
    _BWD(_grid(n_rows, inter), (g.dtype, g.device.index, n_rows, inter, gs, ds, act, write_h),
         (g, u, dh, dg, du, n_rows, inter, gs, ds, act, write_h, _BLOCK_M, _BLOCK_N), _WARPS,
         tensors=(g, u, dh, dg, du))


class KernelIndexGatedMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w_gate, w_up, w_down, act):
        with _blas_library(x.device):
            return KernelIndexGatedMLP._forward(ctx, x, w_gate, w_up, w_down, act)

    @staticmethod
    def backward(ctx, dy):
        with _blas_library(dy.device):
            return KernelIndexGatedMLP._backward(ctx, dy)

    @staticmethod
    def _forward(ctx, x, w_gate, w_up, w_down, act):
        hidden, inter = x.shape[-1], w_gate.shape[0]
        x2 = x.reshape(-1, hidden)
        if not x2.is_contiguous():
            x2 = x2.contiguous()
        fuse, save_h = x2.shape[0] >= MLP_OPTIONS["fuse_min_tokens"], MLP_OPTIONS["save_h"]
        if fuse:
            w_gu = torch.cat([w_gate, w_up], 0)
            gu = F.linear(x2, w_gu)
            g, u = gu[:, :inter], gu[:, inter:]
            saved = (gu,)
        else:
            w_gu, g, u = None, F.linear(x2, w_gate), F.linear(x2, w_up)
            saved = (g, u)
        h = glu_forward(g, u, act)
        y = F.linear(h, w_down)
        ctx.save_for_backward(x2, w_gate, w_up, w_gu, w_down, h if save_h else None, *saved)
        ctx.act, ctx.fuse = act, fuse
        ctx.x_shape = x.shape
        return y.view(*x.shape[:-1], w_down.shape[0])

    @staticmethod
    def _backward(ctx, dy):
        x2, w_gate, w_up, w_gu, w_down, h, *saved = ctx.saved_tensors
        inter = w_gate.shape[0]
        dy2 = dy.reshape(-1, dy.shape[-1])
        if not dy2.is_contiguous():
            dy2 = dy2.contiguous()
        dh = dy2 @ w_down
        g, u = (saved[0][:, :inter], saved[0][:, inter:]) if ctx.fuse else saved
        dgu = torch.empty((dh.shape[0], 2 * inter), dtype=dh.dtype, device=dh.device) if ctx.fuse else None
        dg, du = (dgu[:, :inter], dgu[:, inter:]) if ctx.fuse else (torch.empty_like(dh), torch.empty_like(dh))
        glu_backward(g, u, dh, ctx.act, dg, du, write_h=h is None)
        if h is None:
            h = dh  # the kernel wrote h over dh
        need = ctx.needs_input_grad
        dx = dw_gate = dw_up = None
        if ctx.fuse:
            if need[0]:
                dx = (dgu @ w_gu).view(ctx.x_shape)
            if need[1] or need[2]:
                dw_gu = dgu.t() @ x2
                dw_gate, dw_up = dw_gu[:inter], dw_gu[inter:]
        else:
            if need[0]:
                dx = torch.mm(dg, w_gate)
                dx.addmm_(du, w_up)
                dx = dx.view(ctx.x_shape)
            dw_gate = dg.t() @ x2 if need[1] else None
            dw_up = du.t() @ x2 if need[2] else None
        dw_down = dy2.t() @ h if need[3] else None
        return dx, dw_gate, dw_up, dw_down, None


def kernelindex_gated_mlp(x, w_gate, w_up, w_down, act: int):
    return KernelIndexGatedMLP.apply(x, w_gate, w_up, w_down, act)


# --------------------------------------------------------------------------------------------------
# Providers (shared with SwiGLU).


def _load_linear_weights(module, leaves_src: dict, device, dtype):
    module = module.to(device=device, dtype=dtype)
    with torch.no_grad():
        module.gate_proj.weight.copy_(leaves_src["w_gate"])
        module.up_proj.weight.copy_(leaves_src["w_up"])
        module.down_proj.weight.copy_(leaves_src["w_down"])
    return module


def _module_leaves(module, x_leaf):
    return {"x": x_leaf, "w_gate": module.gate_proj.weight, "w_up": module.up_proj.weight,
            "w_down": module.down_proj.weight}


def _llama_config(inputs, hidden_act):
    from transformers.models.llama.configuration_llama import LlamaConfig

    return LlamaConfig(hidden_size=inputs["w_up"].shape[1], intermediate_size=inputs["w_up"].shape[0],
                       hidden_act=hidden_act)


def build_mlp(kernel: str, provider: str, inputs: dict, hidden_act: str, act: int, liger_class: str) -> Built:
    x = inputs["x"]
    device, dtype = x.device, x.dtype
    torch_act = (lambda t: F.gelu(t, approximate="tanh")) if act == ACT_GELU_TANH else F.silu
    if provider == "kernelindex":
        leaves = leaf_copies(inputs, GRAD_INPUTS)
        return Built(lambda: (kernelindex_gated_mlp(leaves["x"], leaves["w_gate"], leaves["w_up"], leaves["w_down"],
                                                    act),),
                     leaves, f"KernelIndex gated MLP: {blas_label(x.device)} GEMMs + Triton {hidden_act} fwd/bwd",
                     OUTPUT_NAMES)
    if provider == "torch":
        leaves = leaf_copies(inputs, GRAD_INPUTS)
        return Built(lambda: (F.linear(torch_act(F.linear(leaves["x"], leaves["w_gate"]))
                                       * F.linear(leaves["x"], leaves["w_up"]), leaves["w_down"]),),
                     leaves, f"PyTorch eager F.linear MLP ({hidden_act})", OUTPUT_NAMES)
    x_leaf = x.detach().clone().requires_grad_(True)
    if provider == "huggingface":
        try:
            from transformers.models.llama.modeling_llama import LlamaMLP

            with torch.device(device):
                module = LlamaMLP(_llama_config(inputs, hidden_act))
            module = _load_linear_weights(module, inputs, device, dtype)
            label = f"Transformers {package_version('transformers')} LlamaMLP (hidden_act={hidden_act})"
            return Built(lambda: (module(x_leaf),), _module_leaves(module, x_leaf), label, OUTPUT_NAMES,
                         extra={"module": module})
        except ImportError:
            leaves = leaf_copies(inputs, GRAD_INPUTS)
            return Built(lambda: (F.linear(torch_act(F.linear(leaves["x"], leaves["w_gate"]))
                                           * F.linear(leaves["x"], leaves["w_up"]), leaves["w_down"]),),
                         leaves, f"PyTorch equivalent of Transformers LlamaMLP (hidden_act={hidden_act})",
                         OUTPUT_NAMES)
    if provider == "liger":
        if not x.is_cuda:
            raise Unavailable("liger_kernel needs a CUDA device")
        try:
            import importlib

            cls = getattr(importlib.import_module(f"liger_kernel.transformers.{kernel}"), liger_class)
            config = _llama_config(inputs, hidden_act)
        except Exception as exc:  # noqa: BLE001
            raise Unavailable(f"liger_kernel / transformers not importable: {exc}") from exc
        with torch.device(device):
            module = cls(config)
        module = _load_linear_weights(module, inputs, device, dtype)
        return Built(lambda: (module(x_leaf),), _module_leaves(module, x_leaf),
                     f"Liger-Kernel {package_version('liger-kernel')} {liger_class}", OUTPUT_NAMES,
                     extra={"module": module})
    raise Unavailable(f"unknown provider {provider!r} for {kernel}")


def build(provider: str, inputs: dict, params: dict | None = None) -> Built:
    return build_mlp(KERNEL, provider, inputs, "gelu_pytorch_tanh", ACT_GELU_TANH, "LigerGEGLUMLP")


def mlp_bytes(kernel, params, dtype, mode) -> int:
    """Fewest bytes: forward reads x and the three weights and writes y; backward reads dy, x and the
    weights and writes dx and the three weight gradients; full reads x, weights, dy once and writes y,
    dx and the weight gradients. Intermediates (gate/up activations) are not counted."""
    s = mlp_shapes(kernel, params)
    e = BYTES_PER_ELEMENT[dtype]
    xb = numel(s["x"]) * e
    wb = (numel(s["w_gate"]) + numel(s["w_up"]) + numel(s["w_down"])) * e
    fwd = xb + wb + xb
    bwd = xb + xb + wb + xb + wb
    full = xb + wb + xb + xb + xb + wb
    return {"forward": fwd, "backward": bwd, "full": full}[mode]


def mlp_dims(kernel, params) -> tuple[int, int, int]:
    """(tokens, hidden, intermediate) of a gated-MLP workload."""
    s = mlp_shapes(kernel, params)
    return numel(s["x"]) // s["x"][-1], s["w_up"][1], s["w_up"][0]


def mlp_flops(kernel, params, mode) -> int:
    """GEMM FLOPs: forward 3 GEMMs (2*N*H*I each), backward 6 (dh, dW_down, dgate/dup->dx twice, dW_gate,
    dW_up); elementwise work is left out (under 0.1% here)."""
    tokens, hidden, inter = mlp_dims(kernel, params)
    one = 2 * tokens * hidden * inter
    return {"forward": 3 * one, "backward": 6 * one, "full": 9 * one}[mode]


def mlp_matmul_shapes(kernel, params) -> list[tuple[int, int, int]]:
    """(m, n, k) of the GEMM problems a pass runs (T tokens, H hidden, I intermediate): gate and up, or both
    in one; down and the input gradient; the weight gradients over the tokens."""
    tokens, hidden, inter = mlp_dims(kernel, params)
    return [(tokens, inter, hidden), (tokens, 2 * inter, hidden), (tokens, hidden, inter), (inter, hidden, tokens)]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return mlp_matmul_shapes(KERNEL, params)


def bytes_moved(params, dtype, mode) -> int:
    return mlp_bytes(KERNEL, params, dtype, mode)


def flops(params, mode) -> int:
    return mlp_flops(KERNEL, params, mode)
