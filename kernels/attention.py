"""Attention variants: neighborhood attention and multi-token attention."""

from kernels._spec import spec


def _neighborhood(p):
    head_dim = p["hidden"] // p["heads"]
    shape = [p["batch"], p["heads"], p["seq"], head_dim]
    return {"q": shape, "k": shape, "v": shape}


def _multi_token(p):
    return {
        "scores": [p["batch"], p["C_in"], p["seq"], p["seq"]],
        "weight": [p["C_out"], p["C_in"] // p["groups"], p["kernel"], p["kernel"]],
    }


SPECS = [
    spec("fused_neighborhood_attention", "Fused neighborhood attention", tensors=_neighborhood),
    spec("multi_token_attention", "Multi-token attention", parameter_names={"K": "kernel"}, tensors=_multi_token),
    spec("sparse_multi_token_attention", "Sparse multi-token attention", parameter_names={"K": "kernel"}, tensors=_multi_token),
]
