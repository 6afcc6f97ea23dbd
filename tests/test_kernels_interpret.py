"""KernelIndex's Triton kernels under Triton's CPU interpreter: forward and gradients against references.

TRITON_INTERPRET must be set before triton is imported, so this module sets it first.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import dataclasses  # noqa: E402
import gzip  # noqa: E402
import importlib.util  # noqa: E402

import pytest  # noqa: E402

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from kernels.adapter import Built, load_adapter  # noqa: E402
from kernels.tensors import leaf_copies  # noqa: E402
from kernels.engines.gated_mlp import gated_mlp  # noqa: E402
from kernels.engines.gated_mlp.settings import MLP_ASSEMBLY  # noqa: E402
from kernels.llama4_rope import ops as llama4_rope_ops  # noqa: E402
from kernels.engines.norm import backward, forward, launch, partials, settings  # noqa: E402
from kernels.engines.norm.settings import OneRow, RowChunks, RowTiles, SlicedRows, WholeRow  # noqa: E402
from kernelindex_pipeline.gpu import bench, records, rerun  # noqa: E402
from kernelindex_pipeline.gpu import protocol as P  # noqa: E402
from kernelindex_pipeline.gpu.correctness import check_correctness  # noqa: E402

SEEDS = (1, 2, 3)

# Small shapes; odd sizes exercise masking (row/column tails, head counts that are not powers of two).
CASES = [
    ("llama4_rope", {"seq": 16, "hidden": 256, "q_heads": 4, "kv_heads": 2}),
    ("llama4_rope", {"seq": 7, "hidden": 192, "q_heads": 6, "kv_heads": 3, "batch": 2}),
    ("rope", {"seq": 16, "hidden": 256, "q_heads": 4, "kv_heads": 2}),
    ("rope", {"seq": 9, "hidden": 96, "q_heads": 3, "kv_heads": 1, "batch": 2}),
    ("geglu", {"batch": 2, "seq": 8, "hidden": 64, "intermediate": 96}),
    ("geglu", {"batch": 1, "seq": 5, "hidden": 48, "intermediate": 1100}),
    ("swiglu", {"batch": 2, "seq": 8, "hidden": 64, "intermediate": 96}),
    ("rms_norm", {"rows": 9, "hidden": 200, "eps": 1e-6}),
    ("rms_norm", {"rows": 33, "hidden": 64, "eps": 1e-5}),
    ("layer_norm", {"rows": 9, "hidden": 200, "eps": 1e-6}),
    ("layer_norm", {"rows": 33, "hidden": 64, "eps": 1e-5}),
    # wide rows: partial weight-gradient sums kept in memory rather than registers
    ("rms_norm", {"rows": 9, "hidden": 16400, "eps": 1e-6}),
    ("layer_norm", {"rows": 9, "hidden": 16400, "eps": 1e-6}),
]


def _impl(kernel):
    return load_adapter(kernel)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize(("kernel", "params"), CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)])
def test_kernelindex_matches_reference(kernel, params, dtype):
    impl = _impl(kernel)
    result = check_correctness(impl, ["kernelindex"], params, dtype, "cpu", seeds=SEEDS)["kernelindex"]
    assert result["status"] == "passed", result.get("reason")
    assert set(result["outputs"]) == set(impl.OUTPUT_NAMES)
    assert set(result["gradients"]) == set(impl.GRAD_INPUTS)
    if dtype == "fp32":
        for kind in ("outputs", "gradients"):
            for name, v in result[kind].items():
                assert v["rel_error"] < 1e-5, (kind, name, v)


@pytest.mark.parametrize("kernel", sorted({k for k, _ in CASES}))
def test_inputs_are_seeded_random_with_spec_shapes(kernel):
    import kernels
    from kernels.adapter import load_adapter

    impl = _impl(kernel)
    params = next(p for k, p in CASES if k == kernel)
    a = impl.make_inputs(params, "bf16", 5, "cpu")
    b = impl.make_inputs(params, "bf16", 5, "cpu")
    c = impl.make_inputs(params, "bf16", 6, "cpu")
    for t in kernels.lookup(kernel).input_tensors(params, "bf16"):
        x = a[t["name"]]
        assert list(x.shape) == t["shape"]
        assert x.dtype == torch.bfloat16
        assert torch.count_nonzero(x) > 0
        assert torch.equal(x, b[t["name"]])
        if t["name"] not in impl.DETERMINISTIC_INPUTS:
            assert not torch.equal(x, c[t["name"]])


def test_seed_workload_floors():
    rope = _impl("llama4_rope")
    p = {"seq": 2048, "hidden": 2048, "q_heads": 32, "kv_heads": 8}
    qk = 2048 * (32 + 8) * 64 * 2
    freqs = 2048 * 32 * 8
    assert rope.bytes_moved(p, "bf16", "backward") == 2 * qk + freqs
    geglu = _impl("geglu")
    g = {"batch": 8, "seq": 8192, "hidden": 4096, "intermediate": 11008}
    assert geglu.flops(g, "backward") == 12 * 65536 * 4096 * 11008
    assert geglu.flops(g, "full") == 18 * 65536 * 4096 * 11008


class _BrokenRope(torch.autograd.Function):
    """The KernelIndex llama4 RoPE kernel launched with the wrong rotation sign in the forward pass."""

    @staticmethod
    def forward(ctx, q, k, freqs_cis):
        f = llama4_rope_ops.freqs_real(freqs_cis, q.shape[-1])
        ctx.save_for_backward(f)
        return llama4_rope_ops.launch(q, k, f, -1.0)

    @staticmethod
    def backward(ctx, dq, dk):
        (f,) = ctx.saved_tensors
        return (*llama4_rope_ops.launch(dq, dk, f, 1.0), None)


def test_comparator_catches_broken_kernel():
    impl = _impl("llama4_rope")

    def build(provider, inputs, params=None):
        if provider != "kernelindex":
            return impl.build(provider, inputs, params)
        lv = leaf_copies(inputs, impl.GRAD_INPUTS)
        return Built(lambda: _BrokenRope.apply(lv["q"], lv["k"], inputs["freqs_cis"]), lv, "broken", impl.OUTPUT_NAMES)

    params = {"seq": 8, "hidden": 128, "q_heads": 4, "kv_heads": 2}
    res = check_correctness(impl, ["kernelindex", "huggingface"], params, "bf16", "cpu", seeds=(1, 2), build=build)
    assert res["kernelindex"]["status"] == "failed"
    assert "rel_error" in res["kernelindex"]["reason"]
    assert res["huggingface"]["status"] == "passed"


def test_comparator_fails_nan_and_crash():
    impl = _impl("rms_norm")

    def build(provider, inputs, params=None):
        lv = leaf_copies(inputs, impl.GRAD_INPUTS)
        if provider == "kernelindex":
            return Built(lambda: (lv["x"] * float("nan") * lv["weight"],), lv, "nan", impl.OUTPUT_NAMES)

        def crash():
            raise RuntimeError("boom")

        return Built(crash, lv, "crash", impl.OUTPUT_NAMES)

    res = check_correctness(impl, ["kernelindex", "torch"], {"rows": 4, "hidden": 32}, "fp32", "cpu", seeds=(1,),
                            build=build)
    assert res["kernelindex"]["status"] == "failed"
    assert res["torch"]["status"] == "failed" and "boom" in res["torch"]["reason"]


@pytest.mark.skipif(importlib.util.find_spec("liger_kernel") is None, reason="liger_kernel is not installed")
def test_liger_llama4_rope_matches_reference():
    from liger_kernel.ops.llama4_rope import LigerLlama4RopeFunction

    impl = _impl("llama4_rope")

    def build(provider, inputs, params=None):
        lv = leaf_copies(inputs, impl.GRAD_INPUTS)
        # Liger rotates its inputs in place; hand it copies of the leaves.
        return Built(lambda: LigerLlama4RopeFunction.apply(lv["q"] * 1, lv["k"] * 1, inputs["freqs_cis"]), lv,
                     "liger", impl.OUTPUT_NAMES)

    params = {"seq": 16, "hidden": 256, "q_heads": 4, "kv_heads": 2}
    res = check_correctness(impl, ["liger"], params, "fp32", "cpu", seeds=SEEDS, build=build)["liger"]
    assert res["status"] == "passed", res.get("reason")


def test_entry_point_without_cuda_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(rerun, "cuda_available", lambda: False)
    out = tmp_path / "sub" / "h200.jsonl.gz"
    assert bench.main is rerun.main  # the command's first name runs the same entry point
    assert rerun.main(["--out", str(out), "--targets", "seeds"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == rerun.NO_CUDA_MESSAGE and len(err.splitlines()) == 1
    assert not out.exists() and not out.parent.exists()
    with pytest.raises(rerun.NoCudaDevice):
        rerun.run_reruns([{"kernel": "geglu"}], out)
    assert not out.exists()


def test_record_shape():
    impl = _impl("geglu")
    target = {"kernel": "geglu", "params": {"batch": 8, "seq": 8192, "hidden": 4096, "intermediate": 11008},
              "dtype": "bf16", "providers": ["kernelindex"], "modes": ["backward"]}
    env = {"apiVersion": "kernelindex.dev/v1alpha1", "kind": "ExecutionEnvironment", "metadata": {"name": "x"},
           "spec": {"ceilings": {"copyTBps": 4.0, "bf16MatmulTFLOPs": 800.0}}}
    corr = {"seeds": [1], "outputs": {"y": {"rel_error": 1e-3, "tolerance": 1e-2}}, "gradients": {},
            "status": "passed"}
    doc = P.protocol_document("backward")
    rec = records.evidence_record(target, impl, "kernelindex", "label", "backward", "latency",
                                  {"median": 50_000_000, "p20": 49_000_000, "p80": 51_000_000,
                                   "samples": [49_000_000, 50_000_000, 51_000_000]},
                                  corr, env, "2026-12-02T00:00:00Z", doc, "0123456789ab")
    assert set(rec) == {"kernel", "provider", "implementation_label", "implementation", "mode", "metric", "unit",
                        "median", "p20", "p80", "samples", "status", "reason", "correctness", "params", "dtype",
                        "tensor_dtype", "implied", "bytes", "flops", "achieved", "observed_at", "protocol",
                        "environment", "reason_code", "compile", "backend", "session"}
    assert rec["dtype"] == rec["tensor_dtype"] == "bf16"
    assert rec["samples"] == [49_000_000, 50_000_000, 51_000_000] and rec["reason"] is None
    assert rec["reason_code"] is rec["compile"] is rec["backend"] is rec["session"] is None
    assert rec["implementation"] == {"provider": "kernelindex", "label": "label", "code_revision": "0123456789ab"}
    assert rec["implied"] == {"hidden_act": "gelu_pytorch_tanh"}
    assert rec["protocol"]["metadata"]["name"] == "kernelindex-rerun-backward"
    assert rec["protocol"]["spec"]["measurement"]["timer"] == "cuda_events"
    assert rec["achieved"]["tflops"] == pytest.approx(impl.flops(target["params"], "backward") / 5e7 / 1e3, rel=1e-3)
    failed = records.evidence_record(target, impl, "kernelindex", "label", "backward", "latency", None,
                                     {**corr, "status": "failed", "reason": "bad"}, env, "2026-12-02T00:00:00Z", doc)
    assert failed["median"] is None and failed["status"] == "failed" and failed["correctness"]["reason"] == "bad"
    assert failed["reason"] == "bad" and failed["samples"] is None


def test_shipped_evidence_records_pair_with_upstream_names():
    import json
    from pathlib import Path

    import kernels

    files = sorted(Path(__file__).resolve().parents[1].joinpath("data", "evidence").glob("*.jsonl.gz"))
    if not files:
        pytest.skip("no evidence shipped yet")
    for path in files:
        with gzip.open(path, "rt") as fh:
            for line in fh:
                rec = json.loads(line)
                spec = kernels.lookup(rec["kernel"])
                # Where the spec cannot state the shapes (GRPO's, cross entropy by model name), the kernel's
                # rerun adapter derives them.
                assert spec.input_tensors(rec["params"], rec["dtype"]) is not None or load_adapter(rec["kernel"])
                assert rec["status"] in P.STATUSES
                assert (rec["median"] is None) == (rec["status"] != "passed")
                if rec["status"] not in ("passed", "failed"):
                    assert rec["reason"]


BWD_VARIANTS = [
    WholeRow(programs_per_sm=1, warps=4, prefetch="x_dy"),
    WholeRow(programs_per_sm=2, warps=4, partials_in_memory=True, reload_w=True, prefetch="x_dy"),
    WholeRow(programs_per_sm=1, warps=4, partials_in_memory=True),
    WholeRow(programs_per_sm=3, warps=4, reload_w=True, prefetch="x_dy"),
    WholeRow(programs_per_sm=1, warps=4, stages=2),
    WholeRow(programs_per_sm=2, warps=4, partials_in_memory=True, stages=3),
    WholeRow(programs_per_sm=3, warps=4, prefetch="x"),
    WholeRow(programs_per_sm=1, warps=4, partials_in_memory=True, reload_w=True, prefetch="x"),
    SlicedRows(programs_per_sm=2, warps=4, slices=2),
    SlicedRows(programs_per_sm=3, warps=4, slices=2, reload_w=True),
    SlicedRows(programs_per_sm=4, warps=4, slices=4, reload_w=True),
    SlicedRows(programs_per_sm=1, warps=4, slices=4),
    SlicedRows(programs_per_sm=2, warps=4, slices=2, stages=2),
    SlicedRows(programs_per_sm=4, warps=4, slices=4, reload_w=True, stages=3),
    # the other slice's w held
    SlicedRows(programs_per_sm=2, warps=4, slices=2, hold_other_w=True, stages=2),
    # more programs than can be resident at once under the interpreter: the separate partial-sums launch
    WholeRow(programs_per_sm=2, warps=4, fused_sum=True),
    SlicedRows(programs_per_sm=2, warps=4, slices=2, stages=2, fused_sum=True),
    # rows of 200 columns cannot be TMA tiles: the plain-load sliced kernel
    SlicedRows(programs_per_sm=2, warps=4, slices=2, stages=2, tma=True),
]


def _norm_inputs(rows, hidden, seed):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, hidden, generator=gen), torch.randn(hidden, generator=gen) * 0.1 + 1.0,
            torch.randn(hidden, generator=gen) * 0.1, torch.randn(rows, hidden, generator=gen))


def _norm_reference(x, w, b, dy, is_ln):
    """float64 output and gradients (x, w[, b]) of RMSNorm or LayerNorm."""
    xr, wr, br = (t.double().requires_grad_(True) for t in (x, w, b))
    if is_ln:
        ref = torch.nn.functional.layer_norm(xr, (x.shape[-1],), wr, br, 1e-6)
    else:
        ref = xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr
    ref.backward(dy.double())
    return ref.detach(), [xr.grad, wr.grad] + ([br.grad] if is_ln else [])


@pytest.mark.parametrize("is_ln", [False, True])
@pytest.mark.parametrize("setting", BWD_VARIANTS, ids=repr)
def test_norm_backward_launch_variants(is_ln, setting):
    """Every backward launch setting (programs per SM, partials in memory, reloaded w, prefetch, pipelining,
    rows split in column slices over several programs)."""
    x, w, b, dy = _norm_inputs(37, 200, 5)
    _, mean, rstd = launch.norm_forward(x, w, b, 1e-6, is_ln)
    dx, dw, db = launch.norm_backward(dy, x, w, mean, rstd, is_ln, setting=setting)
    _, want = _norm_reference(x, w, b, dy, is_ln)
    for got, ref in zip([dx, dw] + ([db] if is_ln else []), want):
        assert torch.allclose(got.double(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("is_ln", [False, True])
@pytest.mark.parametrize(("hidden", "slices", "kwargs"), [
    (512, 2, dict(stages=2)), (1024, 4, dict(reload_w=True)), (1024, 1, dict(stages=3)), (2048, 2, {}),
    (1024, 2, dict(stages=2, hold_other_w=True))])
def test_norm_backward_loads_tma_tiles(is_ln, hidden, slices, kwargs, monkeypatch):
    """Rows of power-of-two length, each slice moved as [lines, 256] TMA tiles: the sliced kernel gets x and
    dy as TMA descriptors (not plain pointers) and gives the reference dx and dW (dB); the whole row when
    there is one slice."""
    sliced = backward.SLICED_ROWS
    sources = []

    def recording(grid, key, args, *rest, **kw):
        sources.extend(args[:2])
        return sliced(grid, key, args, *rest, **kw)

    monkeypatch.setattr(backward, "SLICED_ROWS", recording)
    x, w, b, dy = _norm_inputs(37, hidden, hidden + slices)
    assert launch.tma_lines(hidden, slices, x, dy) == hidden // (256 * slices)
    _, mean, rstd = launch.norm_forward(x, w, b, 1e-6, is_ln)
    setting = SlicedRows(programs_per_sm=3, warps=4, slices=slices, tma=True, **kwargs)
    dx, dw, db = launch.norm_backward(dy, x, w, mean, rstd, is_ln, setting=setting)
    assert len(sources) == 2 and all(isinstance(src, TensorDescriptor) for src in sources)
    assert [src.block_shape for src in sources] == [[hidden // (256 * slices), 256]] * 2
    _, want = _norm_reference(x, w, b, dy, is_ln)
    for got, ref in zip([dx, dw] + ([db] if is_ln else []), want):
        assert torch.allclose(got.double(), ref, rtol=1e-4, atol=1e-4)


def test_tma_tiles_only_where_rows_fit_them():
    """Rows that are not a power of two, slices narrower than one 256-column line, or data off 16-byte
    alignment are not TMA tiles (the plain-load kernel takes them)."""
    x = torch.zeros(4, 4096)
    assert launch.tma_lines(4096, 2, x) == 8 and launch.tma_lines(4096, 1, x) == 16
    assert launch.tma_lines(4000, 1, x) == 0 and launch.tma_lines(256, 2, x) == 0
    assert launch.tma_lines(4096, 2, x.view(-1)[1:4097]) == 0


@pytest.mark.parametrize("n_groups", [1, 64, 150])
def test_norm_partial_sums_reduce_every_program_and_column(n_groups):
    """The launch that turns per-program partials into dW (and dB): every group (over several tiles of groups)
    and every column counted, the result in the output dtype."""
    parts = torch.randn(2, n_groups, 300, generator=torch.Generator().manual_seed(n_groups))
    out = torch.empty(2, 300, dtype=torch.bfloat16)
    partials.SUM_PARTIALS((3, 2), None, (parts, out, n_groups, 300, partials.SUM_GROUPS, partials.SUM_COLS),
                          partials.SUM_WARPS, tensors=(parts, out))
    assert torch.allclose(out.float(), parts.sum(1), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("is_ln", [False, True])
@pytest.mark.parametrize("in_memory", [False, True])
def test_norm_backward_sums_partials_behind_the_grid_barrier(is_ln, in_memory, monkeypatch):
    """fused_sum: the backward's own programs sum the dW (dB) partials after a grid barrier. The interpreter
    runs one program at a time, so it can only run a one-program grid (one SM); three launches in a row check
    that the barrier words are left ready for the next launch."""
    monkeypatch.setattr(launch, "sm_count", lambda device: 1)
    setting = WholeRow(programs_per_sm=1, warps=4, partials_in_memory=in_memory, fused_sum=True)
    launches = []
    monkeypatch.setattr(partials, "SUM_PARTIALS", lambda *a, **k: launches.append(a))
    generation = launch.sync_words(torch.device("cpu"))[1].item()
    for seed in (1, 2, 3):
        x, w, b, dy = _norm_inputs(7, 200, seed)
        _, mean, rstd = launch.norm_forward(x, w, b, 1e-6, is_ln)
        dx, dw, db = launch.norm_backward(dy, x, w, mean, rstd, is_ln, setting=setting)
        _, want = _norm_reference(x, w, b, dy, is_ln)
        for got, ref in zip([dx, dw] + ([db] if is_ln else []), want):
            assert torch.allclose(got.double(), ref, rtol=1e-4, atol=1e-4)
    assert launches == []
    assert launch.sync_words(x.device).tolist() == [0, generation + 3]


def test_committed_norm_launch_settings_compute_the_norms():
    """Each committed forward and backward setting, at its own row width, gives the reference output and
    gradients (the tables are edited by hand from tune runs)."""
    for norm, width in sorted(set(settings.FORWARD_SETTINGS) | set(settings.BACKWARD_SETTINGS)):
        is_ln = norm == "layer_norm"
        x, w, b, dy = _norm_inputs(5, width, width)
        y, mean, rstd = launch.norm_forward(x, w, b, 1e-6, is_ln)
        dx, dw, db = launch.norm_backward(dy, x, w, mean, rstd, is_ln)
        want_y, want = _norm_reference(x, w, b, dy, is_ln)
        assert torch.allclose(y.double(), want_y, rtol=1e-5, atol=1e-5), (is_ln, width)
        for got, ref in zip([dx, dw] + ([db] if is_ln else []), want):
            assert torch.allclose(got.double(), ref, rtol=1e-4, atol=1e-4), (is_ln, width)


@pytest.mark.parametrize("fuse_gate_up", [True, False])
@pytest.mark.parametrize("save_h", [True, False])
@pytest.mark.parametrize("kernel", ["geglu", "swiglu"])
def test_gated_mlp_assemblies(kernel, fuse_gate_up, save_h):
    """Every way of putting the MLP together (one or two gate/up GEMMs, h saved or recomputed) matches the
    reference in outputs and every gradient, and repeated backward passes over one graph agree."""
    impl = _impl(kernel)
    assembly = dataclasses.replace(MLP_ASSEMBLY, fuse_min_tokens=0 if fuse_gate_up else 2**62, save_h=save_h)

    def build(provider, inputs, params=None):
        lv = leaf_copies(inputs, impl.GRAD_INPUTS)
        return Built(lambda: (gated_mlp(lv["x"], lv["w_gate"], lv["w_up"], lv["w_down"], impl.ACTIVATION, assembly),),
                     lv, "assembly", impl.OUTPUT_NAMES)

    params = {"batch": 2, "seq": 5, "hidden": 48, "intermediate": 1100}
    result = check_correctness(impl, ["kernelindex"], params, "fp32", "cpu", seeds=SEEDS, build=build)["kernelindex"]
    assert result["status"] == "passed", result.get("reason")
    for kind in ("outputs", "gradients"):
        for name, v in result[kind].items():
            assert v["rel_error"] < 1e-5, (kind, name, v)
    built = build("kernelindex", impl.make_inputs(params, "fp32", 3, "cpu"))
    (y,) = built.fn()
    dy = torch.randn_like(y)
    grads = []
    for _ in range(2):
        torch.autograd.backward([y], [dy], retain_graph=True)
        grads.append({k: v.grad.clone() for k, v in built.leaves.items()})
        for v in built.leaves.values():
            v.grad = None
    for k in grads[0]:
        assert torch.equal(grads[0][k], grads[1][k]), k


@pytest.mark.parametrize("is_ln", [False, True])
@pytest.mark.parametrize("hidden", [300, 256], ids=["ragged", "even"])
@pytest.mark.parametrize("setting", [
    RowTiles(rows_per_program=1, warps=4), RowTiles(rows_per_program=4, warps=4), OneRow(warps=4),
    RowTiles(rows_per_program=2, warps=4, stream=True), OneRow(warps=4, stream=True),
    OneRow(warps=4, late_params=True, max_regs=64)],
    ids=["row-tile", "4-rows", "1d-row", "2-rows-streaming", "1d-row-streaming", "1d-row-late-params"])
def test_norm_forward_launch_variants(is_ln, hidden, setting):
    """Every forward launch setting (2-D tiles of one or several rows, the 1-D one-row kernel, cache hints,
    the parameters loaded after the statistics), on rows that fill the tile and rows that do not."""
    x, w, b, dy = _norm_inputs(13, hidden, 6)
    y, mean, rstd = launch.norm_forward(x, w, b, 1e-6, is_ln, setting=setting)
    want, _ = _norm_reference(x, w, b, dy, is_ln)
    if is_ln:
        assert torch.allclose(mean.double(), x.double().mean(-1), atol=1e-6)
    assert torch.allclose(y.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("is_ln", [False, True])
@pytest.mark.parametrize(("hidden", "chunk"), [(512, 128), (512, 512), (300, 64)])
def test_norm_forward_in_chunks(is_ln, hidden, chunk, monkeypatch):
    """The two-sweep forward: the chunks' statistics merged give the row's mean and rstd, and y, also for
    rows whose mean is far from 0 (the merge keeps the variance from cancelling); a row length that is not
    a multiple of the chunk takes the whole-row kernel."""
    unused = ("ROW_TILES", "ONE_ROW") if hidden % chunk == 0 else ("ROW_CHUNKS",)
    for name in unused:
        monkeypatch.setattr(forward, name, lambda *a, _name=name, **k: pytest.fail(f"{_name} launched"))
    x, w, b, dy = _norm_inputs(13, hidden, 7)
    x = x * 3.0 + 40.0
    y, mean, rstd = launch.norm_forward(x, w, b, 1e-6, is_ln, setting=RowChunks(chunk=chunk, warps=4))
    want, _ = _norm_reference(x, w, b, dy, is_ln)
    xd = x.double()
    if is_ln:
        assert torch.allclose(mean.double(), xd.mean(-1), rtol=1e-6)
        var = xd.var(-1, unbiased=False)
    else:
        var = xd.pow(2).mean(-1)
    assert torch.allclose(rstd.double(), torch.rsqrt(var + 1e-6), rtol=1e-5)
    assert torch.allclose(y.double(), want, rtol=1e-5, atol=1e-4)


def test_launch_settings_refuse_what_no_kernel_runs():
    """A setting record is checked when it is made: the other slice's w can only be held with two slices,
    counts are positive, prefetch names what is prefetched."""
    with pytest.raises(ValueError, match="two slices"):
        SlicedRows(programs_per_sm=4, warps=4, slices=4, hold_other_w=True)
    with pytest.raises(ValueError, match="warps"):
        RowTiles(rows_per_program=1, warps=0)
    with pytest.raises(ValueError, match="prefetch"):
        WholeRow(programs_per_sm=1, warps=4, prefetch="dy")
    with pytest.raises(TypeError):
        SlicedRows(1, 8, 2)  # keyword fields only


def test_tune_picks_fastest_correct_setting_and_refuses_without_cuda(capsys):
    from kernelindex_pipeline.gpu import tune

    rows = [{"shape": "s", "pass": "forward", "candidate": "committed", "us": 10.0, "ok": True},
            {"shape": "s", "pass": "forward", "candidate": RowTiles(rows_per_program=8, warps=4), "us": 9.0, "ok": True},
            {"shape": "s", "pass": "forward", "candidate": RowTiles(rows_per_program=4, warps=4), "us": 5.0, "ok": False},
            {"shape": "s", "pass": "forward", "candidate": "liger", "us": 4.0, "ok": True}]
    (line,) = tune.best(rows)
    assert "rows_per_program=8" in line and "committed 10.0" in line and "liger 4.0" in line
    for hidden in (1024, 4096, 16384):
        forward_cands = tune.forward_candidates(hidden)
        assert all(isinstance(c, (RowTiles, OneRow, RowChunks)) for c in forward_cands)
        assert all(c.chunk <= hidden // 2 for c in forward_cands if isinstance(c, RowChunks))
        late = [c for c in forward_cands if isinstance(c, OneRow) and c.late_params]
        capped = [c for c in late if c.max_regs]
        assert late and capped and all(2 * c.max_regs * c.warps * 32 <= 65536 for c in capped)
        backward_cands = tune.backward_candidates(hidden)
        assert all(isinstance(c, (WholeRow, SlicedRows)) for c in backward_cands)
        assert len(set(backward_cands)) == len(backward_cands)
        fused = [c for c in backward_cands if c.fused_sum]
        assert fused and all(c.programs_per_sm == 1 for c in fused)  # one program per SM: all resident at once
    if not torch.cuda.is_available():
        assert tune.main([]) == 2
        assert "no CUDA device" in capsys.readouterr().err
