"""Megatron RMSNorm's rerun adapter (``kernels._adapter.RerunAdapter``): y = x * rsqrt(mean(x^2) + eps) * weight
over x [seq, batch, hidden], Megatron-LM's activation layout.

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_megatron_rms_norm.py``: x drawn from a normal
distribution (the script runs bfloat16 only and records no dtype); the weight (ones upstream) drawn near
one so that its gradient is checked against non-trivial values. The script builds every layer with
eps 1e-6, which its workloads do not record.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from kernels._adapter import Built, Unavailable
from kernels._providers import LIGER_TRITON_NEEDS_ON_CPU, liger_triton_attr, version_label
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, randn

KERNEL = "megatron_rms_norm"
PROVIDERS = ("liger", "megatron", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("y",)
GRAD_INPUTS = ("x", "weight")
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64
EPS = 1e-6


def _eps(params) -> float:
    return float(params.get("eps", EPS))


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = RERUN_DTYPES[dtype]
    return {"x": randn(s["x"], td, gen, device), "weight": randn(s["weight"], td, gen, device, scale=0.1, shift=1.0)}


def reference(inputs, params):
    x = inputs["x"]
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + _eps(params)) * inputs["weight"],)


def _megatron_config() -> SimpleNamespace:
    """The duck-typed TransformerConfig the upstream script hands both Megatron-shaped layers: plain RMSNorm,
    no sequence parallelism, no zero-centred gamma, no persistent or memory-efficient LayerNorm."""
    return SimpleNamespace(
        normalization="RMSNorm",
        sequence_parallel=False,
        layernorm_zero_centered_gamma=False,
        persist_layer_norm=False,
        memory_efficient_layer_norm=False,
    )


def _wrapped_torch_norm():
    try:
        from megatron.core.transformer.torch_norm import WrappedTorchNorm
    except Exception as exc:  # noqa: BLE001 - without megatron-core there is no megatron provider
        raise Unavailable(f"megatron-core not importable: {exc}") from exc
    return WrappedTorchNorm


def build(provider, inputs, params) -> Built:
    eps = _eps(params)
    x = inputs["x"]
    hidden = x.shape[-1]
    if provider == "liger":
        liger_megatron = liger_triton_attr(x, "megatron", "LigerMegatronRMSNorm", LIGER_TRITON_NEEDS_ON_CPU,
                                           package="liger_kernel", what="liger_kernel.megatron")
        module = liger_megatron(config=_megatron_config(), hidden_size=hidden, eps=eps)
        label = f"Liger-Kernel {version_label('liger-kernel')} LigerMegatronRMSNorm (Triton)"
    elif provider == "megatron":
        # WrappedTorchNorm returns a torch.nn.RMSNorm built from the config.
        module = _wrapped_torch_norm()(config=_megatron_config(), hidden_size=hidden, eps=eps)
        label = f"megatron-core {version_label('megatron-core')} WrappedTorchNorm ({type(module).__name__})"
    elif provider == "torch":
        module = torch.nn.RMSNorm(normalized_shape=hidden, eps=eps)
        label = f"torch.nn.RMSNorm (PyTorch {torch.__version__})"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    module = module.to(device=x.device, dtype=x.dtype)
    with torch.no_grad():
        module.weight.copy_(inputs["weight"])
    x_leaf = x.detach().clone().requires_grad_(True)
    return Built(lambda: (module(x_leaf),), {"x": x_leaf, "weight": module.weight}, label, OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    """Forward reads x and weight and writes y; backward reads dy, x and weight and writes dx and dweight;
    full reads x, weight, dy once and writes y, dx and dweight. Per-row rstd is not counted."""
    s = input_shapes(KERNEL, params)
    e = RERUN_BYTES[dtype]
    xb = s["x"][0] * s["x"][1] * s["x"][2] * e
    wb = s["weight"][0] * e
    return {"forward": 2 * xb + wb, "backward": 3 * xb + 2 * wb, "full": 4 * xb + 2 * wb}[mode]


def flops(params, mode) -> int:
    """Per element: forward about 4 (square, sum, normalize, scale); backward about 8."""
    x = input_shapes(KERNEL, params)["x"]
    n = x[0] * x[1] * x[2]
    return {"forward": 4 * n, "backward": 8 * n, "full": 12 * n}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
