"""GeGLU MLP: down(gelu_tanh(gate(x)) * up(x)), as in Gemma."""

from kernels._spec import spec


def mlp_tensors(p):
    """Inputs of a gated MLP block (GeGLU and SwiGLU share them)."""
    return {
        "x": [p["batch"], p["seq"], p["hidden"]],
        "w_up": [p["intermediate"], p["hidden"]],
        "w_down": [p["hidden"], p["intermediate"]],
        "w_gate": [p["intermediate"], p["hidden"]],
    }


SPEC = spec(
    "geglu",
    "GeGLU MLP",
    implied=("hidden_act",),
    defaults={"batch": 1},
    tensors=mlp_tensors,
)
