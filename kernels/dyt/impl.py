"""DyT's rerun adapter (``kernels._adapter.RerunAdapter``): y = gamma * tanh(alpha * x) + beta over
x [tokens, hidden], with a scalar alpha [1], a per-channel gamma [hidden], and a per-channel beta [hidden]
only when the workload's ``beta`` is on.

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

from kernels._adapter import Built, Unavailable
from kernels._providers import LIGER_TRITON_NEEDS_ON_CPU, liger_triton_attr, torch_compiled, version_label
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, numel, randn

KERNEL = "dyt"
PROVIDERS = ("liger", "torch", "torch_compile")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("y",)
GRAD_INPUTS = ("x", "alpha", "gamma")
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64
# The layers' parameters, in the order the spec lists them; beta only when the workload's beta is on.
PARAMETERS = ("alpha", "gamma", "beta")
# Bytes per parameter element: the script's layers keep float32 parameters whatever x's dtype.
PARAMETER_BYTES = 4


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = RERUN_DTYPES[dtype]
    inputs = {
        "x": randn(s["x"], td, gen, device),
        "alpha": randn(s["alpha"], td, gen, device, scale=0.1, shift=0.5),
        "gamma": randn(s["gamma"], td, gen, device, scale=0.1, shift=1.0),
    }
    if "beta" in s:
        inputs["beta"] = randn(s["beta"], td, gen, device, scale=0.1)
    return inputs


def reference(inputs, params):
    y = inputs["gamma"] * torch.tanh(inputs["alpha"] * inputs["x"])
    if "beta" in inputs:
        y = y + inputs["beta"]
    return (y,)


class _TorchDyT(torch.nn.Module):
    """The eager layer the script times as "torch" and compiles as "torch_compile" (TorchDyT in Liger-Kernel's
    ``test/transformers/test_dyt.py``): float32 parameters, and beta None when off. The parameters are left
    uninitialized here; ``build`` copies the drawn values in."""

    def __init__(self, hidden: int, beta: bool):
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.empty(1))
        self.gamma = torch.nn.Parameter(torch.empty(hidden))
        self.beta = torch.nn.Parameter(torch.empty(hidden)) if beta else None

    def forward(self, x):
        y = self.gamma * torch.tanh(x * self.alpha)
        return y if self.beta is None else y + self.beta


def build(provider, inputs, params) -> Built:
    x = inputs["x"]
    hidden, beta = x.shape[-1], "beta" in inputs
    if provider == "liger":
        liger_dyt = liger_triton_attr(x, "dyt", "LigerDyT", LIGER_TRITON_NEEDS_ON_CPU)
        module = liger_dyt(hidden_size=hidden, beta=beta)
        label = f"Liger-Kernel {version_label('liger-kernel')} LigerDyT (Triton)"
    elif provider in ("torch", "torch_compile"):
        module = _TorchDyT(hidden, beta)
        label = f"PyTorch {torch.__version__} eager DyT (upstream TorchDyT)"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    # Moved, not cast: the script's layers keep float32 parameters (see the module docstring).
    module = module.to(device=x.device)
    names = [n for n in PARAMETERS if n in inputs]
    with torch.no_grad():
        for name in names:
            getattr(module, name).copy_(inputs[name])
    x_leaf = x.detach().clone().requires_grad_(True)
    run = module
    if provider == "torch_compile":
        run = torch_compiled(module, x_leaf)
        label = f"torch.compile(upstream TorchDyT), default inductor settings (PyTorch {torch.__version__})"
    leaves = {"x": x_leaf, **{name: getattr(module, name) for name in names}}
    return Built(lambda: (run(x_leaf),), leaves, label, OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    """Forward reads x, alpha, gamma (and beta) and writes y; backward reads dy, x, alpha and gamma and
    writes dx and the parameters' gradients; full reads x, the parameters and dy once and writes y, dx and
    the parameters' gradients. x, y, dx and dy are counted in the workload's dtype, the parameters and their
    gradients in float32 (``PARAMETER_BYTES``). Kernels' per-block partial sums are not counted."""
    s = input_shapes(KERNEL, params)
    e = RERUN_BYTES[dtype]
    xb = numel(s["x"]) * e
    pb = sum(numel(s[n]) for n in PARAMETERS if n in s) * PARAMETER_BYTES
    read_back = (numel(s["alpha"]) + numel(s["gamma"])) * PARAMETER_BYTES
    return {"forward": 2 * xb + pb, "backward": 3 * xb + read_back + pb, "full": 4 * xb + 2 * pb}[mode]


def flops(params, mode) -> int:
    """Per element of x: forward 3 (scale by alpha, tanh, scale by gamma) plus beta's add; backward about 11
    (tanh(alpha * x) again, 1 - tanh^2 times dy and gamma, dx, and the alpha and gamma reductions) plus
    beta's reduction."""
    s = input_shapes(KERNEL, params)
    n = numel(s["x"])
    b = 1 if "beta" in s else 0
    forward, backward = (3 + b) * n, (11 + b) * n
    return {"forward": forward, "backward": backward, "full": forward + backward}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
