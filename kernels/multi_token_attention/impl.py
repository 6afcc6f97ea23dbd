"""Multi-token attention's rerun adapter (``kernels._adapter.RerunAdapter``):
out = mask_0(conv2d(softmax(mask_-inf(scores)))), scores [batch, C_in, seq, seq], weight
[C_out, C_in // groups, kernel, kernel], the masks causal (keys after the query masked), stride 1,
padding kernel // 2.

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_multi_token_attention.py``: scores drawn
from a standard normal; the weight as ``LigerMultiTokenAttention.reset_parameters`` draws it
(``kaiming_uniform_(a=sqrt(5))``: uniform within 1/sqrt(fan_in)), which upstream copies into its PyTorch
module; the bias, where the workload has one, zeros as that initialization leaves it. The spec's inputs
are the scores and the weight, so the bias is built with each provider, takes gradients as upstream's
parameter does, and is not compared.

Providers: ``liger`` is ``LigerMultiTokenAttention`` (Triton, unless ``LIGER_KERNEL_IMPL`` selects
another implementation); ``liger_triton`` and ``liger_cutile`` are the names upstream's
``run_cutile_compare.py`` gives that module run with Liger's Triton kernels and with its cuTile ones
(``LIGER_KERNEL_IMPL=cutile``; CUDA and ``cuda.tile`` only), here the module's parameters through each
implementation's autograd function directly; ``torch`` restates the script's own
``TorchMultiTokenAttention`` (the script is not an importable package).

``kernels.sparse_multi_token_attention.impl`` shares the inputs, the convolution and the floors here.
"""

from __future__ import annotations

import importlib
import math

import torch
import torch.nn.functional as F

from kernels._adapter import Built, Unavailable
from kernels._providers import LIGER_TRITON_NEEDS_ON_CPU, liger_triton_attr, version_label
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, numel, randn, required_input_shapes

KERNEL = "multi_token_attention"
PROVIDERS = ("liger", "liger_triton", "liger_cutile", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("out",)
GRAD_INPUTS = ("scores", "weight")
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64
# The masked-out value upstream's PyTorch modules and Liger's kernels write before the softmax.
MASK_VALUE = -1e9
CUTILE_MODULE = "liger_kernel.ops.cutile.ops.multi_token_attention"


def conv_config(params) -> tuple[int, int, bool]:
    """(kernel, groups, bias) of a workload; bias unless the workload says otherwise, as upstream runs."""
    return int(params["kernel"]), int(params.get("groups", 1)), bool(params.get("bias", True))


def draw_inputs(kernel: str, params, dtype, seed, device) -> dict[str, torch.Tensor]:
    """Scores from a standard normal and the weight uniform within 1/sqrt(fan_in), as
    ``kaiming_uniform_(a=sqrt(5))`` draws it; drawn in float32 then cast, as upstream casts its module."""
    s = required_input_shapes(kernel, params)
    gen = generator(seed, device)
    td = RERUN_DTYPES[dtype]
    scores = randn(s["scores"], td, gen, device)
    _, c_in_per_group, kh, kw = s["weight"]
    bound = 1.0 / math.sqrt(c_in_per_group * kh * kw)
    weight = torch.rand(s["weight"], generator=gen, device=device, dtype=torch.float32)
    return {"scores": scores, "weight": ((2 * weight - 1) * bound).to(td)}


def causal_mask(seq: int, device) -> torch.Tensor:
    """True where the key is at or before the query."""
    return torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=device)).view(1, 1, seq, seq)


