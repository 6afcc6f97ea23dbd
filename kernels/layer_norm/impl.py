"""LayerNorm's rerun adapter: KernelIndex's provider is ``kernels.engines.norm.layer_norm``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.tensors import leaf_copies, module_pass
from kernels.engines.norm import layer_norm
from kernels.engines.norm.rerun import NormAdapter, workload_eps


class LayerNorm(NormAdapter):
    KERNEL = "layer_norm"
    GRAD_INPUTS = ("x", "weight", "bias")
    LIGER = ("layer_norm", "LigerLayerNorm")
    # Forward: mean, centre, square, sum, scale, weight, bias (about 7 per element); backward about 11.
    FLOPS_PER_ELEMENT = (7, 11)

    def reference(self, inputs, params):
        eps = workload_eps(params)
        x = inputs["x"]
        mean = x.mean(-1, keepdim=True)
        var = (x - mean).pow(2).mean(-1, keepdim=True)
        return ((x - mean) * torch.rsqrt(var + eps) * inputs["weight"] + inputs["bias"],)

    def _kernelindex(self, provider, inputs, params):
        lv, eps = leaf_copies(inputs, self.GRAD_INPUTS), workload_eps(params)
        return self.built(lambda: (layer_norm(lv["x"], lv["weight"], lv["bias"], eps),), lv,
                          "KernelIndex Triton LayerNorm (fwd+bwd)")

    def _torch(self, provider, inputs, params):
        lv, eps = leaf_copies(inputs, self.GRAD_INPUTS), workload_eps(params)
        hidden = inputs["x"].shape[-1]
        return self.built(lambda: (F.layer_norm(lv["x"], (hidden,), lv["weight"], lv["bias"], eps),), lv,
                          f"PyTorch {torch.__version__} F.layer_norm")

    def _huggingface(self, provider, inputs, params):
        # The upstream benchmark's "huggingface" LayerNorm is torch.nn.LayerNorm.
        module = torch.nn.LayerNorm(inputs["x"].shape[-1], eps=workload_eps(params))
        label = f"torch.nn.LayerNorm (PyTorch {torch.__version__}), the upstream benchmark's huggingface provider"
        return module_pass(module, inputs, self.weights, label, self.OUTPUT_NAMES)

    # "torch" is built for the CPU tests; upstream's LayerNorm runs compare the other three.
    BUILDERS = {"kernelindex": _kernelindex, "liger": NormAdapter._liger, "huggingface": _huggingface,
                "torch": _torch}


ADAPTER = LayerNorm()
