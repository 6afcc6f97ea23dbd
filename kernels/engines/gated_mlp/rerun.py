"""What the gated-MLP rerun adapters share (GeGLU and SwiGLU, and the tiled ones): inputs, the reference, the
providers and the cost model of down(act(gate(x)) * up(x)) (``GatedMLPAdapter``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from kernels.adapter import Adapter, Built, Unavailable
from kernels.providers import liger_attr, liger_label, version_label
from kernels.tensors import RERUN_BYTES, Draws, input_shapes, leaf, leaf_copies, numel
from kernels.engines.gated_mlp.activation import ACT_GELU_TANH
from kernels.engines.gated_mlp.function import blas_label, gated_mlp


def gelu_tanh(a: torch.Tensor) -> torch.Tensor:
    """GELU's tanh approximation, written out."""
    return 0.5 * a * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a * a * a)))


def torch_activation(act: int):
    """PyTorch's function for a gated-MLP activation (``ACT_GELU_TANH`` or ``ACT_SILU``)."""
    return (lambda t: F.gelu(t, approximate="tanh")) if act == ACT_GELU_TANH else F.silu


def torch_mlp(leaves, act: int):
    x = leaves["x"]
    return F.linear(torch_activation(act)(F.linear(x, leaves["w_gate"])) * F.linear(x, leaves["w_up"]),
                    leaves["w_down"])


def llama_config(inputs, hidden_act: str):
    """Transformers' LlamaConfig of the inputs' MLP sizes, with ``hidden_act``."""
    from transformers.models.llama.configuration_llama import LlamaConfig

    return LlamaConfig(hidden_size=inputs["w_up"].shape[1], intermediate_size=inputs["w_up"].shape[0],
                       hidden_act=hidden_act)


