"""Megatron RMSNorm's rerun adapter: y = x * rsqrt(mean(x^2) + eps) * weight over x [seq, batch, hidden],
Megatron-LM's activation layout.

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_megatron_rms_norm.py``: x drawn from a normal
distribution (the script runs bfloat16 only and records no dtype); the weight (ones upstream) drawn near
one so that its gradient is checked against non-trivial values. The script builds every layer with
eps 1e-6, which its workloads do not record.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from kernels.adapter import Adapter, Built, Unavailable
from kernels.providers import liger_attr, liger_label, version_label
from kernels.tensors import RERUN_BYTES, Draws, input_shapes, module_pass, per_mode

EPS = 1e-6


def _eps(params) -> float:
    return float(params.get("eps", EPS))


def megatron_config() -> SimpleNamespace:
    """The duck-typed TransformerConfig the upstream script hands both Megatron-shaped layers: plain RMSNorm,
    no sequence parallelism, no zero-centred gamma, no persistent or memory-efficient LayerNorm."""
    return SimpleNamespace(
        normalization="RMSNorm",
        sequence_parallel=False,
        layernorm_zero_centered_gamma=False,
        persist_layer_norm=False,
        memory_efficient_layer_norm=False,
    )


class MegatronRMSNorm(Adapter):
    KERNEL = "megatron_rms_norm"
    OUTPUT_NAMES = ("y",)
    GRAD_INPUTS = ("x", "weight")
    REFERENCE_DTYPE = torch.float64

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        d = Draws(self.KERNEL, params, dtype, seed, device)
        return {"x": d.normal("x"), "weight": d.normal("weight", 0.1, 1.0)}

    def reference(self, inputs, params):
        x = inputs["x"]
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + _eps(params)) * inputs["weight"],)

    def _pass(self, module, inputs, label: str) -> Built:
        return module_pass(module, inputs, ("weight",), label, self.OUTPUT_NAMES)

    def _liger(self, provider, inputs, params) -> Built:
        cls = liger_attr(inputs["x"], "megatron", "LigerMegatronRMSNorm", package="liger_kernel",
                         what="liger_kernel.megatron")
        module = cls(config=megatron_config(), hidden_size=inputs["x"].shape[-1], eps=_eps(params))
        return self._pass(module, inputs, liger_label("LigerMegatronRMSNorm", "Triton"))

    def _megatron(self, provider, inputs, params) -> Built:
        try:
            from megatron.core.transformer.torch_norm import WrappedTorchNorm
        except Exception as exc:  # noqa: BLE001 - without megatron-core there is no megatron provider
            raise Unavailable(f"megatron-core not importable: {exc}") from exc
        # WrappedTorchNorm returns a torch.nn.RMSNorm built from the config.
        module = WrappedTorchNorm(config=megatron_config(), hidden_size=inputs["x"].shape[-1], eps=_eps(params))
        return self._pass(module, inputs,
                          f"megatron-core {version_label('megatron-core')} WrappedTorchNorm ({type(module).__name__})")

    def _torch(self, provider, inputs, params) -> Built:
        module = torch.nn.RMSNorm(normalized_shape=inputs["x"].shape[-1], eps=_eps(params))
        return self._pass(module, inputs, f"torch.nn.RMSNorm (PyTorch {torch.__version__})")

    BUILDERS = {"liger": _liger, "megatron": _megatron, "torch": _torch}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward reads x and weight and writes y; backward reads dy, x and weight and writes dx and dweight;
        full reads x, weight, dy once and writes y, dx and dweight. Per-row rstd is not counted."""
        s = input_shapes(self.KERNEL, params)
        e = RERUN_BYTES[dtype]
        xb = s["x"][0] * s["x"][1] * s["x"][2] * e
        wb = s["weight"][0] * e
        return {"forward": 2 * xb + wb, "backward": 3 * xb + 2 * wb, "full": 4 * xb + 2 * wb}[mode]

    def flops(self, params, mode) -> int:
        """Per element: forward about 4 (square, sum, normalize, scale); backward about 8."""
        x = input_shapes(self.KERNEL, params)["x"]
        n = x[0] * x[1] * x[2]
        return per_mode(4 * n, 8 * n, mode)


ADAPTER = MegatronRMSNorm()
