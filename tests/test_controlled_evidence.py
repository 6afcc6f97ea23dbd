"""Committed H200 evidence becomes KernelIndex-controlled runs in every fresh warehouse."""

import gzip
import json
import math
import shutil
from pathlib import Path

from kernelindex_pipeline.ingest import evidence
from kernelindex_pipeline.publish import steps
from kernelindex_pipeline.defs.checks import recompute_digests
from kernelindex_pipeline.defs.resources import SHIPPED_EVIDENCE
from kernelindex_pipeline.verdicts import rule
from kernelindex_pipeline.warehouse.store import Warehouse

SEED_WORKLOADS = {
    "llama4_rope": "hidden2048-kv_heads8-q_heads32-seq2048-bf16",
    "geglu": "batch8-hidden4096-intermediate11008-seq8192-bf16",
}


def test_seed_workloads_have_controlled_runs_in_every_mode(shipped_warehouse):
    with shipped_warehouse.reader() as con:
        for kernel, slug in SEED_WORKLOADS.items():
            rows = con.execute(
                "SELECT operation_mode, metric, list(DISTINCT provider ORDER BY provider) FROM runs "
                "WHERE evidence_level = 'kernelindex-controlled' AND status = 'passed' AND kernel = ? "
                "AND workload_slug = ? GROUP BY ALL", [kernel, slug]).fetchall()
            found = {(mode, metric): providers for mode, metric, providers in rows}
            for mode in ("forward", "backward", "full"):
                assert found[(mode, "latency")] == ["huggingface", "kernelindex", "liger"], (kernel, mode)
            assert any(metric == "peak_memory" for _, metric in found), kernel


def test_controlled_manifests_carry_protocol_environment_and_ceilings(shipped_warehouse):
    with shipped_warehouse.reader() as con:
        (text,) = con.execute(
            "SELECT m.manifest FROM manifests m JOIN runs r USING (run_id) JOIN controlled_runs c USING (run_id) "
            "WHERE c.family = 'kernelindex_rerun' AND r.kernel = 'llama4_rope' "
            "AND r.provider = 'kernelindex' AND r.operation_mode = 'backward' AND r.metric = 'latency' "
            "AND r.gpu = 'NVIDIA H200' AND r.workload_slug = ? ORDER BY r.observed_at DESC LIMIT 1", [SEED_WORKLOADS["llama4_rope"]]).fetchone()
        assert recompute_digests(con, sample=None)[0] == []
    manifest = json.loads(text)
    environment = manifest["environment"]["spec"]
    assert environment["hardware"]["product"] == "NVIDIA H200" and environment["hardware"]["architecture"] == "sm_90"
    assert {"torch", "triton", "cuda", "driver"} <= set(environment["software"])
    assert "ceilings" not in environment  # the stack identifies the environment; the batch's ceilings stay
    ceilings = manifest["run"]["spec"]["ceilings"]  # with the run
    assert ceilings["copyTBps"] > 1 and ceilings["bf16MatmulTFLOPs"] > 100
    protocol = manifest["protocol"]["spec"]
    assert protocol["comparability"]["family"] == "kernelindex_rerun"
    spec = manifest["run"]["spec"]
    assert spec["evidenceLevel"] == "kernelindex-controlled" and spec["status"] == "passed"
    assert spec["timing"]["latencyNs"]["median"] > 0 and "correctness" in spec


def test_reproductions_pair_controlled_runs_with_the_source_runs_they_recheck(shipped_warehouse):
    with shipped_warehouse.reader() as con:
        rows = con.execute(
            "SELECT p.provider, p.source_gpu, p.ratio_of_medians, p.controlled_median::DOUBLE / p.source_median, "
            "p.order_held, p.source_order FROM reproductions p JOIN runs s ON s.run_id = p.source_run_id "
            "WHERE s.external_id LIKE 'llama4_rope/backward/%/nvidia-h100-80gb-hbm3/hidden2048-kv_heads8-q_heads32-seq2048-bf16/%'"
        ).fetchall()
    assert {r[0] for r in rows} == {"liger", "huggingface"}
    for provider, gpu, ratio, recomputed, held, source_order in rows:
        assert gpu == "NVIDIA H100 80GB HBM3" and abs(ratio - recomputed) < 1e-12
        assert source_order == "huggingface < liger" and held in (True, False)