def projections(module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gate, up and down projection weights of a Llama-shaped MLP module."""
    return module.gate_proj.weight, module.up_proj.weight, module.down_proj.weight


def loaded(module, inputs):
    """``module`` on the inputs' device and dtype, its projections holding the workload's weights."""
    x = inputs["x"]
    module = module.to(device=x.device, dtype=x.dtype)
    with torch.no_grad():
        for weight, name in zip(projections(module), ("w_gate", "w_up", "w_down")):
            weight.copy_(inputs[name])
    return module


def module_leaves(module, x_leaf) -> dict[str, torch.Tensor]:
    wg, wu, wd = projections(module)
    return {"x": x_leaf, "w_gate": wg, "w_up": wu, "w_down": wd}


@dataclass(frozen=True, eq=False)
class GatedMLPAdapter(Adapter):
    """A gated MLP's adapter: ``IMPLIED`` holds Transformers' ``hidden_act`` name of the activation (and what
    else the kernel fixes), ``ACTIVATION`` is ``ACT_GELU_TANH`` or ``ACT_SILU``, ``LIGER`` the module and class
    of Liger's untiled MLP under ``liger_kernel.transformers``."""

    KERNEL: str
    IMPLIED: Mapping[str, str] = field()  # a field with no default, not the base's empty one
    ACTIVATION: int
    LIGER: tuple[str, str]
    OUTPUT_NAMES = ("y",)
    GRAD_INPUTS = ("x", "w_gate", "w_up", "w_down")
    # GEMMs at the rerun sizes (up to 32k tokens x 4096 x 14336) in float64 take too long; the harness turns
    # TF32 off for the reference.
    REFERENCE_DTYPE = torch.float32

    @property
    def hidden_act(self) -> str:
        return self.IMPLIED["hidden_act"]

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        """x, and the three weights scaled 1/sqrt(fan_in)."""
        d = Draws(self.KERNEL, params, dtype, seed, device)
        inter, hidden = d.shapes["w_up"]
        return {
            "x": d.normal("x"),
            "w_gate": d.normal("w_gate", 1.0 / math.sqrt(hidden)),
            "w_up": d.normal("w_up", 1.0 / math.sqrt(hidden)),
            "w_down": d.normal("w_down", 1.0 / math.sqrt(inter)),
        }

    def reference(self, inputs, params) -> tuple[torch.Tensor]:
        x, wg, wu, wd = inputs["x"], inputs["w_gate"], inputs["w_up"], inputs["w_down"]
        g = F.linear(x, wg)
        act = gelu_tanh(g) if self.ACTIVATION == ACT_GELU_TANH else g * torch.sigmoid(g)
        return (F.linear(act * F.linear(x, wu), wd),)

    def _kernelindex(self, provider, inputs, params) -> Built:
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        return self.built(
            lambda: (gated_mlp(leaves["x"], leaves["w_gate"], leaves["w_up"], leaves["w_down"], self.ACTIVATION),),
            leaves, f"KernelIndex gated MLP: {blas_label(inputs['x'].device)} GEMMs + Triton {self.hidden_act} fwd/bwd")

    def _huggingface(self, provider, inputs, params) -> Built:
        try:
            from transformers.models.llama.modeling_llama import LlamaMLP
        except ImportError:
            leaves = leaf_copies(inputs, self.GRAD_INPUTS)
            return self.built(lambda: (torch_mlp(leaves, self.ACTIVATION),), leaves,
                              f"PyTorch equivalent of Transformers LlamaMLP (hidden_act={self.hidden_act})")
        with torch.device(inputs["x"].device):
            module = LlamaMLP(llama_config(inputs, self.hidden_act))
        module, x = loaded(module, inputs), leaf(inputs["x"])
        label = f"Transformers {version_label('transformers')} LlamaMLP (hidden_act={self.hidden_act})"
        return self.built(lambda: (module(x),), module_leaves(module, x), label)

    def _liger(self, provider, inputs, params) -> Built:
        module_name, name = self.LIGER
        cls = liger_attr(inputs["x"], module_name, name)
        try:
            config = llama_config(inputs, self.hidden_act)
        except Exception as exc:  # noqa: BLE001 - Liger's MLP modules take a Transformers config
            raise Unavailable(f"transformers not importable: {exc}") from exc
        with torch.device(inputs["x"].device):
            module = cls(config)
        module, x = loaded(module, inputs), leaf(inputs["x"])
        return self.built(lambda: (module(x),), module_leaves(module, x), liger_label(name))

    BUILDERS = {"kernelindex": _kernelindex, "liger": _liger, "huggingface": _huggingface}

    def dims(self, params) -> tuple[int, int, int]:
        """(tokens, hidden, intermediate) of a workload."""
        s = input_shapes(self.KERNEL, params)
        return numel(s["x"]) // s["x"][-1], s["w_up"][1], s["w_up"][0]

    def bytes_moved(self, params, dtype, mode) -> int:
        """Fewest bytes: forward reads x and the three weights and writes y; backward reads dy, x and the
        weights and writes dx and the three weight gradients; full reads x, weights, dy once and writes y,
        dx and the weight gradients. Intermediates (gate/up activations) are not counted."""
        s = input_shapes(self.KERNEL, params)
        e = RERUN_BYTES[dtype]
        xb = numel(s["x"]) * e
        wb = (numel(s["w_gate"]) + numel(s["w_up"]) + numel(s["w_down"])) * e
        fwd = xb + wb + xb
        bwd = xb + xb + wb + xb + wb
        full = xb + wb + xb + xb + xb + wb
        return {"forward": fwd, "backward": bwd, "full": full}[mode]

    def flops(self, params, mode) -> int:
        """GEMM FLOPs: forward 3 GEMMs (2*N*H*I each), backward 6 (dh, dW_down, dgate/dup->dx twice, dW_gate,
        dW_up); elementwise work is left out (under 0.1% here)."""
        tokens, hidden, inter = self.dims(params)
        one = 2 * tokens * hidden * inter
        return {"forward": 3 * one, "backward": 6 * one, "full": 9 * one}[mode]

    def matmul_shapes(self, params) -> list[tuple[int, int, int]]:
        """(m, n, k) of the GEMM problems a pass runs (T tokens, H hidden, I intermediate): gate and up, or
        both in one; down and the input gradient; the weight gradients over the tokens."""
        tokens, hidden, inter = self.dims(params)
        return [(tokens, inter, hidden), (tokens, 2 * inter, hidden), (tokens, hidden, inter),
                (inter, hidden, tokens)]
