"""Reference data for source-native runs: GPUs, implementations, and the Liger harness protocols."""

from __future__ import annotations

from dataclasses import dataclass

from kernelindex_pipeline.identity import API_VERSION, slugify

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
SOURCE_NATIVE = "source-native"
CONTROLLED = "kernelindex-controlled"


@dataclass(frozen=True)
class Gpu:
    """A GPU as the upstream CSV names it (torch.cuda.get_device_name)."""

    source_name: str
    product: str
    form_factor: str | None
    architecture: str

    def environment(self) -> dict:
        hardware = {"vendor": "nvidia", "product": self.product, "architecture": self.architecture}
        if self.form_factor:
            hardware["formFactor"] = self.form_factor
        short = self.source_name.removeprefix("NVIDIA ")
        return {
            "apiVersion": API_VERSION,
            "kind": "ExecutionEnvironment",
            "metadata": {"name": f"liger-bench-{slugify(self.source_name)}", "title": f"Liger benchmark host · {short}"},
            "spec": {"hardware": hardware, "software": {}},
        }


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


@dataclass(frozen=True)
class Implementation:
    provider: str
    name: str
    project: str

    def manifest(self) -> dict:
        return {
            "apiVersion": API_VERSION,
            "kind": "Implementation",
            "metadata": {"name": self.provider},
            "spec": {"provider": self.provider, "implementation": self.name, "project": self.project, "revision": "unknown"},
        }


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


# Source passes that time something other than the pass they name, per (kernel, operation mode), with why: their
# runs are source artifacts, and the claims on them carry the flag.
SOURCE_PASS_FAULTS = {
    ("megatron_cross_entropy", "backward"): (
        "the source's backward rows of megatron_cross_entropy time forward and backward together: its script "
        "re-runs the forward in every repetition, since Megatron's backward consumes its graph"),
}


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


def source_protocol(mode: str, metric: str) -> dict:
    """The BenchmarkProtocol of the Liger harness for one timed pass and metric."""
    pass_name, pass_text = PASS_WORDS[mode]
    if metric == "latency":
        name = f"liger-bench-do-bench-{mode}"
        title = f"Liger benchmark harness · {pass_name}"
        measurement = {"timer": "cuda_events", "primaryStatistic": "median"}
        notes = (
            f"Timed: {pass_text}, via triton.testing.do_bench with quantiles 0.5/0.2/0.8 "
            f"(median with p20/p80 spread). {SOURCE_CAVEAT}"
        )
    else:
        name = f"liger-bench-peak-memory-{mode}"
        title = f"Liger benchmark harness · peak memory · {pass_name}"
        measurement = {"probe": "torch.cuda.max_memory_allocated", "primaryStatistic": "median"}
        notes = (
            f"Measured: peak CUDA memory allocated (torch.cuda.max_memory_allocated, reported in MiB) during "
            f"{pass_text}, quantiles 0.5/0.2/0.8 over repeated passes. {SOURCE_CAVEAT}"
        )
    return {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkProtocol",
        "metadata": {"name": name, "title": title},
        "spec": {
            "harness": {"name": "Liger-Kernel benchmark scripts", "repository": "https://github.com/linkedin/Liger-Kernel"},
            "measurement": measurement,
            "comparability": {"notes": notes, "family": SOURCE_FAMILY},
        },
    }
