"""Jensen-Shannon divergence's rerun adapter (``kernels._adapter.RerunAdapter``).

JSD_beta(P || Q) = beta * KL(P || M) + (1 - beta) * KL(Q || M), M = beta * P + (1 - beta) * Q, summed over
the vocabulary and averaged over tokens; ``input`` holds log Q (the student, the one gradients flow to),
``target`` log P, both [tokens, vocab]; beta is 0.5 as upstream leaves it.

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_jsd.py``: both are the log-softmax of a
standard-normal draw (float32 upstream, so its runs carry no dtype), ``LigerJSD`` against the script's own
PyTorch module (KL divergences with ``log_target=True`` in float32, loss returned in float32), which this
adapter restates since the script is not an importable package. Upstream's graph also holds the
log-softmax that made ``input``; here ``input`` is the leaf, so only the divergence is measured.
"""

from __future__ import annotations

from importlib.metadata import version

import torch

from kernels._adapter import Built, Unavailable
from kernels._providers import liger_triton_attr
from kernels._tensors import RERUN_BYTES, RERUN_DTYPES, generator, required_input_shapes

KERNEL = "jsd"
PROVIDERS = ("liger", "torch")
IMPLIED: dict[str, str] = {}
OUTPUT_NAMES = ("loss",)
GRAD_INPUTS = ("input",)
DETERMINISTIC_INPUTS = ()
REFERENCE_DTYPE = torch.float64
BETA = 0.5


def _beta(params) -> float:
    return float(params.get("beta", BETA))


def make_inputs(params, dtype, seed, device) -> dict[str, torch.Tensor]:
    s = required_input_shapes(KERNEL, params)
    gen = generator(seed, device)
    td = RERUN_DTYPES[dtype]
    out = {}
    for name in ("input", "target"):
        draw = torch.randn(tuple(s[name]), generator=gen, device=device, dtype=torch.float32)
        out[name] = draw.log_softmax(dim=-1).to(td)
    return out


def reference(inputs, params) -> tuple[torch.Tensor]:
    beta = _beta(params)
    log_q, log_p = inputs["input"], inputs["target"]
    q, p = log_q.exp(), log_p.exp()
    log_m = torch.log(beta * p + (1 - beta) * q)
    per_token = (beta * p * (log_p - log_m) + (1 - beta) * q * (log_q - log_m)).sum(dim=-1)
    return (per_token.sum() / log_q.shape[0],)


class TorchJSD(torch.nn.Module):
    """PyTorch equivalent of upstream benchmark_jsd.py's TorchJSD (no labels): KL divergences of the
    mixture against each distribution with ``log_target=True``, in float32, loss in float32."""

    def __init__(self, beta: float = BETA):
        super().__init__()
        self.beta = beta
        self.kl = torch.nn.KLDivLoss(reduction="none", log_target=True)

    def forward(self, log_q: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
        log_q, log_p = log_q.float(), log_p.float()
        log_m = torch.log(torch.lerp(log_q.exp(), log_p.exp(), self.beta))
        per_token = (self.beta * self.kl(log_m, log_p).sum(dim=-1)
                     + (1 - self.beta) * self.kl(log_m, log_q).sum(dim=-1))
        return (per_token / log_q.shape[0]).sum().float()


def build(provider, inputs, params) -> Built:
    log_q = inputs["input"].detach().clone().requires_grad_(True)
    log_p = inputs["target"]
    beta = _beta(params)
    if provider == "liger":
        loss_fn = liger_triton_attr(log_q, "jsd", "LigerJSD")(beta=beta)
        label = f"Liger-Kernel {version('liger-kernel')} LigerJSD"
    elif provider == "torch":
        loss_fn = TorchJSD(beta=beta)
        label = f"PyTorch {torch.__version__} equivalent of upstream benchmark_jsd.py's TorchJSD"
    else:
        raise Unavailable(f"unknown provider {provider!r} for {KERNEL}")
    return Built(lambda: (loss_fn(log_q, log_p),), {"input": log_q}, label, OUTPUT_NAMES)


def bytes_moved(params, dtype, mode) -> int:
    """Forward: read input and target, write the loss. Backward: read input, target and the loss's
    gradient, write the input's gradient. Full: the inputs once, the loss and the gradient once."""
    tokens, vocab = required_input_shapes(KERNEL, params)["input"]
    e = RERUN_BYTES[dtype]
    one = tokens * vocab * e
    return {"forward": 2 * one + e, "backward": 3 * one + e, "full": 3 * one + 2 * e}[mode]


def flops(params, mode) -> int:
    """Per element: forward 12 (two exps, the mixture's 3 and its log, two differences, two weighted
    products, the sum); backward 4 (the student's term: exp, difference, product, scale)."""
    tokens, vocab = required_input_shapes(KERNEL, params)["input"]
    n = tokens * vocab
    return {"forward": 12 * n, "backward": 4 * n, "full": 16 * n}[mode]


def matmul_shapes(params) -> list[tuple[int, int, int]]:
    return []