def test_broken_evidence_records_are_quarantined_not_fatal(tmp_path, evidence_sample):
    evidence = tmp_path / "evidence"
    shutil.copytree(evidence_sample, evidence)
    first = sorted(evidence.glob("*.jsonl.gz"))[0]
    with gzip.open(first, "rt") as handle:
        record = json.loads(handle.readline())
    broken = {k: v for k, v in record.items() if k != "protocol"}
    with gzip.open(evidence / "broken.jsonl.gz", "wt") as handle:
        handle.write(json.dumps(broken) + "\n")
    (evidence / "truncated.jsonl.gz").write_bytes(gzip.compress(b'{"kernel": "geglu"}\n')[:-8])
    # a correctness figure no double holds: its manifest could not be written, so the record is refused
    with gzip.open(evidence / "huge-integer.jsonl.gz", "wt") as handle:
        huge = {**record, "observed_at": "2026-01-01T00:00:00Z", "correctness": {"seeds": [2**60]}}
        handle.write(json.dumps(huge) + "\n")
    wh = Warehouse(tmp_path / "home")
    loaded = steps.publish(wh, evidence).evidence
    with wh.reader() as con:
        reasons = dict(con.execute("SELECT source, reason FROM quarantine").fetchall())
        [(unwritten,)] = con.execute("SELECT count(*) FROM runs ANTI JOIN run_manifests USING (run_id)").fetchall()
    assert loaded.rows > 0 and loaded.details["refused"] == 3 and unwritten == 0
    assert "lacks protocol" in reasons["broken.jsonl.gz"]
    assert "unreadable evidence file" in reasons["truncated.jsonl.gz"]
    assert "correctness cannot be written as RFC 8785 JSON" in reasons["huge-integer.jsonl.gz"]


def _hostile_lines(record: dict) -> list[str]:
    """Hostile variants of a real record (wrong types, missing parts, a lone surrogate, a key given twice, integers
    no double holds), each a run of its own (observed a second apart) but the last two, which repeat the first's."""
    seconds = iter(range(60))

    def variant(**changes):
        return json.dumps({**record, "observed_at": f"2026-01-01T00:00:{next(seconds):02d}Z", **changes})
    raised = {k: v for k, v in record.items() if k != "reason_code"} | {"observed_at": "2026-01-01T00:01:00Z"}
    return [
        json.dumps({**record, "median": 1.0}),
        variant(median=float("nan")),
        variant(samples=[1, True, 2.5]),
        variant(samples=[]),
        variant(samples="many"),
        variant(reason="\ud800 broken", status="failed"),  # refused: a lone surrogate
        variant(provider="tórch"),
        variant(session="", tensor_dtype=""),
        variant(implied=None, dtype=None),
        json.dumps(raised | {"status": "failed", "reason": "raised RuntimeError: x"}),
        json.dumps(record)[:-1] + ', "provider": "torch"}',  # a key twice: Python's parser keeps the last
        json.dumps([record]),  # refused: not an object
        variant(protocol=None),  # refused: not an object
        variant(params={"hidden": 2.0, "rows": 1e-06}),
        variant(environment={**record["environment"], "spec": {}}),  # refused: no hardware
        variant(median=12, p20=True),  # refused: not a number
        variant(implementation={"code_revision": 7}),
        variant(implementation="x"),  # refused
        variant(environment={"spec": []}),  # refused
        variant(observed_at="yesterday"),  # refused: not a timestamp
        variant(compile=None),
        variant(correctness={"seeds": [11, 2**53 + 1]}),  # refused: RFC 8785 cannot write it
        variant(achieved={"tflops": -(2**63)}),  # refused
        variant(environment={**record["environment"],
                             "spec": {**record["environment"]["spec"], "ceilings": {"x": 10**20}}}),  # refused
        variant(correctness={"note": "12345678901234567890", "seeds": [2**53 - 1]}),  # digits in a string, an exact integer
        variant(environment={**record["environment"],
                             "spec": {**record["environment"]["spec"], "ceilings": {"x": float(2**53)}}}),  # a double
        variant(environment={**record["environment"],
                             "spec": {**record["environment"]["spec"], "ceilings": {"x": 2**53}}}),  # refused
        json.dumps({**record, "median": 2.0, "note": "seeds: inf"}),  # the first line's run again
        json.dumps(record),  # and again: the last line of a run id stands
    ]


