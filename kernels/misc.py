"""Embedding lookup, fused mixture-of-experts, and sparsemax."""

from kernels._spec import spec


def _tokens(p):
    return p["tokens"] if "tokens" in p else p["batch"] * p["seq"]


SPECS = [
    spec(
        "embedding",
        "Embedding",
        tensors=lambda p: {"indices": ("int64", [p["batch"], p["seq"]]), "weight": [p["vocab"], p["dim"]]},
    ),
    spec(
        "fused_moe",
        "Fused mixture-of-experts",
        # Here T counts tokens and K the experts each token is routed to.
        parameter_names={"T": "tokens", "K": "top_k"},
        tensors=lambda p: {
            "x": [p["tokens"], p["hidden"]],
            "w_gate_up": [p["experts"], 2 * p["intermediate"], p["hidden"]],
            "w_down": [p["experts"], p["hidden"], p["intermediate"]],
        },
    ),
    spec(
        "sparsemax",
        "Sparsemax",
        parameter_names={"V": "cols"},
        tensors=lambda p: {"x": [_tokens(p), p["cols"] if "cols" in p else p["hidden"]]},
    ),
]
