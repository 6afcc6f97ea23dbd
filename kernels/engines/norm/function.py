"""RMSNorm and LayerNorm over the last dimension as autograd functions on the norm engine."""

from __future__ import annotations

import torch

from kernels.engines.norm.launch import norm_backward, norm_forward

DEFAULT_EPS = 1e-6


class NormFunction(torch.autograd.Function):
    """y = norm(x) * weight (+ bias for LayerNorm), over rows of the last dimension; the forward saves x,
    the weight and the per-row statistics for the backward."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps, is_ln):
        x2 = x.reshape(-1, x.shape[-1])
        if not x2.is_contiguous():
            x2 = x2.contiguous()
        y, mean, rstd = norm_forward(x2, weight, bias, eps, is_ln)
        ctx.save_for_backward(x2, weight, mean, rstd)
        ctx.is_ln = is_ln
        ctx.x_shape = x.shape
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, w, mean, rstd = ctx.saved_tensors
        dy2 = dy.reshape(-1, dy.shape[-1])
        if not dy2.is_contiguous():
            dy2 = dy2.contiguous()
        dx, dw, db = norm_backward(dy2, x2, w, mean, rstd, ctx.is_ln)
        return dx.view(ctx.x_shape), dw, db, None, None


def rms_norm(x, weight, eps=DEFAULT_EPS):
    return NormFunction.apply(x, weight, None, eps, False)


def layer_norm(x, weight, bias, eps=DEFAULT_EPS):
    return NormFunction.apply(x, weight, bias, eps, True)