def test_every_evidence_line_becomes_its_run_or_a_refusal_never_a_crash(tmp_path, evidence_sample):
    """Every line, real or hostile, becomes the run controlled_run makes of it or is refused with its reason; a
    run id listed twice keeps its first line's place and its last line's values; a file with a line that is not
    JSON is refused whole."""
    files = sorted(evidence_sample.glob("*.jsonl.gz"))
    with gzip.open(files[0], "rt") as handle:
        record = json.loads(handle.readline())
    hostile = tmp_path / "hostile.jsonl.gz"
    hostile.write_bytes(gzip.compress(("\n".join(_hostile_lines(record)) + "\n\n").encode()))
    trailing = tmp_path / "trailing-comma.jsonl.gz"
    trailing.write_bytes(gzip.compress((json.dumps(record) + "\n" + json.dumps(record)[:-1] + ",}\n").encode()))
    lowercase = tmp_path / "lowercase-nan.jsonl.gz"
    lowercase.write_bytes(gzip.compress(json.dumps(record).replace('"median": ', '"median": nan, "m": ', 1).encode()))
    paths = files + [hostile, trailing, lowercase]
    found = dict(zip(paths, evidence.load_evidence(paths)))
    for path in files + [hostile]:
        expected, refused = {}, []
        for n, (_, line) in enumerate(evidence.read_records(path), start=1):
            try:
                row, *_ = evidence.controlled_run(json.loads(line), path.name, line)
            except evidence.REFUSED as exc:
                refused.append((n, f"evidence record refused: {exc}"))
                continue
            expected[row["run_id"]] = row  # at its first line's place, as its last line says
        runs = {row["run_id"]: row for row in found[path].runs}
        assert list(runs) == list(expected)
        for run_id, row in expected.items():
            for column, value in row.items():
                got = runs[run_id][column]
                assert got == value or (value != value and math.isnan(got)), (path.name, column, value, got)
        assert [(r["line_number"], r["reason"]) for r in found[path].refused] == refused
    assert [n for n, _ in refused] == [6, 12, 13, 15, 16, 18, 19, 20, 22, 23, 24, 27]
    assert {row["samples"] is None for row in expected.values()} == {True, False}
    for path in (trailing, lowercase):
        assert not found[path].runs and found[path].refused[0]["reason"].startswith("unreadable evidence file")


def test_readme_rerun_query_runs_and_the_seed_backward_goal_holds(default_warehouse):
    """docs/controlled-latency.sql is the README's table, per card (never pooling cards); on each card the seed
    llama4_rope backward is >= 2x Liger."""
    sql = (Path(__file__).resolve().parents[1] / "docs" / "controlled-latency.sql").read_text()
    with default_warehouse.reader() as con:
        rows = {(k, w, m, gpu): ratio for k, w, m, gpu, *_, ratio in con.execute(sql).fetchall()}
    seed = {gpu: ratio for (k, w, m, gpu), ratio in rows.items()
            if (k, w, m) == ("llama4_rope", SEED_WORKLOADS["llama4_rope"], "backward")}
    assert set(seed) == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"} and min(seed.values()) >= 2.0, seed
    assert {k for k, *_ in rows} >= {"llama4_rope", "geglu", "rope", "swiglu", "rms_norm", "layer_norm"}


# A compiled DyT pass beside eager in its own session (same file, session, workload, pass and protocol): how many,
# and how many within 5% of eager. A source-replica pass that waits on its host (its median over
# HOST_WAIT_FACTOR x its session's device-time median, as the claim checks judge it) is timed by the host, so
# its distance from eager cannot tell whether it compiled: its device-time twin tells.
DYT_COMPILED_BESIDE_EAGER = f"""
WITH c AS (
    SELECT *, regexp_extract(workload_slug, 'hidden(\\d+)', 1)::INTEGER AS hidden FROM controlled_runs
    WHERE kernel = 'dyt' AND metric = 'latency' AND status = 'passed'
), device AS (
    SELECT evidence_file, session, workload_digest, operation_mode, provider, median(median_value) AS device_ns
    FROM c WHERE family = 'kernelindex_rerun' GROUP BY ALL
)
SELECT a.compile_recorded, count(*), count(*) FILTER (WHERE abs(a.median_value / b.median_value - 1) <= 0.05
    AND NOT (a.family <> 'kernelindex_rerun' AND a.median_value > {rule.HOST_WAIT_FACTOR} * d.device_ns))
FROM c a JOIN c b ON b.evidence_file = a.evidence_file AND b.session IS NOT DISTINCT FROM a.session
    AND b.workload_digest = a.workload_digest AND b.operation_mode = a.operation_mode AND b.family = a.family
LEFT JOIN device d ON d.evidence_file = a.evidence_file AND d.session IS NOT DISTINCT FROM a.session
    AND d.workload_digest = a.workload_digest AND d.operation_mode = a.operation_mode AND d.provider = a.provider
WHERE a.provider = 'torch_compile' AND b.provider = 'torch' AND a.hidden >= 4096
GROUP BY ALL
"""


