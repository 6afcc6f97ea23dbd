"""The rerun session without a GPU: budget and continuation on a fake clock, record shapes under both
protocols (samples for latency; unavailable, too_large and failed records with reasons), file naming."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest

from kernels.adapter import load_adapter
from kernelindex_pipeline.core import catalog
from kernelindex_pipeline.ingest.evidence import controlled_run
from kernelindex_pipeline.gpu import measure, records, rerun

REPO = Path(__file__).resolve().parent.parent

ENV = {"apiVersion": "kernelindex.dev/v1alpha1", "kind": "ExecutionEnvironment", "metadata": {"name": "x", "title": "x"},
       "spec": {"ceilings": {"copyTBps": 4.0, "bf16MatmulTFLOPs": 800.0},
                "hardware": {"product": "NVIDIA H200", "formFactor": "SXM", "architecture": "hopper"}}}
TARGET = {"kernel": "rms_norm", "params": {"rows": 2048, "hidden": 1024, "eps": 1e-06}, "dtype": "bf16",
          "providers": ["liger", "huggingface", "kernelindex"], "unavailable": {"torch": "no rerun provider for torch"},
          "modes": ["forward", "full"], "metrics": ["latency", "peak_memory"]}


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_budget_skips_targets_that_would_not_fit_and_returns_them_in_order():
    clock = FakeClock()
    cost = {"a": 50.0, "b": 20.0, "c": 5.0}
    done = []

    def measure(t):
        done.append(t["id"])
        clock.now += cost[t["kernel"]]

    targets = [{"kernel": k, "id": i} for i, k in enumerate("ababababc")]
    left = rerun.run_within_budget(targets, measure, budget_s=200, clock=clock, log=lambda *_: None)
    # a: 30 s expected first (fits), then each kernel as its last target took: 50+20+50+20 = 140; the next
    # a (50 s) would end at 190 <= 200, so it runs; b (20 s) would end at 210 > 200 and a at 240: left.
    # c, never measured, is expected to take the median so far (50 s): left too.
    assert done == [0, 1, 2, 3, 4] and [t["id"] for t in left] == [5, 6, 7, 8]
    assert rerun.run_within_budget(left, measure, budget_s=None, clock=clock) == []
    assert done[5:] == [5, 6, 7, 8]


def test_a_cheaper_kernel_still_runs_after_a_slow_one_is_left():
    clock = FakeClock()
    cost = {"slow": 80.0, "quick": 5.0}
    done = []

    def measure(t):
        done.append(t["id"])
        clock.now += cost[t["kernel"]]

    targets = [{"kernel": k, "id": i} for i, k in enumerate(["quick", "slow", "slow", "quick", "quick"])]
    left = rerun.run_within_budget(targets, measure, budget_s=100, clock=clock, log=lambda *_: None)
    # quick (30 s expected) 5, slow (30 expected) 80 -> 85 used; slow again (80) would end at 165: left;
    # quick (5) fits twice.
    assert done == [0, 1, 3, 4] and [t["id"] for t in left] == [2]


def test_continuation_file_shrinks_after_every_target(tmp_path):
    clock = FakeClock()
    path = tmp_path / "remaining.json"
    targets = [{"kernel": "a", "id": i} for i in range(4)]
    rerun.write_targets(path, targets)
    seen = []

    def measure(t):
        seen.append(len(rerun.read_targets(path)))
        clock.now += 40

    left = rerun.run_within_budget(targets, measure, budget_s=100, clock=clock,
                                   after=lambda rest: rerun.write_targets(path, rest), log=lambda *_: None)
    rerun.write_targets(path, left)
    assert seen == [4, 3] and rerun.read_targets(path) == targets[2:]


def test_nothing_fits_leaves_every_target():
    clock = FakeClock()
    left = rerun.run_within_budget([{"kernel": "a"}], lambda t: None, budget_s=10, clock=clock, log=lambda *_: None)
    assert left == [{"kernel": "a"}]


def _records(outcomes, stats):
    impl = load_adapter("rms_norm")
    by_provider = rerun.target_records(TARGET, impl, outcomes, stats, ENV, "2026-12-03T00:00:00Z", "0123456789ab")
    return [r for recs in by_provider.values() for r in recs]


def _stats(samples):
    return {"median": samples[1], "p20": samples[0], "p80": samples[2], "samples": samples, "repetitions": 3}


def test_records_cover_every_provider_mode_metric_and_protocol():
    outcomes = {"torch": {"status": "unavailable", "reason": "no rerun provider for torch"},
                "liger": {"status": "passed", "label": "liger-kernel 0.8.5"},
                "huggingface": {"status": "failed", "reason": "outputs y: rel error 1 > 0.01"},
                "kernelindex": {"status": "passed", "label": "kernelindex"}}
    lat = _stats([9000, 10000, 11000])
    mem = {"median": 2**20, "p20": 2**20, "p80": 2**20}
    stats = {catalog.RERUN_FAMILY: {p: {(m, "latency"): lat for m in TARGET["modes"]}
                                    | {(m, "peak_memory"): mem for m in TARGET["modes"]} for p in ("liger", "kernelindex")},
             catalog.SOURCE_REPLICA_FAMILY: {"liger": {(m, "latency"): lat for m in TARGET["modes"]},
                                             "kernelindex": {"outcome": {"status": "failed", "reason": "crashed"}}}}
    recs = _records(outcomes, stats)
    # 4 providers x 2 modes x (2 metrics kernelindex_rerun + 1 source_replica)
    assert len(recs) == 4 * 2 * 3
    family = lambda r: r["protocol"]["spec"]["comparability"]["family"]  # noqa: E731
    for r in recs:
        timed = r["status"] == "passed"
        assert (r["median"] is not None) == timed
        assert (r["reason"] is None) == timed
        if r["metric"] == "latency" and timed:
            assert r["samples"] == [9000, 10000, 11000]
        else:
            assert r["samples"] is None
    by = {(r["provider"], family(r), r["mode"], r["metric"]): r for r in recs}
    assert by[("torch", "source_replica", "full", "latency")]["status"] == "unavailable"
    assert by[("torch", "kernelindex_rerun", "forward", "peak_memory")]["reason"] == "no rerun provider for torch"
    assert by[("huggingface", "source_replica", "forward", "latency")]["status"] == "failed"
    assert by[("kernelindex", "kernelindex_rerun", "full", "latency")]["status"] == "passed"
    assert by[("kernelindex", "source_replica", "full", "latency")]["status"] == "failed"
    assert by[("kernelindex", "source_replica", "full", "latency")]["implementation"]["code_revision"] == "0123456789ab"
    assert "code_revision" not in by[("liger", "source_replica", "full", "latency")]["implementation"]
    replica = by[("liger", "source_replica", "forward", "latency")]["protocol"]
    assert replica["metadata"]["name"] == "liger-do-bench-replica-forward"
    assert replica["spec"]["measurement"]["quantiles"] == [0.5, 0.2, 0.8]
    assert replica["spec"]["measurement"]["launchOverhead"] == "included"
    assert by[("liger", "kernelindex_rerun", "forward", "latency")]["protocol"]["metadata"]["name"] == "kernelindex-rerun-forward"


def test_evidence_accepts_records_without_timings():
    outcomes = {p: {"status": "too_large", "reason": "inputs exceed the device"} for p in TARGET["providers"]}
    outcomes["torch"] = {"status": "unavailable", "reason": "no rerun provider for torch"}
    for rec in _records(outcomes, {}):
        row, *_ = controlled_run(json.loads(json.dumps(rec)), "h200-x.jsonl.gz")
        assert row["median_value"] is None and row["status"] in ("too_large", "unavailable")


def test_too_large_is_judged_from_the_input_tensors():
    params = TARGET["params"]
    nbytes = measure.input_bytes("rms_norm", params, "bf16")
    assert nbytes >= 2048 * 1024 * 2
    assert measure.too_large_reason("rms_norm", params, "bf16", 140 * 2**30) is None
    reason = measure.too_large_reason("rms_norm", params, "bf16", nbytes)
    assert reason and "exceed the device" in reason


def test_records_are_appended_as_readable_gzip_members(tmp_path):
    path = tmp_path / "e.jsonl.gz"
    records.append_records(path, [{"a": 1}])
    records.append_records(path, [{"a": 2}, {"a": 3}])
    with gzip.open(path, "rt") as fh:
        assert [json.loads(line)["a"] for line in fh] == [1, 2, 3]


def _gzip_members(data: bytes) -> int:
    members = 0
    while data:
        inflate = zlib.decompressobj(wbits=31)
        inflate.decompress(data)
        data, members = inflate.unused_data, members + 1
    return members


def test_a_sessions_evidence_is_compacted_to_one_member_with_the_same_lines(tmp_path):
    shipped = sorted((REPO / "data" / "evidence").glob("h100-*.jsonl.gz"))[0]
    with gzip.open(shipped, "rt", encoding="utf-8") as fh:
        lines = [json.loads(line) for _, line in zip(range(60), fh)]
    path = tmp_path / "e.jsonl.gz"
    for start in range(0, len(lines), 4):  # a member per provider's records, as a session appends them
        records.append_records(path, lines[start:start + 4])
    before = path.read_bytes()
    records.compact_records(path)
    after = path.read_bytes()
    assert gzip.decompress(after) == gzip.decompress(before)
    assert (_gzip_members(before), _gzip_members(after)) == (15, 1)
    assert len(after) < 0.8 * len(before)
    assert [p.name for p in tmp_path.iterdir()] == ["e.jsonl.gz"]


@pytest.mark.parametrize("gpu, name", [("NVIDIA H200", "h200-2026-12-03-abc.jsonl.gz"),
                                       ("NVIDIA H100 80GB HBM3", "h100-2026-12-03-abc.jsonl.gz")])
def test_evidence_file_is_named_after_gpu_date_and_harness_revision(gpu, name):
    assert records.evidence_name(gpu, "2026-12-03", "abc") == name


def test_harness_revision_is_twelve_hex():
    from kernelindex_pipeline.gpu.provenance import harness_revision, kernel_revision

    for rev in (harness_revision(), kernel_revision("rms_norm")):
        assert len(rev) == 12 and int(rev, 16) >= 0


def test_an_aliased_provider_builds_the_provider_it_renames():
    torch = pytest.importorskip("torch")
    impl = rerun.with_aliases(load_adapter("rms_norm"), {"liger_triton": "huggingface"})
    params = {"rows": 4, "hidden": 8, "eps": 1e-6}
    inputs = impl.make_inputs(params, "fp32", 1, "cpu")
    base, tagged = load_adapter("rms_norm").build("huggingface", inputs, params), impl.build("liger_triton", inputs, params)
    assert tagged.label.startswith(base.label) and "upstream's liger_triton" in tagged.label
    assert "Triton backend" in tagged.label
    assert torch.equal(tagged.fn()[0], base.fn()[0])
    assert impl.KERNEL == "rms_norm" and rerun.with_aliases(impl, {}) is impl


def test_a_target_the_harness_cannot_take_is_logged_and_the_session_goes_on():
    clock = FakeClock()
    done, logged = [], []

    def measure(t):
        if t["id"] == 1:
            raise TypeError("'NoneType' object is not iterable")
        done.append(t["id"])
        clock.now += 1.0

    targets = [{"kernel": "k", "id": i, "params": {"n": i}} for i in range(3)]
    left = rerun.run_within_budget(targets, measure, budget_s=100, clock=clock, log=logged.append)
    assert done == [0, 2] and left == []
    assert any("harness error" in line and "{'n': 1}" in line and "TypeError" in line for line in logged)


def test_a_family_whose_backward_consumes_its_graph_records_what_its_backward_timed():
    """Megatron's cross entropy overwrites its saved softmax in its backward: each backward is timed on a fresh
    forward, and the replica times forward and backward together as the source's script does; other modes
    and other families keep their protocols."""
    megatron = load_adapter("megatron_cross_entropy")
    assert megatron.BACKWARD_CONSUMES_GRAPH and not load_adapter("rms_norm").BACKWARD_CONSUMES_GRAPH
    target = {"kernel": "megatron_cross_entropy", "params": {"batch": 4, "seq": 2048, "tensor_parallel": 1,
                                                             "vocab": 4096},
              "dtype": "bf16", "providers": ["liger"], "modes": ["forward", "backward", "full"], "metrics": ["latency"]}
    lat = _stats([9000, 10000, 11000])
    stats = {family: {"liger": {(m, "latency"): lat for m in target["modes"]}}
             for family in (catalog.RERUN_FAMILY, catalog.SOURCE_REPLICA_FAMILY)}
    recs = rerun.target_records(target, megatron, {"liger": {"status": "passed", "label": "liger"}}, stats, ENV,
                                "2026-12-05T00:00:00Z", "0123456789ab")["liger"]
    names = {r["mode"]: set() for r in recs}
    for r in recs:
        names[r["mode"]].add(r["protocol"]["metadata"]["name"])
    assert names == {"forward": {"kernelindex-rerun-forward", "liger-do-bench-replica-forward"},
                     "backward": {"kernelindex-rerun-backward-fresh-graph", "liger-do-bench-replica-backward-fresh-graph"},
                     "full": {"kernelindex-rerun-full", "liger-do-bench-replica-full"}}
    replica = next(r["protocol"] for r in recs if r["protocol"]["metadata"]["name"].startswith("liger-do-bench-replica-b"))
    assert replica["spec"]["harness"]["call"].startswith("do_bench(lambda: backward(forward(), dy)")
    plain = {r["protocol"]["metadata"]["name"] for r in _records(
        {p: {"status": "passed", "label": p} for p in ("liger", "huggingface", "kernelindex", "torch")}, {})}
    assert not any(name.endswith("fresh-graph") for name in plain)


@pytest.mark.parametrize(("kernel", "params", "built"), [
    ("megatron_rms_norm", {"batch": 1, "hidden": 1024, "seq": 4096}, "bf16"),
    ("kl_div", {"batch": 8, "seq": 512, "vocab": 4096}, "fp32"),
])
def test_a_workload_without_a_dtype_is_built_as_the_sources_script_builds_it(kernel, params, built):
    """Upstream's runs of these kernels record no dtype; its Megatron scripts build bfloat16 tensors, the
    others torch's default float32. The record keeps the workload's (none) and says what it built."""
    from kernelindex_pipeline.gpu.workloads import tensor_dtype

    target = {"kernel": kernel, "params": params, "dtype": None, "providers": ["liger"], "modes": ["forward"],
              "metrics": ["latency"]}
    assert tensor_dtype(target) == built
    impl = load_adapter(kernel)
    stats = {family: {"liger": {("forward", "latency"): _stats([9000, 10000, 11000])}}
             for family in (catalog.RERUN_FAMILY, catalog.SOURCE_REPLICA_FAMILY)}
    (record, _) = rerun.target_records(target, impl, {"liger": {"status": "passed", "label": "liger"}}, stats, ENV,
                                       "2026-12-05T00:00:00Z", None)["liger"]
    assert record["dtype"] is None and record["tensor_dtype"] == built
    assert record["bytes"] == impl.bytes_moved(params, built, "forward")
    assert record["bytes"] != impl.bytes_moved(params, "bf16" if built == "fp32" else "fp32", "forward")
