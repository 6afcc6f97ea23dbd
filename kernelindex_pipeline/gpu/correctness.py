"""Correctness before timing: each provider against a higher-precision reference on fresh inputs."""

from __future__ import annotations

import math

import torch

import kernels
from kernels.adapter import RerunAdapter, Unavailable
from kernels.tensors import as_tuple, grad_outputs
from kernelindex_pipeline.core import reasons
from kernelindex_pipeline.core.catalog import is_compiled
from kernelindex_pipeline.gpu import protocol as P
from kernelindex_pipeline.gpu.guards import backend_fell_back, backend_report, compile_report, fell_back
from kernelindex_pipeline.gpu.workloads import provider_liger_impl



def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    a = out.detach().to(torch.float64)
    r = ref.detach().to(torch.float64)
    if a.shape != r.shape:
        return float("inf")
    if not torch.isfinite(a).all():
        return float("nan")
    denom = torch.linalg.vector_norm(r).item()
    num = torch.linalg.vector_norm(a - r).item()
    return num / denom if denom > 0 else (0.0 if num == 0 else float("inf"))


def _upcast(inputs: dict, grad_names, dtype: torch.dtype) -> dict:
    out = {}
    for name, t in inputs.items():
        if t.is_complex():
            u = t.detach().to(torch.complex128 if dtype == torch.float64 else torch.complex64)
        elif t.is_floating_point():
            u = t.detach().to(dtype)
        else:
            u = t.detach()
        if name in grad_names:
            u.requires_grad_(True)
        out[name] = u
    return out


class _NoTF32:
    def __enter__(self):
        self.prev = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self.prev


def reference_outputs(impl: RerunAdapter, inputs: dict, dys, params=None):
    """The adapter's reference outputs and input gradients, in its REFERENCE_DTYPE with TF32 off."""
    ref_in = _upcast(inputs, impl.GRAD_INPUTS, impl.REFERENCE_DTYPE)
    with _NoTF32():
        outs = as_tuple(impl.reference(ref_in, params))
        leaves = [ref_in[n] for n in impl.GRAD_INPUTS]
        grads = torch.autograd.grad(outs, leaves, [d.to(o.dtype) for d, o in zip(dys, outs)], allow_unused=True)
    return [o.detach() for o in outs], {n: g for n, g in zip(impl.GRAD_INPUTS, grads)}


def check_correctness(impl: RerunAdapter, providers, params: dict, dtype: str, device, seeds=P.CORRECTNESS_SEEDS,
                      build=None) -> dict:
    """{provider: correctness dict} with ``status`` passed/failed (or ``unavailable``), and unless passed a
    ``reason`` and its ``code``. Errors are judged by the field's rule (``protocol.field_failures``) against the
    eager baseline's own errors in the same check; ``rule`` records it, with each side's matmul precision. A compiled provider also carries ``compile`` (what dynamo compiled), a
    provider on a Liger backend ``backend`` (the Liger Functions that ran); either fails where it fell back.

    ``build`` overrides ``impl.build`` (tests use it to plant a broken kernel)."""
    build = build or impl.build
    tol_out, tol_grad = P.tolerance(dtype, "outputs"), P.tolerance(dtype, "gradients")
    results = {p: {"seeds": list(seeds), "outputs": {}, "gradients": {}} for p in providers}
    labels = {}
    unavailable = {}
    for seed in seeds:
        inputs = impl.make_inputs(params, dtype, seed, device)
        ref_outs = ref_grads = None
        for provider in providers:
            if provider in unavailable:
                continue
            try:
                built = build(provider, inputs, params)
            except Unavailable as exc:
                unavailable[provider] = str(exc)
                continue
            labels[provider] = built.label
            res = results[provider]
            try:
                outs = as_tuple(built.fn())
                dys = grad_outputs(outs, seed)
                if ref_outs is None:
                    ref_outs, ref_grads = reference_outputs(impl, inputs, dys, params)
                leaves = [built.leaves[n] for n in impl.GRAD_INPUTS]
                grads = torch.autograd.grad(outs, leaves, dys, allow_unused=True)
            except Exception as exc:  # noqa: BLE001 - a crash is a correctness failure
                res.setdefault("reason", f"raised {type(exc).__name__}: {exc}"[:500])
                res.setdefault("code", reasons.RAISED)
                continue
            fallback = None
            if is_compiled(impl.KERNEL, provider):
                res["compile"] = compile_report()
                fallback = fell_back(res["compile"])
            elif provider_liger_impl(provider):
                res["backend"] = backend_report(outs, provider_liger_impl(provider))
                fallback = backend_fell_back(res["backend"])
            if fallback:
                res.setdefault("reason", fallback)
                res.setdefault("code", reasons.FELL_BACK)
            for name, o, r in zip(impl.OUTPUT_NAMES, outs, ref_outs):
                _worst(res["outputs"], name, rel_error(o, r), tol_out)
            for name, g in zip(impl.GRAD_INPUTS, grads):
                r = ref_grads[name]
                err = float("inf") if g is None else rel_error(g, r)
                _worst(res["gradients"], name, err, tol_grad)
            del built, outs, grads
        del inputs, ref_outs, ref_grads
    final = {}
    baseline = P.eager_baseline([p for p in providers if p not in unavailable and "reason" not in results[p]])
    upstream = kernels.lookup(impl.KERNEL).test_tolerances.get(dtype)
    precision = "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"
    for provider in providers:
        if provider in unavailable:
            final[provider] = {"status": "unavailable", "reason": unavailable[provider],
                               "code": reasons.UNAVAILABLE_PROVIDER}
            continue
        res = results[provider]
        bad = P.field_failures(res, results[baseline] if baseline else None, dtype, upstream,
                               is_baseline=provider == baseline)
        res["rule"] = {"name": P.FIELD_RULE, "baseline": baseline, "torchMatmul": precision,
                       "tritonDot": "tf32 unless the kernel asks for ieee (Triton's default for float32)"}
        if "reason" in res or bad:
            res["reason"] = "; ".join(([res["reason"]] if "reason" in res else []) + bad)
            res["status"] = "failed"
            res.setdefault("code", reasons.FAILED_CORRECTNESS)
        else:
            res["status"] = "passed"
        res["label"] = labels.get(provider)
        final[provider] = res
    return final


def _worst(table: dict, name: str, err: float, tol: float):
    """Keep the worst error over seeds; NaN is worst of all."""
    prev = table.get(name)
    if prev is None or math.isnan(err) or (not math.isnan(prev["rel_error"]) and err > prev["rel_error"]):
        table[name] = {"rel_error": float(err), "tolerance": tol}
