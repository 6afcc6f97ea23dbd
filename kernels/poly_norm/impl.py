"""PolyNorm's rerun adapter: y = w0 * norm(x^3) + w1 * norm(x^2) + w2 * norm(x) + b over x [rows, hidden], where
norm(u) = u * rsqrt(mean(u^2) + eps) along hidden, with a weight [3] and a scalar bias [].

Providers follow Liger-Kernel's ``benchmark/scripts/benchmark_poly_norm.py`` (as added in 9743e507 and
unchanged through v0.7.0; the claims' runs are labelled 0.6.2-0.7.0): ``liger`` is ``LigerPolyNorm(eps=eps)``
moved to the device, its default ``in_place=True`` kept (its backward writes dx into the upstream gradient's
buffer), and ``huggingface`` is the eager layer the script itself defines (``NaivePolyNorm``, not Transformers
code), re-implemented here from its arithmetic: x upcast to float32, the three normalized powers, the weighted
sum and bias, cast back to x's dtype. Both layers keep float32 parameters over a bf16 x (moved, not cast), and
both return x's dtype. They compute the same quantity; Liger's forward forms the powers in x's dtype, the
eager layer in float32.

Inputs: x drawn from a normal distribution; the weight and bias (1/3 each and 1.0 upstream) drawn in float32
near those values so that their gradients are checked against non-trivial values.
"""

from __future__ import annotations

import torch

from kernels.adapter import Adapter, Built
from kernels.providers import liger_attr, liger_label
from kernels.spec import DTYPE_BYTES
from kernels.tensors import RERUN_BYTES, Draws, input_shapes, leaf, numel, per_mode

# The script's extra benchmark config, used where a workload leaves it out.
EPS = 1e-6
# The layers' parameters, in the order the spec lists them: float32 whatever x's dtype.
PARAMETERS = ("weight", "bias")
PARAMETER_BYTES = DTYPE_BYTES["fp32"]


def _eps(params) -> float:
    return float(params.get("eps", EPS))


def poly_norm(x, weight, bias, eps):
    """PolyNorm in the dtype of its arguments: the powers x^3, x^2 and x, each scaled by its reciprocal RMS and
    weighted by weight[0], weight[1] and weight[2] in that order, summed in that order, then the bias added."""
    w3, w2, w1 = weight.unbind(0)
    x3, x2 = x.pow(3), x.pow(2)
    return w3 * _rms_scaled(x3, eps) + w2 * _rms_scaled(x2, eps) + w1 * _rms_scaled(x, eps) + bias


def _rms_scaled(u, eps):
    """u * rsqrt(mean(u^2) + eps) along the last dimension."""
    return u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + eps)


class EagerPolyNorm(torch.nn.Module):
    """The upstream script's "huggingface" layer (its NaivePolyNorm): float32 parameters, the arithmetic in
    float32 over an upcast x, the result cast back to x's dtype. The parameters are left uninitialized here;
    the adapter copies the drawn values in."""

    def __init__(self, eps: float):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(3))
        self.bias = torch.nn.Parameter(torch.empty(()))
        self.eps = eps

    def forward(self, x):
        return poly_norm(x.to(torch.float32), self.weight, self.bias, self.eps).to(x.dtype)


class PolyNorm(Adapter):
    KERNEL = "poly_norm"
    OUTPUT_NAMES = ("y",)
    GRAD_INPUTS = ("x", "weight", "bias")
    REFERENCE_DTYPE = torch.float64

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        d = Draws(self.KERNEL, params, dtype, seed, device)
        # the parameters in float32, as the spec says
        return {"x": d.normal("x"), "weight": d.normal("weight", 0.1, 1.0 / 3.0), "bias": d.normal("bias", 0.1, 1.0)}

    def reference(self, inputs, params):
        return (poly_norm(inputs["x"], inputs["weight"], inputs["bias"], _eps(params)),)

    def _layer_pass(self, module, inputs, label: str) -> Built:
        """A pass of ``module`` holding the drawn parameters (moved, not cast: the script's layers keep float32
        parameters), over a fresh leaf copy of x."""
        module = module.to(device=inputs["x"].device)
        with torch.no_grad():
            for name in PARAMETERS:
                getattr(module, name).copy_(inputs[name])
        x = leaf(inputs["x"])
        leaves = {"x": x, **{name: getattr(module, name) for name in PARAMETERS}}
        return self.built(lambda: (module(x),), leaves, label)

    def _liger(self, provider, inputs, params) -> Built:
        cls = liger_attr(inputs["x"], "poly_norm", "LigerPolyNorm")
        return self._layer_pass(cls(eps=_eps(params)), inputs, liger_label("LigerPolyNorm", "Triton, in_place=True"))

    def _huggingface(self, provider, inputs, params) -> Built:
        label = (f"PyTorch {torch.__version__} eager PolyNorm (the upstream script's NaivePolyNorm, its "
                 f"huggingface provider; not Transformers code)")
        return self._layer_pass(EagerPolyNorm(_eps(params)), inputs, label)

    BUILDERS = {"liger": _liger, "huggingface": _huggingface}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward reads x, the weight and the bias and writes y; backward reads dy, x and the weight and writes
        dx and the weight's and bias's gradients; full reads x, the parameters and dy once and writes y, dx and
        the parameters' gradients. x, y, dx and dy are counted in the workload's dtype, the parameters and their
        gradients in float32 (``PARAMETER_BYTES``). The saved per-row rstd (three a row) and the kernels'
        per-program partial sums are not counted."""
        s = input_shapes(self.KERNEL, params)
        xb = numel(s["x"]) * RERUN_BYTES[dtype]
        pb = sum(numel(s[n]) for n in PARAMETERS) * PARAMETER_BYTES
        wb = numel(s["weight"]) * PARAMETER_BYTES
        return {"forward": 2 * xb + pb, "backward": 3 * xb + wb + pb, "full": 4 * xb + 2 * pb}[mode]

    def flops(self, params, mode) -> int:
        """Per element of x: forward about 17 (x^2 and x^3, three squares summed, three normalizations, three
        weights, the sum and the bias); backward about 36 (x^5, and per power its row sum S_p = sum(dy * x^p),
        the direct and the mean terms, and the weight, about 10 each; the terms' sum and the bias's reduction)."""
        n = numel(input_shapes(self.KERNEL, params)["x"])
        return per_mode(17 * n, 36 * n, mode)


ADAPTER = PolyNorm()
