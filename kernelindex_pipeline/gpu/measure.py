"""Measuring one target: each provider's correctness once, then its peak memory and latency under both
protocols, with what ran checked (`guards`) and the whole target within its time (`target_deadline`)."""

from __future__ import annotations

import contextlib
import signal
import time

from kernels.adapter import RerunAdapter
from kernelindex_pipeline.core import reasons
from kernelindex_pipeline.gpu import protocol as P
from kernelindex_pipeline.gpu.workloads import input_bytes, tensor_dtype


def too_large_reason(kernel: str, params: dict, dtype: str, device_bytes: int) -> str | None:
    """Why a workload cannot be measured on a card of ``device_bytes``, or None when it is expected to fit."""
    nbytes = input_bytes(kernel, params, dtype)
    if nbytes is None or nbytes * P.RESIDENT_FACTOR <= device_bytes:
        return None
    return (f"inputs of {nbytes / 2**30:.1f} GiB, {P.RESIDENT_FACTOR}x resident with outputs, gradients and the "
            f"reference, exceed the device's {device_bytes / 2**30:.1f} GiB")


def _is_oom(reason: str | None) -> bool:
    return bool(reason) and "OutOfMemoryError" in reason


class TargetTimeout(BaseException):
    """A target ran past its time (``target_deadline``). A BaseException, as KeyboardInterrupt is, so that
    the handlers that record one provider's crash and go on let it through to the target."""


@contextlib.contextmanager
def target_deadline(seconds: float | None):
    """Raise TargetTimeout in this (main) thread once ``seconds`` have passed. The signal lands between
    Python steps: a pass that launches kernels and waits on them is stopped at its next step, the device
    work already queued still finishing."""
    if not seconds:
        yield
        return

    def expire(signum, frame):
        raise TargetTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _failure(exc: BaseException, what: str) -> dict:
    """The outcome of a provider whose ``what`` raised ``exc``: too_large on running out of device memory."""
    if _is_oom(repr(exc)):
        return {"status": "too_large", "reason": f"{what} crashed: {exc!r}"[:500], "code": reasons.TOO_LARGE}
    return {"status": "failed", "reason": f"{what} crashed: {exc!r}"[:500], "code": reasons.RAISED}


def measure_target(target: dict, impl: RerunAdapter, device_bytes: int, log=print, device: str = "cuda",
                   timeout_s: float | None = None) -> tuple[dict, dict]:
    """(outcomes, stats) of one target: each provider's status (correctness first, once), then the
    measurements of those that passed, ``stats`` as {family: {provider: {(mode, metric): stats}}} (with an
    ``outcome`` entry where a provider's measurement under that protocol alone crashed). A compiled provider
    that fell back to eager in any phase is failed (code ``fell_back``) and keeps no timings. Past
    ``timeout_s`` the providers not yet settled are ``timeout``, with the time the target took."""
    from kernelindex_pipeline.gpu.harness import release_memory

    kernel = target["kernel"]
    outcomes = {p: {"status": "unavailable", "reason": r, "code": reasons.NO_RERUN_PROVIDER}
                for p, r in target.get("unavailable", {}).items()}
    stats: dict = {P.RERUN_FAMILY: {}, P.SOURCE_REPLICA_FAMILY: {}}
    providers = [p for p in target["providers"] if p not in outcomes]
    large = too_large_reason(kernel, target["params"], tensor_dtype(target), device_bytes)
    if large:
        outcomes.update({p: {"status": "too_large", "reason": large, "code": reasons.TOO_LARGE} for p in providers})
        return outcomes, stats
    started = time.monotonic()
    try:
        with target_deadline(timeout_s):
            _measure(target, impl, providers, outcomes, stats, log, device)
    except TargetTimeout:
        elapsed = time.monotonic() - started
        log(f"  {kernel} {target['params']}: timed out after {elapsed:.0f} s")
        for p in providers:
            if outcomes.get(p, {}).get("status", "passed") == "passed":
                outcomes[p] = {"status": "timeout", "code": reasons.TIMEOUT,
                               "reason": f"the target did not finish within {timeout_s:g} s (stopped after "
                                         f"{elapsed:.0f} s)", "elapsed_s": round(elapsed, 1)}
                for family in stats.values():
                    family.pop(p, None)
        if device == "cuda":
            import torch

            torch.cuda.synchronize()
        release_memory()
    return outcomes, stats


def _measure(target: dict, impl: RerunAdapter, providers: list[str], outcomes: dict, stats: dict, log, device: str):
    """The phases of ``measure_target``, filling ``outcomes`` and ``stats`` as they go."""
    from kernelindex_pipeline.core.catalog import is_compiled
    from kernelindex_pipeline.gpu.guards import compile_report, fell_back
    from kernelindex_pipeline.gpu.correctness import check_correctness
    from kernelindex_pipeline.gpu.harness import measure_latency, measure_memory, measure_replica, release_memory

    kernel = target["kernel"]
    try:
        corr = check_correctness(impl, providers, target["params"], tensor_dtype(target), device)
    except Exception as exc:  # noqa: BLE001 - one target's crash does not end the session
        outcomes.update({p: _failure(exc, "correctness check") for p in providers})
        release_memory()
        return
    for p in providers:
        c = dict(corr[p])
        if c["status"] == "failed" and _is_oom(c.get("reason")):
            c.update(status="too_large", code=reasons.TOO_LARGE)
        outcomes[p] = c
    release_memory()

    def crashed(ps, what, exc):
        log(f"  {kernel} {ps}: {what} crashed: {exc!r}")
        for p in ps:
            outcomes[p] = dict(outcomes[p], **_failure(exc, what))
        release_memory()

    def still_compiled(family, ps, what):
        """A compiled provider that fell back while ``what`` timed it keeps no timings of this protocol."""
        for p in ps:
            if is_compiled(kernel, p):
                report = compile_report()
                fallback = fell_back(report)
                if fallback:
                    log(f"  {kernel} {p}: {fallback} during {what}")
                    stats[family][p] = {"outcome": dict(outcomes[p], status="failed", code=reasons.FELL_BACK,
                                                        reason=f"{fallback} during {what}", compile=report)}

    metrics = target.get("metrics", ["latency", "peak_memory"])
    passed = lambda: [p for p in providers if outcomes[p]["status"] == "passed"]  # noqa: E731
    if "peak_memory" in metrics:
        for p in passed():
            try:
                stats[P.RERUN_FAMILY].setdefault(p, {}).update(measure_memory(impl, target, p))
            except Exception as exc:  # noqa: BLE001 - recorded as a failed provider
                crashed([p], "memory measurement", exc)
    if "latency" in metrics and passed():
        try:
            for p, st in measure_latency(impl, target, passed()).items():
                stats[P.RERUN_FAMILY].setdefault(p, {}).update(st)
            still_compiled(P.RERUN_FAMILY, passed(), "device-time latency")
        except Exception as exc:  # noqa: BLE001 - recorded as failed providers
            crashed(passed(), "latency measurement", exc)
        for p in passed():
            try:
                stats[P.SOURCE_REPLICA_FAMILY].setdefault(p, {}).update(measure_replica(impl, target, [p])[p])
                still_compiled(P.SOURCE_REPLICA_FAMILY, [p], "source-replica latency")
            except Exception as exc:  # noqa: BLE001 - recorded as failed under this protocol alone
                log(f"  {kernel} {p}: source-replica measurement crashed: {exc!r}")
                stats[P.SOURCE_REPLICA_FAMILY][p] = {
                    "outcome": dict(outcomes[p], **_failure(exc, "source-replica measurement"))}
                release_memory()
