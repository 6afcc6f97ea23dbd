"""The execution environment of a rerun session: card, software, and ceilings measured in the session."""

from __future__ import annotations

import re
import time

import torch
import triton

from kernels.adapter import load_adapter
from kernels.providers import package_version
from kernelindex_pipeline.core.identity import API_VERSION
from kernelindex_pipeline.gpu.device import nvidia_smi
from kernelindex_pipeline.gpu.launch_floor import measure_launch_floor


def form_factor(product: str) -> str:
    name = product.upper()
    if "NVL" in name:
        return "PCIe (NVL)"
    if "PCIE" in name:
        return "PCIe"
    if "SXM" in name or re.search(r"\b(H100|H200|B200|A100)\b", name):
        return "SXM"
    return "unknown"


def _fastest_ms(fn, warmup_s: float = 0.1, reps: int = 50, budget_s: float = 1.0) -> float:
    """Fastest CUDA-event time of ``fn`` over ``reps`` calls, after ``warmup_s`` seconds of running it back
    to back: the rate the card holds once it has left its idle clocks and reached its power limit, which
    is what passes of milliseconds and more see: on the H200 the first ~30 ms of matrix products ran up to
    15% faster than after 0.1-0.5 s of load (docs/kernel-decisions.md). Timing stops early once
    ``budget_s`` seconds are spent (long products)."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warmup_s:
        fn()
        torch.cuda.synchronize()
    times = []
    t0 = time.perf_counter()
    while len(times) < reps and (len(times) < 3 or time.perf_counter() - t0 < budget_s):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return min(times)


def measure_copy_tbps(nbytes: int = 2 * 1024**3) -> float:
    """Device-to-device copy rate, counting bytes read plus bytes written."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    ms = _fastest_ms(lambda: dst.copy_(src))
    del src, dst
    return 2 * nbytes / (ms * 1e-3) / 1e12


SQUARE = (8192, 8192, 8192)


def measure_bf16_matmul_tflops(m: int, n: int, k: int) -> float:
    """Dense bf16 matrix product rate on random data ((m x k) @ (k x n), cuBLAS through torch)."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    ms = _fastest_ms(lambda: a @ b, budget_s=0.3)
    del a, b
    return 2 * m * n * k / (ms * 1e-3) / 1e12


def matmul_problems(targets: list[dict] | None) -> list[tuple[int, int, int]]:
    """The square product, then the GEMM problems of the targets (their adapters' ``matmul_shapes``), each
    once."""
    shapes = [SQUARE]
    for target in targets or []:
        for shape in load_adapter(target["kernel"]).matmul_shapes(target["params"]):
            if tuple(shape) not in shapes:
                shapes.append(tuple(shape))
    return shapes


def capture_environment(targets: list[dict] | None = None, log=None) -> dict:
    """The card, its software, the ceilings (copy bandwidth and the bf16 matmul rate over the square product
    and the ``targets``' GEMM problems) and the host's launch floor (``launch_floor``); ``log`` (where given)
    is told what each measurement took, since they come out of the session's time."""
    started = time.perf_counter()
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    product = props.name
    arch = f"sm_{props.major}{props.minor}"
    software = {
        "driver": nvidia_smi("driver_version"),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "ligerKernel": package_version("liger-kernel"),
        "transformers": package_version("transformers"),
    }
    copy = measure_copy_tbps()
    copied = time.perf_counter()
    launch_floor = measure_launch_floor()
    floored = time.perf_counter()
    rates = {"x".join(map(str, shape)): round(measure_bf16_matmul_tflops(*shape), 2)
             for shape in matmul_problems(targets)}
    torch.cuda.empty_cache()
    if log is not None:
        log(f"environment measured in {time.perf_counter() - started:.1f} s: copy bandwidth {copied - started:.1f} s, "
            f"launch floor {floored - copied:.1f} s, {len(rates)} matmul problems {time.perf_counter() - floored:.1f} s")
    slug = re.sub(r"[^a-z0-9]+", "-", product.lower()).strip("-")
    return {
        "apiVersion": API_VERSION,
        "kind": "ExecutionEnvironment",
        "metadata": {
            "name": f"{slug}-{arch}-driver{software['driver'] or 'unknown'}-torch{torch.__version__.split('+')[0]}"
                    f"-triton{triton.__version__}",
            "title": f"{product} ({arch}), driver {software['driver']}, CUDA {torch.version.cuda}, "
                     f"torch {torch.__version__}, triton {triton.__version__}",
        },
        "spec": {
            "hardware": {
                "vendor": "nvidia",
                "product": product,
                "formFactor": form_factor(product),
                "architecture": arch,
                "smCount": props.multi_processor_count,
                "memoryBytes": int(props.total_memory),
            },
            "software": software,
            # The matmul ceiling is the fastest sustained rate over the measured problems: a GEMM-bound
            # pass's floor is its FLOPs at the best rate the card held on any of them.
            "ceilings": {"copyTBps": round(copy, 4), "bf16MatmulTFLOPs": max(rates.values()),
                         "bf16MatmulTFLOPsByShape": rates},
            "launchFloor": launch_floor,
        },
    }
