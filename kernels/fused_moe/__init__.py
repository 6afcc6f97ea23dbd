"""Fused mixture-of-experts: each token's output is the routing-weighted sum of its top-k experts' SwiGLU MLPs."""

from kernels.spec import spec

SPEC = spec(
    "fused_moe",
    "Fused mixture-of-experts",
    # Here T counts tokens and K the experts each token is routed to.
    parameter_names={"T": "tokens", "K": "top_k"},
    tensors=lambda p: {
        "x": [p["tokens"], p["hidden"]],
        "w_gate_up": [p["experts"], 2 * p["intermediate"], p["hidden"]],
        "w_down": [p["experts"], p["hidden"], p["intermediate"]],
    },
)
