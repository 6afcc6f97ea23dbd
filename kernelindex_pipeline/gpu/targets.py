"""Which workloads a rerun session measures. Parameter names and values pair with upstream Liger-Kernel runs."""

from __future__ import annotations

from kernelindex_pipeline.gpu.protocol import MODES

THREE = ["liger", "huggingface", "kernelindex"]


def _t(kernel, params, dtype="bf16", providers=THREE, modes=MODES, metrics=("latency", "peak_memory")):
    return {"kernel": kernel, "params": dict(params), "dtype": dtype, "providers": list(providers),
            "modes": list(modes), "metrics": list(metrics)}


SEED_TARGETS = [
    _t("llama4_rope", {"seq": 2048, "hidden": 2048, "q_heads": 32, "kv_heads": 8}),
    _t("geglu", {"batch": 8, "seq": 8192, "hidden": 4096, "intermediate": 11008}),
]

MORE_TARGETS = [
    # llama4_rope: the H sweep (seq 2048) and the largest T point (hidden 8192)
    _t("llama4_rope", {"seq": 2048, "hidden": 8192, "q_heads": 32, "kv_heads": 8}),
    _t("llama4_rope", {"seq": 16384, "hidden": 8192, "q_heads": 32, "kv_heads": 8}),
    # rope (Llama cos/sin): same sweeps
    _t("rope", {"seq": 2048, "hidden": 2048, "q_heads": 32, "kv_heads": 8}),
    _t("rope", {"seq": 2048, "hidden": 8192, "q_heads": 32, "kv_heads": 8}),
    _t("rope", {"seq": 16384, "hidden": 8192, "q_heads": 32, "kv_heads": 8}),
    # geglu: a smaller T point of the same sweep
    _t("geglu", {"batch": 8, "seq": 2048, "hidden": 4096, "intermediate": 11008}),
    # swiglu (B=4)
    _t("swiglu", {"batch": 4, "seq": 2048, "hidden": 4096, "intermediate": 11008}),
    _t("swiglu", {"batch": 4, "seq": 8192, "hidden": 4096, "intermediate": 11008}),
    # rms_norm (M=2048 rows, eps 1e-6), H sweep
    _t("rms_norm", {"rows": 2048, "hidden": 1024, "eps": 1e-06}),
    _t("rms_norm", {"rows": 2048, "hidden": 4096, "eps": 1e-06}),
    _t("rms_norm", {"rows": 2048, "hidden": 16384, "eps": 1e-06}),
    # layer_norm (M=4096 rows, fp32, eps 1e-6), N sweep
    _t("layer_norm", {"rows": 4096, "hidden": 1024, "eps": 1e-06}, dtype="fp32"),
    _t("layer_norm", {"rows": 4096, "hidden": 4096, "eps": 1e-06}, dtype="fp32"),
    _t("layer_norm", {"rows": 4096, "hidden": 16384, "eps": 1e-06}, dtype="fp32"),
]


def targets_named(which: str, kernels: list[str] | None = None) -> list[dict]:
    if which == "seeds":
        chosen = list(SEED_TARGETS)
    elif which == "all":
        chosen = SEED_TARGETS + MORE_TARGETS
    else:
        raise ValueError(f"unknown target set {which!r}; expected seeds or all")
    if kernels:
        chosen = [t for t in chosen if t["kernel"] in kernels]
    return chosen
