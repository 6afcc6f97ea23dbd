"""DyT's rerun adapter: y = gamma * tanh(alpha * x) + beta over x [tokens, hidden], with a scalar alpha [1], a
per-channel gamma [hidden], and a per-channel beta [hidden] only when the workload's ``beta`` is on.

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_dyt.py``: x drawn from a normal distribution;
the layers' alpha, gamma and beta (0.5, ones and zeros upstream) drawn near those values so that their
gradients are checked against non-trivial values. They are drawn in the workload's dtype, as the spec lists
them, and copied into float32 parameters: the script moves its layers to the device without casting them,
so every provider runs float32 parameters over a low-precision x (the eager and compiled layers then return
float32, Liger's kernel x's dtype).

beta's gradient is not in ``GRAD_INPUTS``: that tuple serves every workload and beta is an input only when
it is on, so the harness checks the gradients of x, alpha and gamma. beta is still a leaf when on, so that
its gradient is cleared between timed repetitions like the others'.
"""

from __future__ import annotations

import torch

from kernels.adapter import Adapter, Built
from kernels.providers import liger_attr, liger_label, torch_compiled
from kernels.spec import DTYPE_BYTES
from kernels.tensors import RERUN_BYTES, Draws, input_shapes, leaf, numel, per_mode

# The layers' parameters, in the order the spec lists them; beta only when the workload's beta is on.
PARAMETERS = ("alpha", "gamma", "beta")
# Bytes per parameter element: the script's layers keep float32 parameters whatever x's dtype.
PARAMETER_BYTES = DTYPE_BYTES["fp32"]


class TorchDyT(torch.nn.Module):
    """The eager layer the script times as "torch" and compiles as "torch_compile" (TorchDyT in Liger-Kernel's
    ``test/transformers/test_dyt.py``): float32 parameters, and beta None when off. The parameters are left
    uninitialized here; the adapter copies the drawn values in."""

    def __init__(self, hidden: int, beta: bool):
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.empty(1))
        self.gamma = torch.nn.Parameter(torch.empty(hidden))
        self.beta = torch.nn.Parameter(torch.empty(hidden)) if beta else None

    def forward(self, x):
        y = self.gamma * torch.tanh(x * self.alpha)
        return y if self.beta is None else y + self.beta


class DyT(Adapter):
    KERNEL = "dyt"
    OUTPUT_NAMES = ("y",)
    GRAD_INPUTS = ("x", "alpha", "gamma")
    REFERENCE_DTYPE = torch.float64

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        d = Draws(self.KERNEL, params, dtype, seed, device)
        inputs = {"x": d.normal("x"), "alpha": d.normal("alpha", 0.1, 0.5), "gamma": d.normal("gamma", 0.1, 1.0)}
        if "beta" in d.shapes:
            inputs["beta"] = d.normal("beta", 0.1)
        return inputs

    def reference(self, inputs, params):
        y = inputs["gamma"] * torch.tanh(inputs["alpha"] * inputs["x"])
        if "beta" in inputs:
            y = y + inputs["beta"]
        return (y,)

    def _layer_pass(self, module, inputs, label: str, compiled_label: str | None = None) -> Built:
        """A pass of ``module`` holding the drawn parameters (moved, not cast: the script's layers keep float32
        parameters), over a fresh leaf copy of x; through ``torch_compiled`` when ``compiled_label`` names it."""
        module = module.to(device=inputs["x"].device)
        names = [n for n in PARAMETERS if n in inputs]
        with torch.no_grad():
            for name in names:
                getattr(module, name).copy_(inputs[name])
        x = leaf(inputs["x"])
        run = module if compiled_label is None else torch_compiled(module, x)
        leaves = {"x": x, **{name: getattr(module, name) for name in names}}
        return self.built(lambda: (run(x),), leaves, label if compiled_label is None else compiled_label)

    def _liger(self, provider, inputs, params) -> Built:
        cls = liger_attr(inputs["x"], "dyt", "LigerDyT")
        return self._layer_pass(cls(hidden_size=inputs["x"].shape[-1], beta="beta" in inputs), inputs,
                                liger_label("LigerDyT", "Triton"))

    def _torch(self, provider, inputs, params) -> Built:
        module = TorchDyT(inputs["x"].shape[-1], "beta" in inputs)
        compiled = (f"torch.compile(upstream TorchDyT), default inductor settings (PyTorch {torch.__version__})"
                    if provider == "torch_compile" else None)
        return self._layer_pass(module, inputs, f"PyTorch {torch.__version__} eager DyT (upstream TorchDyT)", compiled)

    BUILDERS = {"liger": _liger, "torch": _torch, "torch_compile": _torch}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward reads x, alpha, gamma (and beta) and writes y; backward reads dy, x, alpha and gamma and
        writes dx and the parameters' gradients; full reads x, the parameters and dy once and writes y, dx and
        the parameters' gradients. x, y, dx and dy are counted in the workload's dtype, the parameters and
        their gradients in float32 (``PARAMETER_BYTES``). Kernels' per-block partial sums are not counted."""
        s = input_shapes(self.KERNEL, params)
        e = RERUN_BYTES[dtype]
        xb = numel(s["x"]) * e
        pb = sum(numel(s[n]) for n in PARAMETERS if n in s) * PARAMETER_BYTES
        read_back = (numel(s["alpha"]) + numel(s["gamma"])) * PARAMETER_BYTES
        return {"forward": 2 * xb + pb, "backward": 3 * xb + read_back + pb, "full": 4 * xb + 2 * pb}[mode]

    def flops(self, params, mode) -> int:
        """Per element of x: forward 3 (scale by alpha, tanh, scale by gamma) plus beta's add; backward about
        11 (tanh(alpha * x) again, 1 - tanh^2 times dy and gamma, dx, and the alpha and gamma reductions) plus
        beta's reduction."""
        s = input_shapes(self.KERNEL, params)
        n = numel(s["x"])
        b = 1 if "beta" in s else 0
        return per_mode((3 + b) * n, (11 + b) * n, mode)


ADAPTER = DyT()
