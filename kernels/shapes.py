"""Input shapes that several families' specs share (no torch): each takes a workload's canonical parameters
and returns {tensor name: shape}, or {tensor name: (dtype, shape)} for a tensor not in the workload's dtype."""

from __future__ import annotations


def tokens(p) -> int:
    """The workload's token count: ``tokens`` where the source sweeps it, else batch x seq."""
    return p["tokens"] if "tokens" in p else p["batch"] * p["seq"]


def gated_mlp(p):
    """A gated MLP block's input and weights (GeGLU and SwiGLU, tiled or not)."""
    return {
        "x": [p["batch"], p["seq"], p["hidden"]],
        "w_up": [p["intermediate"], p["hidden"]],
        "w_down": [p["hidden"], p["intermediate"]],
        "w_gate": [p["intermediate"], p["hidden"]],
    }


def two_distributions(p):
    """Two [tokens, vocab] distributions (the divergences)."""
    return {"input": [tokens(p), p["vocab"]], "target": [tokens(p), p["vocab"]]}


def preference(p):
    """An LM head over whole sequences. The upstream scripts build x as (batch, seq, hidden): the first half of
    the batch is the chosen sequences, the second half the rejected ones."""
    rows = p["batch"] * p["seq"]
    return {"x": [rows, p["hidden"]], "weight": [p["vocab"], p["hidden"]], "target": ("int64", [rows])}


def grpo(p):
    """A policy LM head and a frozen reference head over whole sequences, with the sampled token ids, the
    attention mask (float32, as upstream's ``torch.ones``) and one advantage a sequence."""
    batch, seq, hidden, vocab = p["batch"], p["seq"], p["hidden"], p["vocab"]
    return {
        "x": [batch, seq, hidden],
        "selected_token_ids": ("int64", [batch, seq]),
        "attention_mask": ("fp32", [batch, seq]),
        "advantages": [batch],
        "ref_input": [batch, seq, hidden],
        "weight": [vocab, hidden],
        "ref_weight": [vocab, hidden],
    }


def distillation(p):
    """A student LM head (hidden // 2) and a teacher LM head (hidden) over the same tokens, with targets."""
    return {
        "student_x": [tokens(p), p["hidden"] // 2],
        "teacher_x": [tokens(p), p["hidden"]],
        "student_weight": [p["vocab"], p["hidden"] // 2],
        "teacher_weight": [p["vocab"], p["hidden"]],
        "target": ("int64", [tokens(p)]),
    }


def multi_token_attention(p):
    """Multi-token attention's scores and convolution weight."""
    return {
        "scores": [p["batch"], p["C_in"], p["seq"], p["seq"]],
        "weight": [p["C_out"], p["C_in"] // p["groups"], p["kernel"], p["kernel"]],
    }
