"""Softmax's rerun adapter: softmax over the last dimension of x [rows, cols].

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_softmax.py`` as it stood for its
ingested runs (rows ``M`` = 2048, ``N`` swept, float32 and bfloat16): x drawn from a standard normal,
``LigerSoftmax`` against ``torch.nn.Softmax(dim=-1)``.
"""

from __future__ import annotations

import torch

from kernels.providers import liger_attr, liger_label
from kernels.engines.rowwise import RowwiseAdapter


class Softmax(RowwiseAdapter):
    KERNEL = "softmax"
    # Per element: forward 5 (running max, subtract, exp, sum, divide); backward 4 (dy*y, sum, subtract the
    # sum, multiply by y).
    FLOPS_PER_ELEMENT = (5, 4)

    def reference(self, inputs, params) -> tuple[torch.Tensor]:
        return (torch.softmax(inputs["x"], dim=-1),)

    def _liger(self, provider, inputs, params):
        return self.pass_of(liger_attr(inputs["x"], "softmax", "LigerSoftmax")(), inputs, liger_label("LigerSoftmax"))

    def _torch(self, provider, inputs, params):
        return self.pass_of(torch.nn.Softmax(dim=-1), inputs, f"PyTorch {torch.__version__} torch.nn.Softmax(dim=-1)")

    BUILDERS = {"liger": _liger, "torch": _torch}


ADAPTER = Softmax()
