"""RMSNorm's rerun adapter: KernelIndex's provider is ``kernels.engines.norm.rms_norm``."""

from __future__ import annotations

import torch

from kernels.providers import version_label
from kernels.tensors import leaf_copies, module_pass
from kernels.engines.norm import rms_norm
from kernels.engines.norm.rerun import NormAdapter, workload_eps


def torch_llama_rms_norm(x, w, eps):
    """PyTorch equivalent of Transformers LlamaRMSNorm.forward."""
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


class RMSNorm(NormAdapter):
    KERNEL = "rms_norm"
    GRAD_INPUTS = ("x", "weight")
    LIGER = ("rms_norm", "LigerRMSNorm")
    # Forward: square, sum, scale, weight; backward about 8 per element.
    FLOPS_PER_ELEMENT = (4, 8)

    def reference(self, inputs, params):
        x, w = inputs["x"], inputs["weight"]
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + workload_eps(params)) * w,)

    def _kernelindex(self, provider, inputs, params):
        leaves, eps = leaf_copies(inputs, self.GRAD_INPUTS), workload_eps(params)
        return self.built(lambda: (rms_norm(leaves["x"], leaves["weight"], eps),), leaves,
                          "KernelIndex Triton RMSNorm (fwd+bwd)")

    def _torch(self, provider, inputs, params, label="PyTorch eager RMSNorm (LlamaRMSNorm arithmetic)"):
        leaves, eps = leaf_copies(inputs, self.GRAD_INPUTS), workload_eps(params)
        return self.built(lambda: (torch_llama_rms_norm(leaves["x"], leaves["weight"], eps),), leaves, label)

    def _huggingface(self, provider, inputs, params):
        try:
            from transformers.models.llama.modeling_llama import LlamaRMSNorm
        except ImportError:
            return self._torch(provider, inputs, params, "PyTorch equivalent of Transformers LlamaRMSNorm")
        module = LlamaRMSNorm(inputs["x"].shape[-1], eps=workload_eps(params))
        return module_pass(module, inputs, self.weights, f"Transformers {version_label('transformers')} LlamaRMSNorm",
                           self.OUTPUT_NAMES)

    # "torch" is built for the CPU tests; upstream's RMSNorm runs compare the other three.
    BUILDERS = {"kernelindex": _kernelindex, "liger": NormAdapter._liger, "huggingface": _huggingface,
                "torch": _torch}


ADAPTER = RMSNorm()