def test_compiled_dyt_that_recorded_its_compile_is_not_eager_in_disguise(default_warehouse):
    """A DyT torch.compile run at hidden >= 4096 within 5% of eager in its own session timed eager PyTorch
    (the compile fell back): every run that recorded what it compiled is further from eager than that (a
    replica pass that waits on its host aside: the December 7 session's beta full pass at hidden 4096, 709 us
    under do_bench against 738 us eager, took 180 us of device time against 701 us), and the sessions whose
    runs sit at eager's speed are those that recorded nothing, which decide no claim."""
    with default_warehouse.reader() as con:
        pairs = {recorded: (n, near) for recorded, n, near in con.execute(DYT_COMPILED_BESIDE_EAGER).fetchall()}
        # a claim whose rerun batch is a compiled run that recorded no compile takes no verdict from it
        unrecorded_verdicts = con.execute(
            "SELECT count(*) FROM claim_checks k JOIN controlled_runs c "
            "ON c.run_id IN (k.rerun_a_run_id, k.rerun_b_run_id) AND c.provider = 'torch_compile' "
            "WHERE k.kernel = 'dyt' AND NOT c.compile_recorded AND k.verdict <> 'not re-checked'").fetchall()[0][0]
    assert pairs[True][0] > 100 and pairs[True][1] == 0, pairs
    assert unrecorded_verdicts == 0


def test_release_targets_leave_out_what_no_rerun_settles_and_put_unmeasured_workloads_first(default_warehouse):
    """A workload whose claims not run at the source's release are all settled there (peak memory under the
    source replica, which times latency only; a provider the release does not have; a workload the card cannot
    hold) is no target at that release, and every workload with a claim a session there could settle is one;
    the workloads no session at the release has measured come before those one has."""
    from kernelindex_pipeline.gpu.targets import release_targets

    with default_warehouse.reader() as con:
        by_release = release_targets(con)
        settled, awaiting = (set(con.execute(
            "SELECT v.source_liger_version, r.workload_digest FROM version_checks v JOIN runs r ON r.run_id = "
            f"v.a_run_id WHERE v.version_effect = 'not_run' GROUP BY ALL HAVING {having}").fetchall())
            for having in ("NOT bool_or(v.awaiting_rerun)", "bool_or(v.awaiting_rerun)"))
        memory_only = set(con.execute(
            "SELECT v.source_liger_version, r.workload_digest FROM version_checks v JOIN runs r ON r.run_id = "
            "v.a_run_id GROUP BY ALL HAVING bool_or(v.version_effect = 'not_run') AND bool_and("
            "v.version_effect <> 'not_run' OR (v.protocol = 'source-replica' AND v.metric = 'peak_memory'))"
        ).fetchall())
        unavailable = {(release, d) for release, d, reason in con.execute(
            "SELECT v.source_liger_version, r.workload_digest, v.reason FROM version_checks v JOIN runs r "
            "ON r.run_id = v.a_run_id WHERE v.version_effect = 'not_run'").fetchall()
            if "unavailable on the rerun" in reason} - awaiting
        # One release's targets with one of them measured there: the order puts it after the others.
        release = max(by_release, key=lambda r: len(by_release[r]))
        digest = by_release[release][-1]["workload_digests"][0]
        con.execute("CREATE TEMP TABLE controlled_runs AS SELECT * FROM main.controlled_runs UNION ALL "
                    "(SELECT * REPLACE (? AS liger_version, ? AS workload_digest) FROM main.controlled_runs LIMIT 1)",
                    [release, digest])
        with_one_measured = release_targets(con)[release]
        measured = set(con.execute("SELECT DISTINCT liger_version, workload_digest FROM controlled_runs").fetchall())
    listed = {(release, d) for release, targets in by_release.items() for t in targets for d in t["workload_digests"]}
    assert memory_only and unavailable and listed
    assert memory_only | unavailable <= settled and not listed & settled
    assert listed <= awaiting and len(listed) > 0.9 * len(awaiting)  # the rest: workloads no adapter builds
    order = [any((release, d) in measured for d in t["workload_digests"]) for t in with_one_measured]
    assert len(order) > 1 and order == sorted(order) and order[-1], order
