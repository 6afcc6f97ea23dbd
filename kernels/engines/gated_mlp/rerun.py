"""What the GeGLU and SwiGLU rerun adapters share: inputs, providers and the cost model of a gated MLP."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kernels._adapter import Built, Unavailable
from kernels._providers import liger_attr, package_version
from kernels._tensors import BYTES_PER_ELEMENT, generator, input_shapes, leaf_copies, numel, randn, torch_dtype
from kernels.engines.gated_mlp.activation import ACT_GELU_TANH
from kernels.engines.gated_mlp.function import blas_label, gated_mlp

GRAD_INPUTS = ("x", "w_gate", "w_up", "w_down")
OUTPUT_NAMES = ("y",)


def make_mlp_inputs(kernel: str, params, dtype: str, seed: int, device) -> dict[str, torch.Tensor]:
    """x, and the three weights scaled 1/sqrt(fan_in)."""
    shapes = input_shapes(kernel, params)
    gen = generator(seed, device)
    td = torch_dtype(dtype)
    hidden, inter = shapes["w_up"][1], shapes["w_up"][0]
    return {
        "x": randn(shapes["x"], td, gen, device),
        "w_gate": randn(shapes["w_gate"], td, gen, device, scale=1.0 / math.sqrt(hidden)),
        "w_up": randn(shapes["w_up"], td, gen, device, scale=1.0 / math.sqrt(hidden)),
        "w_down": randn(shapes["w_down"], td, gen, device, scale=1.0 / math.sqrt(inter)),
    }


def _load_linear_weights(module, inputs: dict, device, dtype):
    module = module.to(device=device, dtype=dtype)
    with torch.no_grad():
        module.gate_proj.weight.copy_(inputs["w_gate"])
        module.up_proj.weight.copy_(inputs["w_up"])
        module.down_proj.weight.copy_(inputs["w_down"])
    return module


def _module_leaves(module, x_leaf):
    return {"x": x_leaf, "w_gate": module.gate_proj.weight, "w_up": module.up_proj.weight,
            "w_down": module.down_proj.weight}


def _llama_config(inputs, hidden_act):
    from transformers.models.llama.configuration_llama import LlamaConfig

    return LlamaConfig(hidden_size=inputs["w_up"].shape[1], intermediate_size=inputs["w_up"].shape[0],
                       hidden_act=hidden_act)


def _torch_mlp(leaves, torch_act):
    return F.linear(torch_act(F.linear(leaves["x"], leaves["w_gate"])) * F.linear(leaves["x"], leaves["w_up"]),
                    leaves["w_down"])


def build_mlp(kernel: str, provider: str, inputs: dict, hidden_act: str, act: int, liger_class: str) -> Built:
    """The adapter's ``build`` for a gated MLP with activation ``act`` (Transformers' ``hidden_act`` name)."""
    x = inputs["x"]
    device, dtype = x.device, x.dtype
    torch_act = (lambda t: F.gelu(t, approximate="tanh")) if act == ACT_GELU_TANH else F.silu
    if provider == "kernelindex":
        leaves = leaf_copies(inputs, GRAD_INPUTS)
        return Built(lambda: (gated_mlp(leaves["x"], leaves["w_gate"], leaves["w_up"], leaves["w_down"], act),),
                     leaves, f"KernelIndex gated MLP: {blas_label(x.device)} GEMMs + Triton {hidden_act} fwd/bwd",
                     OUTPUT_NAMES)
    if provider == "torch":
        leaves = leaf_copies(inputs, GRAD_INPUTS)
        return Built(lambda: (_torch_mlp(leaves, torch_act),), leaves, f"PyTorch eager F.linear MLP ({hidden_act})",
                     OUTPUT_NAMES)
    x_leaf = x.detach().clone().requires_grad_(True)
    if provider == "huggingface":
        try:
            from transformers.models.llama.modeling_llama import LlamaMLP
        except ImportError:
            leaves = leaf_copies(inputs, GRAD_INPUTS)
            return Built(lambda: (_torch_mlp(leaves, torch_act),), leaves,
                         f"PyTorch equivalent of Transformers LlamaMLP (hidden_act={hidden_act})", OUTPUT_NAMES)
        with torch.device(device):
            module = LlamaMLP(_llama_config(inputs, hidden_act))
        module = _load_linear_weights(module, inputs, device, dtype)
        label = f"Transformers {package_version('transformers')} LlamaMLP (hidden_act={hidden_act})"
        return Built(lambda: (module(x_leaf),), _module_leaves(module, x_leaf), label, OUTPUT_NAMES)
    if provider == "liger":
        cls = liger_attr(x, kernel, liger_class)
        try:
            config = _llama_config(inputs, hidden_act)
        except Exception as exc:  # noqa: BLE001 - Liger's MLP modules take a Transformers config
            raise Unavailable(f"transformers not importable: {exc}") from exc
        with torch.device(device):
            module = cls(config)
        module = _load_linear_weights(module, inputs, device, dtype)
        return Built(lambda: (module(x_leaf),), _module_leaves(module, x_leaf),
                     f"Liger-Kernel {package_version('liger-kernel')} {liger_class}", OUTPUT_NAMES)
    raise Unavailable(f"unknown provider {provider!r} for {kernel}")


def mlp_dims(kernel: str, params) -> tuple[int, int, int]:
    """(tokens, hidden, intermediate) of a gated-MLP workload."""
    s = input_shapes(kernel, params)
    return numel(s["x"]) // s["x"][-1], s["w_up"][1], s["w_up"][0]


def mlp_bytes(kernel: str, params, dtype: str, mode: str) -> int:
    """Fewest bytes: forward reads x and the three weights and writes y; backward reads dy, x and the
    weights and writes dx and the three weight gradients; full reads x, weights, dy once and writes y,
    dx and the weight gradients. Intermediates (gate/up activations) are not counted."""
    s = input_shapes(kernel, params)
    e = BYTES_PER_ELEMENT[dtype]
    xb = numel(s["x"]) * e
    wb = (numel(s["w_gate"]) + numel(s["w_up"]) + numel(s["w_down"])) * e
    fwd = xb + wb + xb
    bwd = xb + xb + wb + xb + wb
    full = xb + wb + xb + xb + xb + wb
    return {"forward": fwd, "backward": bwd, "full": full}[mode]


def mlp_flops(kernel: str, params, mode: str) -> int:
    """GEMM FLOPs: forward 3 GEMMs (2*N*H*I each), backward 6 (dh, dW_down, dgate/dup->dx twice, dW_gate,
    dW_up); elementwise work is left out (under 0.1% here)."""
    tokens, hidden, inter = mlp_dims(kernel, params)
    one = 2 * tokens * hidden * inter
    return {"forward": 3 * one, "backward": 6 * one, "full": 9 * one}[mode]


def mlp_matmul_shapes(kernel: str, params) -> list[tuple[int, int, int]]:
    """(m, n, k) of the GEMM problems a pass runs (T tokens, H hidden, I intermediate): gate and up, or both
    in one; down and the input gradient; the weight gradients over the tokens."""
    tokens, hidden, inter = mlp_dims(kernel, params)
    return [(tokens, inter, hidden), (tokens, 2 * inter, hidden), (tokens, hidden, inter), (inter, hidden, tokens)]