def masked_conv(probs, weight, bias, params) -> torch.Tensor:
    """conv2d of the probabilities (stride 1, padding kernel // 2), the future positions zeroed."""
    kernel, groups, _ = conv_config(params)
    out = F.conv2d(probs, weight, bias, stride=1, padding=kernel // 2, groups=groups)
    return out.masked_fill(~causal_mask(probs.shape[-1], probs.device), 0.0)


def zero_bias(inputs, params) -> torch.Tensor | None:
    """The bias upstream's modules start with: zeros, a leaf that takes gradients; None without bias."""
    _, _, bias = conv_config(params)
    if not bias:
        return None
    weight = inputs["weight"]
    return torch.zeros(weight.shape[0], dtype=weight.dtype, device=weight.device, requires_grad=True)


def liger_module(inputs, params, sparse: bool):
    """``LigerMultiTokenAttention`` with the inputs' weight and a zero bias; Unavailable where it cannot run."""
    scores, weight = inputs["scores"], inputs["weight"]
    cls = liger_triton_attr(scores, "multi_token_attention", "LigerMultiTokenAttention", LIGER_TRITON_NEEDS_ON_CPU)
    kernel, groups, bias = conv_config(params)
    module = cls(
        in_channels=scores.shape[1],
        out_channels=weight.shape[0],
        kernel_size=kernel,
        stride=1,
        padding=kernel // 2,
        dilation=1,
        groups=groups,
        bias=bias,
        sparse=sparse,
    ).to(device=scores.device, dtype=scores.dtype)
    with torch.no_grad():
        module.weight.copy_(weight)
        if module.bias is not None:
            module.bias.zero_()
    return module


def module_built(forward, weight, inputs, label: str) -> Built:
    """A pass of ``forward`` over a fresh leaf copy of the scores, the module's ``weight`` standing for the
    weight input."""
    scores = inputs["scores"].detach().clone().requires_grad_(True)
    return Built(lambda: (forward(scores),), {"scores": scores, "weight": weight}, label, OUTPUT_NAMES)


def reference(inputs, params):
    scores, weight = inputs["scores"], inputs["weight"]
    mask = causal_mask(scores.shape[-1], scores.device)
    probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return (masked_conv(probs, weight, None, params),)


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


def function_forward(function, inputs, params, sparse: bool):
    """(forward, weight): a ``LigerMultiTokenAttention``'s parameters through ``function``, one of Liger's
    multi-token attention autograd functions named directly, so that ``LIGER_KERNEL_IMPL`` does not pick it."""
    m = liger_module(inputs, params, sparse=sparse)

    def forward(scores):
        return function.apply(scores, m.weight, m.bias, m.stride, m.padding, m.dilation, m.groups, m.sparse)

    return forward, m.weight


def triton_function(scores):
    """Liger's Triton multi-token attention function, whatever ``LIGER_KERNEL_IMPL`` says."""
    return liger_triton_attr(
        scores,
        "multi_token_attention",
        "LigerMultiTokenAttentionFunction",
        LIGER_TRITON_NEEDS_ON_CPU,
        package="liger_kernel.ops",
    )


def _cutile_function(scores):
    if not scores.is_cuda:
        raise Unavailable("liger_kernel's cuTile kernels need a CUDA device")
    try:
        return importlib.import_module(CUTILE_MODULE).LigerMultiTokenAttentionFunction
    except Exception as exc:  # noqa: BLE001 - any import-time failure makes the provider unavailable
        raise Unavailable(f"liger_kernel's cuTile multi-token attention not importable: {exc}") from exc


def build(provider, inputs, params) -> Built:
    version = version_label("liger-kernel")
    scores = inputs["scores"]
    if provider == "liger":
        module = liger_module(inputs, params, sparse=False)
        label = f"Liger-Kernel {version} LigerMultiTokenAttention"
        return module_built(module, module.weight, inputs, label)
    if provider == "liger_triton":
        forward, weight = function_forward(triton_function(scores), inputs, params, sparse=False)
        label = f"Liger-Kernel {version} LigerMultiTokenAttention's Triton function"
        return module_built(forward, weight, inputs, label)
    if provider == "liger_cutile":
        forward, weight = function_forward(_cutile_function(scores), inputs, params, sparse=False)
        label = f"Liger-Kernel {version} LigerMultiTokenAttention's cuTile function"
        return module_built(forward, weight, inputs, label)
    if provider == "torch":
        scores = inputs["scores"].detach().clone().requires_grad_(True)
        weight = inputs["weight"].detach().clone().requires_grad_(True)
        bias = zero_bias(inputs, params)
        label = (f"PyTorch {torch.__version__} equivalent of upstream benchmark_multi_token_attention.py's "
                 "TorchMultiTokenAttention")
        return Built(lambda: (torch_multi_token_attention(scores, weight, bias, params),),
                     {"scores": scores, "weight": weight}, label, OUTPUT_NAMES)
    raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")


def conv_bytes(kernel: str, params, dtype, mode) -> int:
    """Forward reads scores, weight, bias and writes out; backward reads dout, the scores (the
    probabilities recomputed from them) and the weight, and writes dscores, dweight, dbias; full reads
    scores, weight, bias, dout once and writes out, dscores, dweight, dbias."""
    s = required_input_shapes(kernel, params)
    e = RERUN_BYTES[dtype]
    scores, weight = numel(s["scores"]) * e, numel(s["weight"]) * e
    batch, _, seq, _ = s["scores"]
    out = batch * s["weight"][0] * seq * seq * e
    bias = s["weight"][0] * e if conv_config(params)[2] else 0
    return {
        "forward": scores + weight + bias + out,
        "backward": out + scores + weight + scores + weight + bias,
        "full": scores + weight + bias + out + out + scores + weight + bias,
    }[mode]


def conv_flops(kernel: str, params, mode, activation_forward: int, activation_backward: int) -> int:
    """The dense convolution over the whole [seq, seq] map, as the operation defines it: 2 * (C_in / groups)
    * kernel^2 per output element forward, twice that backward (dscores and dweight), plus one add per
    output element for the bias and its gradient; and, per score element, ``activation_forward`` and
    ``activation_backward`` for the masked activation."""
    s = required_input_shapes(kernel, params)
    c_out, c_in_per_group, kh, kw = s["weight"]
    batch, _, seq, _ = s["scores"]
    outputs = batch * c_out * seq * seq
    conv = 2 * c_in_per_group * kh * kw * outputs
    bias = outputs if conv_config(params)[2] else 0
    n = numel(s["scores"])
    fwd = conv + bias + activation_forward * n
    bwd = 2 * conv + bias + activation_backward * n
    return {"forward": fwd, "backward": bwd, "full": fwd + bwd}[mode]


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    return draw_inputs(KERNEL, params, dtype, seed, device)


def bytes_moved(params, dtype, mode) -> int:
    return conv_bytes(KERNEL, params, dtype, mode)


def flops(params, mode) -> int:
    """``conv_flops`` with the softmax at 5 per score element forward (max, subtract, exp, sum, divide)
    and 4 backward (product, row sum, subtract, product)."""
    return conv_flops(KERNEL, params, mode, 5, 4)


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    """None: a convolution C_in / groups * kernel^2 deep (36 upstream) is bound by the [seq, seq] maps it
    reads and writes, not by a GEMM rate."""
    return []
