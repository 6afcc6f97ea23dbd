"""The documents KernelIndex publishes for its reference data: a workload's WorkloadDefinition, the source's
ExecutionEnvironment of a GPU, an Implementation, and the source harness's BenchmarkProtocol of a pass.
Each is an object of ``identity.API_VERSION``, digested as ``identity.published`` takes it."""

from __future__ import annotations

import functools

import kernels
from kernelindex_pipeline.core.catalog import PASS_WORDS, SOURCE_CAVEAT, SOURCE_FAMILY, Gpu, Implementation, implementation
from kernelindex_pipeline.core.identity import API_VERSION, published, slugify


def render_value(value) -> tuple[str, bool]:
    """(slug text, is numeric) of a parameter value."""
    if isinstance(value, bool):
        return ("true" if value else "false"), False
    if isinstance(value, int):
        return str(value), True
    if isinstance(value, float):
        return (str(int(value)) if value.is_integer() else repr(value)), True
    return str(value), False


def slug_safe(text: str) -> str:
    return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_.+") else "_" for ch in text)


def workload_definition(kernel: str, params: dict, dtype: str | None, implied: dict | None = None) -> dict:
    """Slug, digest and WorkloadDefinition (as published) of canonical parameters (source runs and reruns
    alike); `digest_v1alpha1` is the digest v1alpha1 gave a v1alpha2 definition, else None."""
    spec = kernels.lookup(kernel)
    parts = []
    for name in sorted(params):
        text, numeric = render_value(params[name])
        parts.append(f"{slug_safe(name)}{slug_safe(text)}" if numeric else f"{slug_safe(name)}-{slug_safe(text)}")
    slug = "-".join(parts + ([dtype] if dtype else []))
    tensors = spec.input_tensors(params, dtype)
    published_tensors = tensors if spec.shapes_published else None
    definition = {
        "apiVersion": API_VERSION,
        "kind": "WorkloadDefinition",
        "metadata": {"name": f"{kernel}-{slug}", "title": f"{spec.title} · {display(params, dtype)}"},
        "spec": {
            "kernel": kernel,
            "parameters": params,
            "dtype": dtype,
            "implied": implied or {},
            "inputs": published_tensors if published_tensors is not None else "unknown",
            "comparator": "not_asserted",
        },
    }
    workload = published(definition)
    return {"workload_slug": slug, "workload_digest": workload.digest, "digest_v1alpha1": workload.alias,
            "definition": workload.obj, "known_kernel": kernels.is_known(kernel),
            "shapes_known": (spec.rerun_tensors(params, dtype) if spec.harness_defaults else tensors) is not None}


def display(params: dict, dtype: str | None) -> str:
    """'seq = 2048 · hidden = 2048 · q_heads = 32 · kv_heads = 8 · bf16'."""
    order = {name: i for i, name in enumerate(kernels.DISPLAY_ORDER)}
    names = sorted(params, key=lambda n: (order.get(n, len(order)), n))
    return " · ".join([f"{n} = {render_value(params[n])[0]}" for n in names] + ([dtype] if dtype else []))


def gpu_environment(gpu: Gpu) -> dict:
    """The ExecutionEnvironment of a GPU as the source names it: hardware only, the source records no software."""
    hardware = {"vendor": "nvidia", "product": gpu.product, "architecture": gpu.architecture}
    if gpu.form_factor:
        hardware["formFactor"] = gpu.form_factor
    short = gpu.source_name.removeprefix("NVIDIA ")
    return {
        "apiVersion": API_VERSION,
        "kind": "ExecutionEnvironment",
        "metadata": {"name": f"liger-bench-{slugify(gpu.source_name)}", "title": f"Liger benchmark host · {short}"},
        "spec": {"hardware": hardware, "software": {}},
    }


def implementation_manifest(impl: Implementation) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "Implementation",
        "metadata": {"name": impl.provider},
        "spec": {"provider": impl.provider, "implementation": impl.name, "project": impl.project, "revision": "unknown"},
    }


@functools.lru_cache(maxsize=256)
def implementation_digest(provider: str) -> str:
    """The digest of a provider's Implementation manifest (`catalog.implementation`), once per provider."""
    return published(implementation_manifest(implementation(provider))).digest


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
