"""Embedding's rerun adapter: y = weight[indices], indices [batch, seq] into a [vocab, dim] table.

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_embedding.py``: ids drawn uniformly from
``[0, vocab)`` and a standard-normal table (``torch.nn.Embedding``'s own initialization).
"""

from __future__ import annotations

import torch

from kernels.adapter import Adapter, Built
from kernels.providers import liger_attr, liger_label, torch_compiled
from kernels.spec import DTYPE_BYTES
from kernels.tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, per_mode


class Embedding(Adapter):
    KERNEL = "embedding"
    OUTPUT_NAMES = ("y",)
    GRAD_INPUTS = ("weight",)
    REFERENCE_DTYPE = torch.float64

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        s = input_shapes(self.KERNEL, params)
        gen = generator(seed, device)
        vocab = s["weight"][0]
        indices = torch.randint(0, vocab, tuple(s["indices"]), generator=gen, device=device, dtype=torch.int64)
        weight = torch.randn(tuple(s["weight"]), generator=gen, device=device, dtype=torch.float32)
        return {"indices": indices, "weight": weight.to(RERUN_DTYPES[dtype])}

    def reference(self, inputs, params):
        return (inputs["weight"][inputs["indices"]],)

    def _lookup(self, module, inputs, label: str, compiled_label: str | None = None) -> Built:
        """A pass of ``module`` holding the drawn table, over the ids; through ``torch_compiled`` when
        ``compiled_label`` names it."""
        indices, weight = inputs["indices"], inputs["weight"]
        module = module.to(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            module.weight.copy_(weight)
        run = module if compiled_label is None else torch_compiled(module, indices)
        return self.built(lambda: (run(indices),), {"weight": module.weight},
                          label if compiled_label is None else compiled_label)

    def _liger(self, provider, inputs, params) -> Built:
        cls = liger_attr(inputs["weight"], "experimental.embedding", "LigerEmbedding")
        return self._lookup(cls(*inputs["weight"].shape), inputs, liger_label("LigerEmbedding", "experimental, Triton"))

    def _torch(self, provider, inputs, params) -> Built:
        compiled = (f"torch.compile(torch.nn.Embedding), default inductor settings (PyTorch {torch.__version__})"
                    if provider == "torch_compile" else None)
        return self._lookup(torch.nn.Embedding(*inputs["weight"].shape), inputs,
                            f"torch.nn.Embedding (PyTorch {torch.__version__}), upstream's {provider} provider", compiled)

    # Upstream's "huggingface" (its first script) and "torch" (its current one) are both eager torch.nn.Embedding.
    BUILDERS = {"liger": _liger, "huggingface": _torch, "torch": _torch, "torch_compile": _torch}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward reads the ids and the looked-up rows and writes y; backward reads the ids and dy and writes
        the whole table's gradient; full reads ids, rows and dy once and writes y and the table's gradient."""
        s = input_shapes(self.KERNEL, params)
        e = RERUN_BYTES[dtype]
        tokens = s["indices"][0] * s["indices"][1]
        ids = tokens * DTYPE_BYTES["int64"]
        rows = tokens * s["weight"][1] * e
        table = s["weight"][0] * s["weight"][1] * e
        return {"forward": ids + 2 * rows, "backward": ids + rows + table, "full": ids + 3 * rows + table}[mode]

    def flops(self, params, mode) -> int:
        """The lookup is a gather (no arithmetic); its backward adds each token's dy row into the table."""
        s = input_shapes(self.KERNEL, params)
        adds = s["indices"][0] * s["indices"][1] * s["weight"][1]
        return per_mode(0, adds, mode)


ADAPTER = Embedding()
