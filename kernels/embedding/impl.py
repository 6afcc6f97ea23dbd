"""Embedding's rerun adapter (``kernels._adapter.RerunAdapter``): y = weight[indices], indices [batch, seq]
into a [vocab, dim] table.

Inputs follow Liger-Kernel's ``benchmark/scripts/benchmark_embedding.py``: ids drawn uniformly from
``[0, vocab)`` and a standard-normal table (``torch.nn.Embedding``'s own initialization).
"""

from __future__ import annotations

import torch

from kernels._adapter import Built, Unavailable
from kernels._providers import LIGER_TRITON_NEEDS_ON_CPU, liger_triton_attr, torch_compiled, version_label
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes

KERNEL = "embedding"
# Upstream's "huggingface" (its first script) and "torch" (its current one) are both eager torch.nn.Embedding.
PROVIDERS = ("liger", "huggingface", "torch", "torch_compile")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("y",)
GRAD_INPUTS = ("weight",)
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64
INDEX_BYTES = 8


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = input_shapes(KERNEL, params)
    gen = generator(seed, device)
    vocab = s["weight"][0]
    indices = torch.randint(0, vocab, tuple(s["indices"]), generator=gen, device=device, dtype=torch.int64)
    weight = torch.randn(tuple(s["weight"]), generator=gen, device=device, dtype=torch.float32)
    return {"indices": indices, "weight": weight.to(RERUN_DTYPES[dtype])}


def reference(inputs, params):
    return (inputs["weight"][inputs["indices"]],)


def build(provider, inputs, params) -> Built:
    indices, weight = inputs["indices"], inputs["weight"]
    vocab, dim = weight.shape
    if provider == "liger":
        liger_embedding = liger_triton_attr(weight, "experimental.embedding", "LigerEmbedding",
                                            LIGER_TRITON_NEEDS_ON_CPU)
        module = liger_embedding(vocab, dim)
        label = f"Liger-Kernel {version_label('liger-kernel')} LigerEmbedding (experimental, Triton)"
    elif provider in ("huggingface", "torch", "torch_compile"):
        module = torch.nn.Embedding(vocab, dim)
        label = f"torch.nn.Embedding (PyTorch {torch.__version__}), upstream's {provider} provider"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    module = module.to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        module.weight.copy_(weight)
    run = module
    if provider == "torch_compile":
        run = torch_compiled(module, indices)
        label = f"torch.compile(torch.nn.Embedding), default inductor settings (PyTorch {torch.__version__})"
    return Built(lambda: (run(indices),), {"weight": module.weight}, label, OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    """Forward reads the ids and the looked-up rows and writes y; backward reads the ids and dy and writes
    the whole table's gradient; full reads ids, rows and dy once and writes y and the table's gradient."""
    s = input_shapes(KERNEL, params)
    e = RERUN_BYTES[dtype]
    tokens = s["indices"][0] * s["indices"][1]
    ids = tokens * INDEX_BYTES
    rows = tokens * s["weight"][1] * e
    table = s["weight"][0] * s["weight"][1] * e
    return {"forward": ids + 2 * rows, "backward": ids + rows + table, "full": ids + 3 * rows + table}[mode]


def flops(params, mode) -> int:
    """The lookup is a gather (no arithmetic); its backward adds each token's dy row into the table."""
    s = input_shapes(KERNEL, params)
    adds = s["indices"][0] * s["indices"][1] * s["weight"][1]
    return {"forward": 0, "backward": adds, "full": adds}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
