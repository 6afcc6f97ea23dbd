"""What the RMSNorm and LayerNorm rerun adapters share: the workload's eps, the inputs, Liger's provider and the
cost model (``NormAdapter``)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from kernels.adapter import Adapter, Built
from kernels.providers import liger_attr, liger_label
from kernels.tensors import RERUN_BYTES, Draws, input_shapes, module_pass, numel, per_mode
from kernels.engines.norm.function import DEFAULT_EPS


def workload_eps(params: Mapping[str, object] | None) -> float:
    return float((params or {}).get("eps", DEFAULT_EPS))


class NormAdapter(Adapter):
    """A row norm's adapter: x [rows, hidden] and its per-channel weights (every gradient input after x: the
    weight, and LayerNorm's bias), normalized by KernelIndex's Triton norm, Liger's module ``LIGER`` (module,
    class) and the upstream baselines; ``FLOPS_PER_ELEMENT`` (forward, backward) for the cost model."""

    PROVIDERS = ("kernelindex", "liger", "huggingface")
    OUTPUT_NAMES = ("y",)
    REFERENCE_DTYPE = torch.float64
    LIGER: tuple[str, str]
    FLOPS_PER_ELEMENT: tuple[int, int]

    @property
    def weights(self) -> tuple[str, ...]:
        return self.GRAD_INPUTS[1:]

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        """x normal, the weight near one and the bias near zero, so that their gradients are non-trivial."""
        d = Draws(self.KERNEL, params, dtype, seed, device)
        drawn = {"x": d.normal("x"), "weight": d.normal("weight", 0.1, 1.0)}
        if "bias" in self.weights:
            drawn["bias"] = d.normal("bias", 0.1)
        return drawn

    def _liger(self, provider, inputs, params) -> Built:
        module, name = self.LIGER
        cls = liger_attr(inputs["x"], module, name)
        return module_pass(cls(hidden_size=inputs["x"].shape[-1], eps=workload_eps(params)), inputs, self.weights,
                           liger_label(name), self.OUTPUT_NAMES)

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward reads x and the weights, writes y; backward reads dy, x and the weights, writes dx and the
        weights' gradients; full reads x, the weights and dy once, writes y, dx and the weights' gradients.
        The saved per-row statistics (4-8 bytes a row) are not counted."""
        s = input_shapes(self.KERNEL, params)
        e = RERUN_BYTES[dtype]
        xb = numel(s["x"]) * e
        pb = len(self.weights) * s["x"][-1] * e
        return {"forward": 2 * xb + pb, "backward": 3 * xb + 2 * pb, "full": 4 * xb + 2 * pb}[mode]

    def flops(self, params, mode) -> int:
        n = numel(input_shapes(self.KERNEL, params)["x"])
        forward, backward = self.FLOPS_PER_ELEMENT
        return per_mode(forward * n, backward * n, mode)
