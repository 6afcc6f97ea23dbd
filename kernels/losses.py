"""Losses over vocabulary-sized logits: fused linear cross entropy, divergences, alignment and distillation."""

from kernels._spec import spec


def _tokens(p):
    return p["tokens"] if "tokens" in p else p["batch"] * p["seq"]


def _two_distributions(p):
    return {"input": [_tokens(p), p["vocab"]], "target": [_tokens(p), p["vocab"]]}


def _fused_linear(p):
    return {"x": [_tokens(p), p["hidden"]], "weight": [p["vocab"], p["hidden"]], "target": ("int64", [_tokens(p)])}


def _preference(p):
    # The upstream scripts build x as (batch, seq, hidden): the first half of the batch is the chosen
    # sequences, the second half the rejected ones.
    rows = p["batch"] * p["seq"]
    return {"x": [rows, p["hidden"]], "weight": [p["vocab"], p["hidden"]], "target": ("int64", [rows])}


def _distill(p):
    return {
        "student_x": [_tokens(p), p["hidden"] // 2],
        "teacher_x": [_tokens(p), p["hidden"]],
        "student_weight": [p["vocab"], p["hidden"] // 2],
        "teacher_weight": [p["vocab"], p["hidden"]],
        "target": ("int64", [_tokens(p)]),
    }


def _fused_linear_jsd(p):
    return {
        "student_x": [_tokens(p), p["hidden"]],
        "teacher_x": [_tokens(p), p["hidden"]],
        "student_weight": [p["vocab"], p["hidden"]],
        "teacher_weight": [p["vocab"], p["hidden"]],
    }


SPECS = [
    spec("fused_linear_cross_entropy", "Fused linear cross entropy", tensors=_fused_linear),
    spec(
        "megatron_cross_entropy",
        "Cross entropy (Megatron-LM vocab-parallel)",
        tensors=lambda p: {"logits": [p["seq"], p["batch"], p["vocab"]], "target": ("int64", [p["seq"], p["batch"]])},
    ),
    spec("jsd", "Jensen-Shannon divergence", tensors=_two_distributions),
    spec("kl_div", "KL divergence", tensors=_two_distributions),
    spec("tvd", "Total variation distance", tensors=_two_distributions),
    spec("fused_linear_jsd", "Fused linear Jensen-Shannon divergence", tensors=_fused_linear_jsd),
    spec("fused_linear_orpo_loss", "Fused linear ORPO loss", tensors=_preference),
    spec("fused_linear_cpo_loss", "Fused linear CPO loss", tensors=_preference),
    spec("fused_linear_simpo_loss", "Fused linear SimPO loss", tensors=_preference),
    spec("kto_loss", "Fused linear KTO loss", tensors=_preference),
    spec("fused_linear_grpo_loss_token", "Fused linear GRPO loss · token-level importance sampling"),
    spec("fused_linear_grpo_loss_sequence", "Fused linear GRPO loss · sequence-level importance sampling"),
    spec("distill_jsd_loss", "Distillation JSD loss", tensors=_distill),
    spec("distill_cosine_loss", "Distillation cosine loss", tensors=_distill),
]
