"""The rerun adapter of the fused linear GRPO loss at one importance-sampling level ("token": GRPO,
"sequence": GSPO); ``kernels/fused_linear_grpo_loss_{token,sequence}/impl.py`` bind it.

Workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_grpo_loss.py``, which times
``LigerLMHeadGRPO`` (``liger``: ``LigerFusedLinearGRPOLoss``) against ``TorchLMHeadGRPO`` (``torch``), both
from Liger's ``test/chunked_loss/test_grpo_loss.py`` at their defaults: loss type "bnpo", beta 0.1, epsilon
0.2 either side, temperature 1, no bias, a reference model, no old log-probabilities (the ratio is taken
against the detached current ones) and the script's ``importance_sampling_level``.

Their specs give the input shapes (``kernels.shapes.grpo``) for the reruns only: ``x`` and
``ref_input`` [batch, seq, hidden] (the policy's and the reference model's hidden states, standard normal),
``weight`` and ``ref_weight`` [vocab, hidden] (``torch.nn.Linear``'s initialization, as the modules keep
them), ``selected_token_ids`` int64 [batch, seq] uniform over the vocabulary, ``attention_mask`` float32
[batch, seq] all ones (the script's ``torch.ones``, the same for every seed) and ``advantages`` [batch]
standard normal. Gradients are taken for ``x`` and ``weight``: the reference head runs without them.
Upstream builds each provider's module, and so its weights, afresh; here both providers get the same draw.

With no old log-probabilities every importance ratio is exactly 1, so on these inputs the two levels give
the same loss and, whatever the mask, the same gradients (the sequence ratio's mean over a sequence's
tokens undoes its count); they differ in the arithmetic that gets there, which is what the two families
time.

The reference runs in float32 (TF32 off): at the rerun sizes (up to 16384 rows, vocab 128256, two heads)
float64 logits would not fit beside their log-softmax, and float32 is far more precise than the bfloat16
passes it checks. It is ``grpo_loss``, the ``torch`` provider's arithmetic, on float32 inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kernels.adapter import Built
from kernels.spec import DTYPE_BYTES
from kernels.tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, leaf_copies
from kernels.engines.lm_head import LMHeadAdapter, chunked_label, compiled_on, liger_chunked_loss, linear_weight

LEVELS = ("token", "sequence")
LOSS_TYPE = "bnpo"
BETA = 0.1
EPSILON_LOW = 0.2
EPSILON_HIGH = 0.2
TEMPERATURE = 1.0


def selected_logps(
    x: torch.Tensor,
    weight: torch.Tensor,
    selected_token_ids: torch.Tensor,
) -> torch.Tensor:
    """Log-probabilities (batch, seq) of the selected tokens: logits x @ weight.T in the input dtype, the
    log-softmax taken in float32."""
    logits = x @ weight.t()
    if TEMPERATURE != 1.0:
        logits = logits / TEMPERATURE
    log_probs = F.log_softmax(logits.float(), dim=-1)
    return log_probs.gather(dim=-1, index=selected_token_ids.unsqueeze(-1)).squeeze(-1)


def grpo_loss(
    x: torch.Tensor,
    weight: torch.Tensor,
    selected_token_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    advantages: torch.Tensor,
    ref_input: torch.Tensor,
    ref_weight: torch.Tensor,
    level: str,
) -> torch.Tensor:
    """``TorchLMHeadGRPO.forward``'s loss at the script's settings: the clipped importance-weighted advantage
    plus beta times the k3 estimate of KL(policy || reference), per token, averaged over the unmasked tokens
    of the batch ("bnpo"). The importance weight is exp(logp - logp.detach()) per token ("token") or the
    exponential of its masked mean over each sequence ("sequence"): 1 in value, but not in gradient."""
    logps = selected_logps(x, weight, selected_token_ids)
    with torch.no_grad():
        ref_logps = selected_logps(ref_input, ref_weight, selected_token_ids)
    mask = attention_mask.to(logps.dtype)
    log_ratio = logps - logps.detach()
    if level == "token":
        log_weights = log_ratio
    elif level == "sequence":
        log_weights = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    else:
        raise ValueError(f"unknown importance sampling level {level!r}; expected one of {LEVELS}")
    coef = torch.exp(log_weights)
    clipped = torch.clamp(coef, 1 - EPSILON_LOW, 1 + EPSILON_HIGH)
    adv = advantages.unsqueeze(1)
    per_token = -torch.min(coef * adv, clipped * adv)
    ref_logps = ref_logps.float()
    per_token = per_token + BETA * (torch.exp(ref_logps - logps) - (ref_logps - logps) - 1.0)
    return (per_token * mask).sum() / mask.sum().clamp(min=1.0)


@dataclass(frozen=True)
class GRPOAdapter(LMHeadAdapter):
    """The adapter of the GRPO loss at ``level``. A workload's ``importance_sampling_level``, where it names
    one, must be ``level``."""

    GRAD_INPUTS = ("x", "weight")
    DETERMINISTIC_INPUTS = ("attention_mask",)
    # Log-softmax (max, exp, sum, log) and the gather a logit forward, for each head; its gradient backward.
    FLOPS_PER_LOGIT = (4, 2)

    KERNEL: str
    level: str

    def __post_init__(self):
        if self.level not in LEVELS:
            raise ValueError(f"{self.KERNEL}: unknown importance sampling level {self.level!r}; "
                             f"expected one of {LEVELS}")

    def dims(self, params) -> tuple[int, int, int, int]:
        """(batch, seq, hidden, vocab) of a workload; ValueError where its level is not this family's."""
        named = params.get("importance_sampling_level", self.level)
        if named != self.level:
            raise ValueError(f"{self.KERNEL}: importance_sampling_level {named!r}, expected {self.level!r}")
        return int(params["batch"]), int(params["seq"]), int(params["hidden"]), int(params["vocab"])

    def input_shapes(self, params) -> dict[str, list[int]]:
        """{input name: shape} of a workload, from the spec, once its level is checked."""
        self.dims(params)
        return input_shapes(self.KERNEL, params)

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        """Drawn in the script's order (x, token ids, advantages, reference input, then the two heads'
        weights as the modules are built); the attention mask is all ones, float32 as the script's."""
        s = self.input_shapes(params)
        vocab, hidden = s["weight"]
        gen = generator(seed, device)
        td = RERUN_DTYPES[dtype]

        def normal(name):
            return torch.randn(s[name], generator=gen, device=device, dtype=torch.float32).to(td)

        x = normal("x")
        ids = torch.randint(0, vocab, s["selected_token_ids"], generator=gen, device=device, dtype=torch.int64)
        advantages = normal("advantages")
        ref_input = normal("ref_input")
        return {
            "x": x,
            "weight": linear_weight(vocab, hidden, gen, device).to(td),
            "selected_token_ids": ids,
            "attention_mask": torch.ones(s["attention_mask"], device=device, dtype=torch.float32),
            "advantages": advantages,
            "ref_input": ref_input,
            "ref_weight": linear_weight(vocab, hidden, gen, device).to(td),
        }

    def reference(self, inputs, params):
        self.dims(params)
        return (self._loss(inputs),)

    def _loss(self, inputs) -> torch.Tensor:
        return grpo_loss(
            inputs["x"],
            inputs["weight"],
            inputs["selected_token_ids"],
            inputs["attention_mask"],
            inputs["advantages"],
            inputs["ref_input"],
            inputs["ref_weight"],
            self.level,
        )

    def _liger(self, provider, inputs, params) -> Built:
        self.dims(params)
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        passed, weight = {**inputs, **leaves}, leaves["weight"]
        name = "LigerFusedLinearGRPOLoss"
        loss = liger_chunked_loss("grpo_loss", name, takes=("importance_sampling_level",))(
            beta=BETA,
            compiled=compiled_on(weight),
            use_ref_model=True,
            epsilon_low=EPSILON_LOW,
            epsilon_high=EPSILON_HIGH,
            loss_type=LOSS_TYPE,
            importance_sampling_level=self.level,
            temperature=TEMPERATURE,
        )

        def fn():
            return (loss(
                passed["x"],
                weight,
                passed["selected_token_ids"],
                passed["attention_mask"],
                passed["advantages"],
                ref_input=passed["ref_input"],
                ref_weight=passed["ref_weight"],
            )[0],)

        return self.built(fn, leaves, chunked_label(name, weight))

    def _torch(self, provider, inputs, params) -> Built:
        self.dims(params)
        leaves = leaf_copies(inputs, self.GRAD_INPUTS)
        passed = {**inputs, **leaves}
        label = (f"PyTorch {torch.__version__} equivalent of the upstream TorchLMHeadGRPO "
                 f"({LOSS_TYPE}, {self.level}-level importance sampling)")
        return self.built(lambda: (self._loss(passed),), leaves, label)

    BUILDERS = {"liger": _liger, "torch": _torch}

    def heads(self, params) -> list[tuple[int, int, int, bool]]:
        """The policy head (trained) and the reference model's head (no gradients)."""
        batch, seq, hidden, vocab = self.dims(params)
        return [(batch * seq, hidden, vocab, True), (batch * seq, hidden, vocab, False)]

    def index_reads(self, params) -> int:
        """The selected token ids."""
        batch, seq, _, _ = self.dims(params)
        return batch * seq

    def bytes_moved(self, params, dtype, mode) -> int:
        """``lm_head_bytes`` of both heads with the token ids read as int64, plus the float32 attention mask
        and the advantages, read by every pass."""
        batch, seq, _, _ = self.dims(params)
        return super().bytes_moved(params, dtype, mode) + batch * seq * DTYPE_BYTES["fp32"] + batch * RERUN_BYTES[dtype]
