"""The gated MLP down(act(gate(x)) * up(x)) as one autograd function: GEMMs through PyTorch, the gated
activation through ``activation``'s Triton kernels in each direction.

With gate and up fused (``MlpAssembly.fuse_min_tokens``), x, the [gate | up] product and (``save_h``) h
are saved, so the backward kernel only writes d(gate) and d(up), side by side, and dx and both weight
gradients are one GEMM each over 2 x intermediate; else two GEMMs each, and without ``save_h`` the
backward kernel recomputes h over dh.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from kernels.engines.gated_mlp.activation import glu_backward, glu_forward
from kernels.engines.gated_mlp.settings import MLP_ASSEMBLY, MlpAssembly


def _blas_in_effect(device: torch.device, assembly: MlpAssembly) -> str | None:
    """``assembly.blas`` where it applies (CUDA tensors), else None: PyTorch's own choice."""
    return assembly.blas if device.type == "cuda" else None


def blas_label(device: torch.device, assembly: MlpAssembly = MLP_ASSEMBLY) -> str:
    return "cuBLASLt" if _blas_in_effect(device, assembly) == "cublaslt" else "cuBLAS"


@contextlib.contextmanager
def _blas_library(device: torch.device, assembly: MlpAssembly):
    """The MLP's CUDA GEMMs under ``assembly.blas``, PyTorch's process-wide choice restored afterwards."""
    lib = _blas_in_effect(device, assembly)
    if lib is None:
        yield
        return
    prev = torch.backends.cuda.preferred_blas_library()
    torch.backends.cuda.preferred_blas_library(lib)
    try:
        yield
    finally:
        torch.backends.cuda.preferred_blas_library(prev)


class GatedMLPFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w_gate, w_up, w_down, act, assembly):
        with _blas_library(x.device, assembly):
            return GatedMLPFunction._forward(ctx, x, w_gate, w_up, w_down, act, assembly)

    @staticmethod
    def backward(ctx, dy):
        with _blas_library(dy.device, ctx.assembly):
            return GatedMLPFunction._backward(ctx, dy)

    @staticmethod
    def _forward(ctx, x, w_gate, w_up, w_down, act, assembly):
        hidden, inter = x.shape[-1], w_gate.shape[0]
        x2 = x.reshape(-1, hidden)
        if not x2.is_contiguous():
            x2 = x2.contiguous()
        fuse, save_h = x2.shape[0] >= assembly.fuse_min_tokens, assembly.save_h
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
        ctx.act, ctx.fuse, ctx.assembly = act, fuse, assembly
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
        return dx, dw_gate, dw_up, dw_down, None, None


def gated_mlp(x, w_gate, w_up, w_down, act: int, assembly: MlpAssembly = MLP_ASSEMBLY):
    """down(act(gate(x)) * up(x)) with ``act`` one of ``activation.ACT_GELU_TANH``, ``ACT_SILU``."""
    return GatedMLPFunction.apply(x, w_gate, w_up, w_down, act, assembly)
