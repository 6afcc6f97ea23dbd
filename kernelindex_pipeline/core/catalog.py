"""Reference data for source-native runs: GPUs, implementations, and the Liger harness protocols."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


SOURCE = "liger-kernel-bench"
SOURCE_TITLE = "Liger-Kernel benchmarks"
SOURCE_FAMILY = "liger_kernel_bench"
RERUN_FAMILY = "kernelindex_rerun"  # KernelIndex's device-time protocol
SOURCE_REPLICA_FAMILY = "source_replica"  # the source's own harness (do_bench, host overhead included), replayed
# One name per protocol family, wherever a page, view or table names a protocol (claim_checks.protocol too).
PROTOCOL_NAMES = {SOURCE_FAMILY: "liger-kernel-bench", RERUN_FAMILY: "kernelindex-device-time",
                  SOURCE_REPLICA_FAMILY: "source-replica"}
# The rerun protocols, as claim checks name them, and the protocol family of their evidence.
PROTOCOLS = {PROTOCOL_NAMES[family]: family for family in (RERUN_FAMILY, SOURCE_REPLICA_FAMILY)}
# The same, as the rows of a SQL VALUES list: (protocol, family).
PROTOCOLS_VALUES = ", ".join(f"('{name}', '{family}')" for name, family in PROTOCOLS.items())
SOURCE_NATIVE = "source-native"
CONTROLLED = "kernelindex-controlled"


@dataclass(frozen=True)
class Gpu:
    """A GPU as the upstream CSV names it (torch.cuda.get_device_name)."""

    source_name: str
    product: str
    form_factor: str | None
    architecture: str


def gpu_label(gpu: str, form_factor: str | None) -> str:
    """A card as verdicts, pages and views name it: its model, then its form factor where known."""
    return f"{gpu} {form_factor}" if form_factor else gpu


def gpu_label_sql(alias: str = "") -> str:
    """``gpu_label`` in SQL, over the ``gpu`` and ``form_factor`` columns of ``alias`` (a table alias, or none)."""
    prefix = f"{alias}." if alias else ""
    return f"{prefix}gpu || coalesce(' ' || {prefix}form_factor, '')"


GPUS: dict[str, Gpu] = {
    g.source_name: g
    for g in [
        Gpu("NVIDIA A100-SXM4-80GB", "NVIDIA A100", "SXM4-80GB", "sm_80"),
        Gpu("NVIDIA A100-SXM4-40GB", "NVIDIA A100", "SXM4-40GB", "sm_80"),
        Gpu("NVIDIA A100 80GB PCIe", "NVIDIA A100", "80GB PCIe", "sm_80"),
        Gpu("NVIDIA H100 80GB HBM3", "NVIDIA H100", "80GB HBM3", "sm_90"),
        Gpu("NVIDIA H100 PCIe", "NVIDIA H100", "PCIe", "sm_90"),
        Gpu("NVIDIA H100 NVL", "NVIDIA H100", "NVL", "sm_90"),
        Gpu("NVIDIA H200", "NVIDIA H200", None, "sm_90"),
        Gpu("NVIDIA H20", "NVIDIA H20", None, "sm_90"),
        Gpu("NVIDIA B200", "NVIDIA B200", None, "sm_100"),
        Gpu("NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090", None, "sm_86"),
        Gpu("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090", None, "sm_89"),
        Gpu("NVIDIA L4", "NVIDIA L4", None, "sm_89"),
        Gpu("NVIDIA L40S", "NVIDIA L40S", None, "sm_89"),
        Gpu("NVIDIA A10G", "NVIDIA A10G", None, "sm_86"),
    ]
}

# How a claim's own card and a rerun's card compare (claim_checks.card_match), nearest first: the same model
# and form factor, the same model, another card.
CARD_MATCHES = ("same_card", "same_model", "other_card")
# Each device name a rerun records (torch.cuda.get_device_name) as the catalog's model and form factor, as the
# rows of a SQL VALUES list: (device, model, form_factor).
CARDS_VALUES = ", ".join(
    f"('{g.source_name}', '{g.product}', {repr(g.form_factor) if g.form_factor else 'NULL'})" for g in GPUS.values())


@dataclass(frozen=True)
class Implementation:
    provider: str
    name: str
    project: str


IMPLEMENTATIONS: dict[str, Implementation] = {
    i.provider: i
    for i in [
        Implementation("liger", "Liger", "Liger-Kernel"),
        Implementation("liger_triton", "Liger (Triton)", "Liger-Kernel"),
        Implementation("liger_tiled", "Liger (tiled)", "Liger-Kernel"),
        Implementation("liger_cutile", "Liger (cuTile)", "Liger-Kernel"),
        Implementation("liger_cutedsl", "Liger (CuTe DSL)", "Liger-Kernel"),
        Implementation("liger_rms_norm", "Liger RMSNorm", "Liger-Kernel"),
        Implementation("liger_fused_add_rms_norm", "Liger fused add + RMSNorm", "Liger-Kernel"),
        Implementation("huggingface", "Transformers", "Hugging Face Transformers"),
        Implementation("torch", "PyTorch", "PyTorch"),
        Implementation("torch_compile", "torch.compile", "PyTorch"),
        Implementation("megatron", "Megatron-LM", "Megatron-LM"),
        Implementation("megatron-fused", "Megatron-LM (fused)", "Megatron-LM"),
        Implementation("megatron-unfused", "Megatron-LM (unfused)", "Megatron-LM"),
        Implementation("deepspeed_tiled", "DeepSpeed (tiled)", "DeepSpeed"),
        Implementation("kernelindex", "KernelIndex Triton", "KernelIndex"),
    ]
}


# Providers built by a compiler, keyed by (kernel, provider), kernel None for every kernel, with the eager
# provider of the same kernel that they compile: a rerun of one records what the compiler produced, and a source
# series of one that times as its eager twin ran eager. Megatron-Core's fused cross entropy is its eager one's
# steps put through `megatron.core.jit.jit_fuser`, which is torch.compile, or a no-op where Megatron finds no
# usable compiler.
COMPILED_PROVIDERS = {
    (None, "torch_compile"): "torch",
    ("megatron_cross_entropy", "megatron-fused"): "megatron-unfused",
    ("megatron_cross_entropy", "megatron"): "megatron-unfused",
}
COMPILED_PROVIDER_NAMES = sorted({provider for _, provider in COMPILED_PROVIDERS})


# Every family's upstream benchmark script, read once per span of the releases its claims cite
# (source_scripts.json): what each provider builds, dtype, TF32, whether the providers compute the same
# quantity, what each pass times. Its `artifacts` make a source series measure something other than its label,
# each with a code (SCRIPT_ARTIFACT_CODES): its runs are source artifacts, and no verdict is given on them.
SOURCE_SCRIPTS = json.loads((Path(__file__).with_name("source_scripts.json")).read_text(encoding="utf-8"))
SCRIPT_ARTIFACT_CODES = ("different_quantity", "pass_includes_forward", "forward_computes_gradients", "other_pass")
SCRIPT_ARTIFACTS = SOURCE_SCRIPTS["artifacts"]
# The (kernel, operation mode) pairs some artifact reaches.
ARTIFACT_PASSES = sorted({(a["kernel"], m) for a in SCRIPT_ARTIFACTS for m in a["modes"]})


def release_bounds(releases: str) -> tuple[list[int] | None, list[int] | None]:
    """The first and last release of a span ("0.5.10-0.7.0", "0.8.0", "all") as version lists."""
    if releases == "all":
        return None, None
    low, _, high = releases.partition("-")
    return [int(x) for x in low.split(".")], [int(x) for x in (high or low).split(".")]


def is_compiled(kernel: str, provider: str) -> bool:
    return (kernel, provider) in COMPILED_PROVIDERS or (None, provider) in COMPILED_PROVIDERS


def compiled_sql(kernel: str, provider: str) -> str:
    """A SQL condition, over the columns named ``kernel`` and ``provider``: that the provider is compiled."""
    return "(" + " OR ".join(
        f"{provider} = '{p}'" if k is None else f"({kernel} = '{k}' AND {provider} = '{p}')"
        for k, p in COMPILED_PROVIDERS) + ")"


def implementation(provider: str) -> Implementation:
    """A known implementation, or one named after its provider with the project unknown."""
    return IMPLEMENTATIONS.get(provider) or Implementation(provider, provider, "unknown")


# What each upstream operation mode times, in the words of the Liger benchmark scripts.
PASS_WORDS = {
    "forward": ("forward pass", "the forward pass of the module on random inputs"),
    "no-grad-forward": ("forward pass without autograd", "the forward pass of the module under torch.no_grad()"),
    "backward": ("backward pass", "the backward pass of the module output given a random upstream gradient"),
    "full": ("forward and backward pass", "one forward and one backward pass of the module, end to end"),
}
MODES = tuple(PASS_WORDS)
SOURCE_CAVEAT = (
    "The upstream CSV records no CUDA, driver, or torch version; the Liger release rides each run's labels. "
    "Comparable only within one kernel, workload, timed pass, and GPU."
)
