"""Multi-token attention's rerun adapter: out = mask_0(conv2d(softmax(mask_-inf(scores)))); the inputs, the
convolution and the cost model are ``kernels.engines.multi_token_attention``'s.

Providers: ``liger`` is ``LigerMultiTokenAttention`` (Triton, unless ``LIGER_KERNEL_IMPL`` selects
another implementation); ``liger_triton`` and ``liger_cutile`` are the names upstream's
``run_cutile_compare.py`` gives that module run with Liger's Triton kernels and with its cuTile ones
(``LIGER_KERNEL_IMPL=cutile``; CUDA and ``cuda.tile`` only), here the module's parameters through each
implementation's autograd function directly; ``torch`` restates the script's own
``TorchMultiTokenAttention`` (the script is not an importable package).
"""

from __future__ import annotations

import importlib

import torch
import torch.nn.functional as F

from kernels.adapter import Built, Unavailable
from kernels.providers import liger_attr, liger_label
from kernels.engines.multi_token_attention import MASK_VALUE, MultiTokenAttentionAdapter, causal_mask, conv_config

CUTILE_MODULE = "liger_kernel.ops.cutile.ops.multi_token_attention"


def torch_multi_token_attention(scores, weight, bias, params) -> torch.Tensor:
    """Upstream's ``TorchMultiTokenAttention.forward``: the mask value and zero as tensors of the scores'
    dtype, softmax and convolution in that dtype."""
    kernel, groups, _ = conv_config(params)
    mask = causal_mask(scores.shape[-1], scores.device)
    inf = torch.tensor(MASK_VALUE, device=scores.device, dtype=scores.dtype)
    zero = torch.tensor(0.0, device=scores.device, dtype=scores.dtype)
    probs = F.softmax(scores.masked_fill(~mask, inf), dim=-1)
    out = F.conv2d(probs, weight, bias, stride=1, padding=kernel // 2, groups=groups)
    return out.masked_fill(~mask, zero)


def triton_function(scores):
    """Liger's Triton multi-token attention function, whatever ``LIGER_KERNEL_IMPL`` says."""
    return liger_attr(scores, "multi_token_attention", "LigerMultiTokenAttentionFunction", package="liger_kernel.ops")


def cutile_function(scores):
    """Liger's cuTile multi-token attention function; Unavailable off CUDA or where it cannot be imported."""
    if not scores.is_cuda:
        raise Unavailable("liger_kernel's cuTile kernels need a CUDA device")
    try:
        return importlib.import_module(CUTILE_MODULE).LigerMultiTokenAttentionFunction
    except Exception as exc:  # noqa: BLE001 - any import-time failure makes the provider unavailable
        raise Unavailable(f"liger_kernel's cuTile multi-token attention not importable: {exc}") from exc


class MultiTokenAttention(MultiTokenAttentionAdapter):
    KERNEL = "multi_token_attention"
    # The softmax: 5 per score element forward (max, subtract, exp, sum, divide), 4 backward (product, row
    # sum, subtract, product).
    ACTIVATION_FLOPS = (5, 4)

    def activation(self, scores, mask):
        """The softmax over each query's keys, the future masked to -inf."""
        return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)

    def _liger(self, provider, inputs, params) -> Built:
        module = self.liger_module(inputs, params, sparse=False)
        return self.module_built(module, module.weight, inputs, liger_label("LigerMultiTokenAttention"))

    def _function(self, function, inputs, params, label: str) -> Built:
        """A ``LigerMultiTokenAttention``'s parameters through ``function``, one of Liger's multi-token
        attention autograd functions named directly, so that ``LIGER_KERNEL_IMPL`` does not pick it."""
        m = self.liger_module(inputs, params, sparse=False)

        def forward(scores):
            return function.apply(scores, m.weight, m.bias, m.stride, m.padding, m.dilation, m.groups, m.sparse)

        return self.module_built(forward, m.weight, inputs, label)

    def _liger_triton(self, provider, inputs, params) -> Built:
        return self._function(triton_function(inputs["scores"]), inputs, params,
                              liger_label("LigerMultiTokenAttention's Triton function"))

    def _liger_cutile(self, provider, inputs, params) -> Built:
        return self._function(cutile_function(inputs["scores"]), inputs, params,
                              liger_label("LigerMultiTokenAttention's cuTile function"))

    def _torch(self, provider, inputs, params) -> Built:
        return self.torch_built(torch_multi_token_attention, inputs, params,
                                "benchmark_multi_token_attention.py's TorchMultiTokenAttention")

    BUILDERS = {"liger": _liger, "liger_triton": _liger_triton, "liger_cutile": _liger_cutile, "torch": _torch}


ADAPTER = MultiTokenAttention()
