"""Claim checks in the warehouse: every source claim has a verdict or the reason it has none, and rerun
evidence with per-repetition samples decides claims end to end (warehouse, `kernelindex show`, page)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import SNAPSHOTS, query

from kernelindex_pipeline import cli

from kernelindex_pipeline.publish import steps
from kernelindex_pipeline.core.catalog import SOURCE_REPLICA_FAMILY
from kernelindex_pipeline.ingest.sources import DirectorySource
from kernelindex_pipeline.warehouse.store import Warehouse

REPO = Path(__file__).resolve().parents[1]
SEED = ("llama4_rope/backward/liger/nvidia-h100-80gb-hbm3/hidden2048-kv_heads8-q_heads32-seq2048-bf16/"
        "2025-08-07-21-42-04")
SEED_PARAMS = {"hidden": 2048, "kv_heads": 8, "q_heads": 32, "seq": 2048}


def test_every_claim_has_a_verdict_or_a_reason(shipped_warehouse):
    with shipped_warehouse.reader() as con:
        (claims, unexplained, groups, groups_claimed) = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE verdict IS NULL OR reason IS NULL OR reason = ''), "
            "(SELECT count(DISTINCT k.comparison_key) FROM ranks k JOIN runs USING (run_id) "
            " WHERE runs.evidence_level = 'source-native' AND group_size > 1), count(DISTINCT comparison_key) "
            "FROM claim_checks").fetchone()
        protocols = {p for (p,) in con.execute("SELECT DISTINCT protocol FROM claim_checks").fetchall()}
    assert claims > 0 and unexplained == 0
    assert groups_claimed == groups  # every source group with two or more implementations is claimed
    assert protocols == {"kernelindex-device-time", "source-replica"}


def test_a_provider_that_cannot_run_settles_its_claims_without_a_partner(default_warehouse):
    """Upstream's cuTile backend (a session of its own, LIGER_KERNEL_IMPL=cutile) does not compile on the
    H200: its newest records say so, and that answers every claim it takes part in, also where the other
    side was last measured in another batch; where the card cannot run it (cuTile needs sm_100) the claim
    is `unsupported_card`, awaiting a card that can."""
    with default_warehouse.reader() as con:
        reasons = con.execute(
            "SELECT DISTINCT c.reason, c.awaiting_rerun, c.reason_code FROM claim_checks c "
            "WHERE c.protocol = 'kernelindex-device-time' AND 'liger_cutile' IN (c.a_provider, c.b_provider) "
            "AND c.kernel <> 'multi_token_attention'").fetchall()
    assert reasons
    assert all("no rerun provider for liger_cutile" not in r for r, _, _ in reasons), reasons
    assert all(awaiting == (code == "unsupported_card") for _, awaiting, code in reasons if code != "source_artifact")
    assert any(code == "unsupported_card" and "sm_" in r or "Tile IR" in r for r, _, code in reasons)
    reasons = [(r, a) for r, a, _ in reasons]
    assert sum(r.startswith("liger_cutile failed on the rerun: raised ") for r, _ in reasons) >= 3


@pytest.mark.parametrize("newest", [True, False], ids=["newest rerun", "shared batch"])
def test_where_both_providers_failed_the_reason_does_not_depend_on_which_ranked_first(newest):
    """cuTile cannot run on this card (a card that can will settle it) and the other provider does not fit:
    the claim says the settled reason, whichever side the source ranked first."""
    from kernelindex_pipeline.verdicts.claims import _why_not

    prefix = "latest_" if newest else ""
    failures = {
        "liger_cutile": {"status": "failed", "code": "raised",
                         "reason": "raised CompilerExecutionError: failed to compile Tile IR program"},
        "torch": {"status": "too_large", "code": "too_large", "reason": "raised OutOfMemoryError: CUDA out of memory"},
    }
    answers = set()
    for a, b in (("liger_cutile", "torch"), ("torch", "liger_cutile")):
        row = {"metric": "latency", "protocol": "kernelindex-device-time", "operation_mode": "full",
               "kernel_covered": True, "workload_measured": True, "observed_at": None if newest else 1,
               "evidence_file": "session.jsonl.gz", "pooled_compile_unrecorded": False}
        for side, provider in (("a", a), ("b", b)):
            failure = failures[provider]
            row.update({f"{side}_provider": provider, f"{side}_built_since": False,
                        f"{side}_latest_status": None, f"{side}_latest_at": None})
            row.update({f"{side}_{prefix}{key}": value for key, value in failure.items()})
            if newest:
                row[f"{side}_latest_at"] = 2
        reason, code, awaiting = _why_not(row)
        answers.add((code, awaiting))
        assert reason.startswith("torch too_large on the rerun"), reason
    assert answers == {("too_large", False)}


def test_a_pass_the_harness_does_not_time_is_a_reason_not_a_wait(shipped_warehouse):
    from kernelindex_pipeline.gpu.protocol import TIMED_MODES

    with shipped_warehouse.reader() as con:
        rows = con.execute("SELECT DISTINCT operation_mode, verdict, reason, awaiting_rerun FROM claim_checks "
                           "WHERE NOT list_contains(?, operation_mode)", [list(TIMED_MODES)]).fetchall()
        targeted = con.execute("SELECT count(*) FROM claim_checks WHERE awaiting_rerun AND NOT list_contains(?, "
                               "operation_mode)", [list(TIMED_MODES)]).fetchone()[0]
    assert {mode for mode, *_ in rows} == {"no-grad-forward"}
    assert all(v == "not re-checked" and "not no-grad-forward" in r and not a for _, v, r, a in rows)
    assert targeted == 0


def test_a_replica_too_short_to_decide_is_settled_by_the_sources_budget(shipped_warehouse):
    """Under the source replica a pass longer than a fifth of do_bench's 100 ms budget gets under 5
    repetitions on any rerun: that is the answer, not a wait. Under device time a rerun takes at least
    MIN_REPETITIONS a side, so the same shortfall there still awaits one."""
    with shipped_warehouse.reader() as con:
        rows = con.execute("SELECT protocol, reason, awaiting_rerun FROM claim_checks "
                           "WHERE reason LIKE 'too few repetitions%'").fetchall()
    replica = [r for r in rows if r[0] == "source-replica"]
    assert replica
    assert all("do_bench budget of 100 ms" in reason and not awaiting for _, reason, awaiting in replica)
    assert all(awaiting and "budget" not in reason for protocol, reason, awaiting in rows
               if protocol == "kernelindex-device-time")


def test_controlled_environments_are_the_stack_not_the_batch(shipped_warehouse):
    """One H200 workload measured in many batches is one comparison group per protocol, pass and metric."""
    rows = query(shipped_warehouse.home,
                 "SELECT count(DISTINCT evidence_file), count(DISTINCT comparison_key), count(DISTINCT environment_digest) "
                 "FROM controlled_runs WHERE kernel = 'rms_norm' AND workload_slug LIKE 'eps1e_06-hidden16384-rows2048%' "
                 "AND operation_mode = 'forward' AND metric = 'latency' AND gpu = 'NVIDIA H200' "
                 "AND record->>'$.protocol.spec.comparability.family' = 'kernelindex_rerun'")
    batches, groups, environments = rows[0]
    assert batches > 1 and groups == 1 and environments == 1


def _record(template: dict, provider: str, samples: list[float], family: str,
            observed_at: str = "2026-12-04T00:00:00Z", liger: str | None = None) -> dict:
    record = json.loads(json.dumps(template))
    record.update(provider=provider, samples=samples, median=int(sorted(samples)[len(samples) // 2]),
                  p20=int(min(samples)), p80=int(max(samples)), observed_at=observed_at)
    if liger:
        record["environment"]["spec"]["software"]["ligerKernel"] = liger
    record["protocol"]["spec"]["comparability"]["family"] = family
    record["protocol"]["metadata"]["name"] += f"-{family}"
    # on a host like the source's: an empty Triton kernel takes bare metal's 3.8 us under do_bench
    record["environment"]["spec"]["launchFloor"] = {
        "emptyTritonKernel": {"replicaMedianNs": 3_800, "deviceMedianNs": 2_700}}
    return record


MEGATRON_RMS_NORM = "h200-2026-12-04-5a629981e5e6.jsonl.gz"


def _megatron_rms_norm_sessions(device: list[float]) -> dict[str, list[dict]]:
    """Megatron RMSNorm forward, liger against torch, device time: at hidden 1024 a session that built float32
    tensors (a record from before records said, so its workload's dtype, none, and float32) finding torch
    ahead, then one that built bfloat16, as upstream's script does, finding liger ahead; at hidden 2048 only
    float32."""
    with gzip.open(REPO / "data" / "evidence" / MEGATRON_RMS_NORM, "rt") as handle:
        shipped = [r for r in map(json.loads, handle) if r["kernel"] == "megatron_rms_norm" and r["mode"] == "forward"
                   and r["metric"] == "latency" and r["provider"] == "liger"
                   and r["protocol"]["spec"]["comparability"]["family"] == "kernelindex_rerun"]
    by_hidden = {r["params"]["hidden"]: r for r in shipped}
    bf16 = dict(by_hidden[1024], tensor_dtype="bf16")
    float32 = [_record(by_hidden[1024], "liger", [2 * v for v in device], "kernelindex_rerun", "2026-12-04T00:00:00Z"),
               _record(by_hidden[1024], "torch", device, "kernelindex_rerun", "2026-12-04T00:00:00Z"),
               _record(by_hidden[2048], "liger", device, "kernelindex_rerun", "2026-12-04T00:00:00Z"),
               _record(by_hidden[2048], "torch", [2 * v for v in device], "kernelindex_rerun", "2026-12-04T00:00:00Z")]
    bfloat16 = [_record(bf16, "liger", device, "kernelindex_rerun", "2026-12-07T00:00:00Z"),
                _record(bf16, "torch", [1.5 * v for v in device], "kernelindex_rerun", "2026-12-07T00:00:00Z")]
    assert all("tensor_dtype" not in r for r in float32)
    return {"h200-2026-12-04-fp32.jsonl.gz": float32, "h200-2026-12-07-bf16.jsonl.gz": bfloat16}


@pytest.fixture(scope="module")
def decided_home(tmp_path_factory) -> Path:
    """A warehouse of the shipped snapshots plus two rerun sessions of the seed llama4_rope backward with
    samples: device time says liger is faster (the source's huggingface < liger reversed) in both, by 2x in
    one and 1.8x in the other; the replayed source harness (first session only) says they are at parity. A
    third session, with the release the seed measured (liger-kernel 0.6.1) installed, finds huggingface
    ahead, as the source did. Megatron RMSNorm forward reruns (`_megatron_rms_norm_sessions`) in float32 and
    in bfloat16, the dtype upstream's script builds."""
    root = tmp_path_factory.mktemp("decided")
    with gzip.open(REPO / "data" / "evidence" / "h200-2026-12-03-v18.jsonl.gz", "rt") as handle:
        template = next(r for r in map(json.loads, handle) if r["kernel"] == "llama4_rope" and r["mode"] == "backward"
                        and r["metric"] == "latency" and r["params"] == SEED_PARAMS and r["provider"] == "liger")
    device = [50_000 + 10 * i for i in range(20)]
    records = [_record(template, "liger", device, "kernelindex_rerun"),
               _record(template, "huggingface", [2 * v for v in device], "kernelindex_rerun"),
               _record(template, "liger", [160_000 + 100 * i for i in range(20)], SOURCE_REPLICA_FAMILY),
               _record(template, "huggingface", [160_500 + 100 * i for i in range(20)], SOURCE_REPLICA_FAMILY)]
    second = [_record(template, "liger", device, "kernelindex_rerun", "2026-12-05T00:00:00Z"),
              _record(template, "huggingface", [1.8 * v for v in device], "kernelindex_rerun", "2026-12-05T00:00:00Z")]
    evidence = root / "evidence"
    evidence.mkdir()
    at_release = [_record(template, "liger", [1.2 * v for v in device], "kernelindex_rerun", "2026-12-06T00:00:00Z",
                          "0.6.1"),
                  _record(template, "huggingface", device, "kernelindex_rerun", "2026-12-06T00:00:00Z", "0.6.1")]
    batches = {"h200-2026-12-04-test.jsonl.gz": records, "h200-2026-12-05-test.jsonl.gz": second,
               "h200-2026-12-06-test.jsonl.gz": at_release, **_megatron_rms_norm_sessions(device)}
    for name, batch in batches.items():
        with gzip.open(evidence / name, "wt") as handle:
            handle.writelines(json.dumps(r) + "\n" for r in batch)
    wh = Warehouse(root / "home")
    source = DirectorySource(str(SNAPSHOTS))
    for revision in source.list_revisions():
        steps.land_revision(wh, revision, source.read(revision))
    steps.publish(wh, evidence)
    return wh.home


def test_samples_decide_the_seed_claim_under_both_protocols(decided_home):
    rows = dict((protocol, (verdict, ratio, low, high, host)) for protocol, verdict, ratio, low, high, host in query(
        decided_home, "SELECT c.protocol, verdict, rerun_ratio, ci_low, ci_high, host_bound FROM claim_checks c "
                      "JOIN runs r ON r.run_id = c.b_run_id WHERE r.external_id = ?", [SEED]))
    device, replica = rows["kernelindex-device-time"], rows["source-replica"]
    assert device[0] == "reversed" and device[3] < 0.6 < 1 - 0.02  # liger at about half huggingface's time
    assert replica[0] == "indistinguishable" and replica[2] <= 1.02 and replica[3] >= 0.98
    assert device[4] is True and replica[4] is True  # the two protocols disagree: host-bound


def test_show_and_the_record_page_carry_the_verdicts(decided_home, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("KERNELINDEX_HOME", str(decided_home))
    assert cli.main(["show", SEED]) == 0
    out, err = capsys.readouterr()
    assert list(json.loads(out)) == ["run", "protocol", "environment"]
    assert "under kernelindex-device-time: reversed (host-bound)" in err
    assert "under source-replica: indistinguishable (host-bound)" in err
    assert cli.main(["export", "--format", "html", str(tmp_path / "site")]) == 0
    (run_id,) = query(decided_home, "SELECT run_id FROM runs WHERE external_id = ?", [SEED])[0]
    page = (tmp_path / "site" / "runs" / f"{run_id}.html").read_text()
    assert "What the reruns found" in page and "reversed" in page and "indistinguishable" in page
    shutil.rmtree(tmp_path / "site")


def test_the_readme_verdict_summary_query_runs(shipped_warehouse):
    sql = (REPO / "docs" / "verdict-summary.sql").read_text()
    with shipped_warehouse.reader() as con:
        rows = con.execute(sql).fetchall()
        (families,) = con.execute("SELECT count(DISTINCT kernel) FROM claim_checks").fetchone()
    assert len(rows) == families and all(r[1] > 0 for r in rows)


def test_the_readme_coverage_query_counts_groups_without_a_waiting_claim(shipped_warehouse):
    sql = (REPO / "docs" / "claim-coverage.sql").read_text()
    with shipped_warehouse.reader() as con:
        rows = con.execute(sql).fetchall()
        waiting = dict(con.execute("SELECT protocol, count(DISTINCT comparison_key) FROM claim_checks "
                                   "WHERE awaiting_rerun GROUP BY ALL").fetchall())
    assert [r[0] for r in rows] == ["kernelindex-device-time", "source-replica"]
    for protocol, groups, answered, percent in rows:
        assert answered == groups - waiting.get(protocol, 0) and 0 < answered <= groups
        assert percent == round(100 * answered / groups, 1)


def test_a_verdict_pools_the_sessions_that_measured_both_and_keeps_each_ones_answer(decided_home):
    [(sessions, ratio, low, high, per_session)] = query(
        decided_home, "SELECT sessions, rerun_ratio, ci_low, ci_high, session_intervals FROM claim_checks c "
                      "JOIN runs r ON r.run_id = c.b_run_id WHERE r.external_id = ? AND protocol = 'kernelindex-device-time'",
        [SEED])
    assert sessions == 2 and len(per_session) == 2
    first, second = sorted(per_session, key=lambda s: s["rerun_ratio"])
    assert first["rerun_ratio"] == pytest.approx(0.5, rel=1e-3) and second["rerun_ratio"] == pytest.approx(1 / 1.8, rel=1e-3)
    assert first["evidence_file"] != second["evidence_file"]
    assert first["ci_high"] < second["ci_low"], "the sessions disagree beyond their own intervals"
    assert low <= first["rerun_ratio"] and high >= second["rerun_ratio"], "the pooled interval spans both sessions"
    assert {s["verdict"] for s in per_session} == {"reversed"}
    [(replica_sessions, replica_per_session)] = query(
        decided_home, "SELECT sessions, session_intervals FROM claim_checks c JOIN runs r ON r.run_id = c.b_run_id "
                      "WHERE r.external_id = ? AND protocol = 'source-replica'", [SEED])
    assert replica_sessions == 1 and replica_per_session is None


def test_no_label_contradicts_its_own_interval(default_warehouse):
    from kernelindex_pipeline.verdicts import rule

    sql = (REPO / "docs" / "verdict-consistency.sql").read_text()
    with default_warehouse.reader() as con:
        assert con.execute(sql).fetchall() == []
        rows = con.execute("SELECT source_ratio, verdict, ci_low, ci_high, claim_type FROM claim_checks").fetchall()
    decided = [r for r in rows if r[1] != "not re-checked"]
    assert len(decided) > 1000
    assert all(rule.consistent(ratio, verdict, low, high) for ratio, verdict, low, high, _ in rows)
    assert all(kind == rule.claim_type(ratio) for ratio, _, _, _, kind in decided)


def test_every_claim_without_a_verdict_has_a_reason_code(shipped_warehouse):
    from kernelindex_pipeline.core import reasons

    with shipped_warehouse.reader() as con:
        codes = dict(con.execute("SELECT reason_code, count(*) FROM claim_checks WHERE verdict = 'not re-checked' "
                                 "GROUP BY ALL").fetchall())
        (decided_with_code,) = con.execute("SELECT count(*) FROM claim_checks WHERE verdict <> 'not re-checked' "
                                           "AND reason_code IS NOT NULL").fetchone()
    assert None not in codes and set(codes) <= set(reasons.CLAIM_CODES), codes
    assert decided_with_code == 0
    assert {"latency_only", "failed_correctness"} <= set(codes)


def test_a_compiled_provider_whose_rerun_did_not_record_its_graphs_decides_nothing(default_warehouse):
    """The first torch.compile reruns predate the record of what dynamo compiled: they may have timed eager
    PyTorch, so no claim they re-check gets a verdict; embedding's later sessions record their graphs, and
    only theirs decide."""
    home = default_warehouse.home
    assert query(home, "SELECT count(*) FROM controlled_runs WHERE kernel = 'embedding' "
                       "AND provider = 'torch_compile' AND record->>'compile' IS NULL")[0][0] > 0
    rows = _compiled_claims(home)
    assert any(k == "embedding" and v != "not re-checked" for k, _, v, *_ in rows)
    assert all(recorded for _, _, v, _, _, recorded in rows if v != "not re-checked")


def _compiled_claims(home: Path) -> list[tuple]:
    """(kernel, protocol, verdict, reason_code, awaiting_rerun, whether both reruns recorded their graphs) of
    the claims on a torch.compile provider that a rerun re-checks."""
    return query(home, "SELECT c.kernel, c.protocol, c.verdict, c.reason_code, c.awaiting_rerun, "
                       "bool_and(r.record->>'compile' IS NOT NULL) AS recorded "
                       "FROM claim_checks c JOIN controlled_runs r ON r.run_id IN (c.rerun_a_run_id, c.rerun_b_run_id) "
                       "AND r.provider = 'torch_compile' "
                       "WHERE 'torch_compile' IN (c.a_provider, c.b_provider) "
                       "AND c.reason_code IS DISTINCT FROM 'latency_only' GROUP BY ALL")


def assert_unrecorded_compiles_decide_nothing(home: Path, kernels: set[str]) -> None:
    rows = _compiled_claims(home)
    assert kernels <= {k for k, *_ in rows}
    unrecorded = [r for r in rows if not r[5] and r[0] in kernels]
    assert unrecorded and {v for _, _, v, *_ in unrecorded} == {"not re-checked"}
    assert {(p, w) for _, p, _, c, w, _ in unrecorded if c == "unverified_provider"} == {
        ("kernelindex-device-time", True), ("source-replica", True)}
    # Otherwise only a settled answer of the rerun's own: the provider failed its correctness check.
    assert {c for _, _, _, c, _, _ in unrecorded} <= {"unverified_provider", "failed_correctness", "passes_field_rule"}
    # Every verdict comes from a batch whose compiled provider recorded what it compiled.
    assert all(recorded for _, _, verdict, _, _, recorded in rows if verdict != "not re-checked")


def test_the_spread_between_sessions_is_measured_per_kernel_and_protocol(decided_home):
    import math

    rows = {(k, p): (pairs, sd) for k, p, pairs, sd in query(
        decided_home, "SELECT kernel, protocol, pairs, between_session_sd FROM session_spread")}
    # liger and huggingface 2x apart in one session, 1.8x in the other: the sd of the two log ratios
    expected = abs(math.log(2.0) - math.log(1.8)) / math.sqrt(2)
    assert rows[("llama4_rope", "kernelindex-device-time")] == (1, pytest.approx(expected, rel=1e-3))
    assert rows[(None, "kernelindex-device-time")] == (1, pytest.approx(expected, rel=1e-3))
    assert not any(p == "source-replica" for _, p in rows)  # the replica ran in one session only


def test_verdict_replication_counts_the_claims_measured_in_several_sessions(decided_home):
    [(decided, replicated, kept, moved, flipped, decided_kept, pct)] = query(
        decided_home, "SELECT decided_claims, replicated, kept, moved, flipped, decided_kept, decided_kept_pct "
                      "FROM verdict_replication WHERE kernel = 'llama4_rope' AND protocol = 'kernelindex-device-time'")
    assert replicated >= 1 and kept == replicated and moved == flipped == 0 and decided_kept == replicated
    assert pct == 100.0 and decided >= replicated


def test_a_claim_is_re_checked_at_the_release_the_source_measured(decided_home):
    rows = {p: rest for p, *rest in query(
        decided_home, "SELECT v.protocol, source_liger_version, rerun_liger_version, verdict_at_source_version, "
                      "verdict_at_rerun_version, version_effect, reason FROM version_checks v "
                      "JOIN runs r ON r.run_id = v.b_run_id WHERE r.external_id = ?", [SEED])}
    assert rows["kernelindex-device-time"][:5] == ["0.6.1", "0.8.5", "held", "reversed", "liger_changed"]
    # No replica session ran at 0.6.1: said so, with the reason.
    replica = rows["source-replica"]
    assert replica[4] == "not_run" and replica[5].startswith("at liger-kernel 0.6.1: ")
    # The older release's session leaves the verdicts at the current release as they were.
    [(sessions, release)] = query(decided_home, "SELECT sessions, rerun_release FROM claim_checks c JOIN runs r "
                                                "ON r.run_id = c.b_run_id WHERE r.external_id = ? "
                                                "AND protocol = 'kernelindex-device-time'", [SEED])
    assert (sessions, release) == (2, "0.8.5")


def test_the_targets_at_a_source_release_are_the_claims_not_yet_run_there(decided_home):
    from kernelindex_pipeline.gpu.targets import release_targets

    with Warehouse(decided_home).reader() as con:
        by_release = release_targets(con)
        # Peak memory under the source replica, which times latency only, is not run at any release: no
        # rerun settles it, so no target is listed for it.
        [(not_run,)] = con.execute("SELECT count(DISTINCT source_liger_version) FROM version_checks WHERE "
                                   "version_effect = 'not_run' AND NOT (protocol = 'source-replica' AND "
                                   "metric = 'peak_memory')").fetchall()
    assert len(by_release) == not_run and "0.6.1" in by_release
    seed = [t for t in by_release["0.6.1"] if t["kernel"] == "llama4_rope" and t["params"] == SEED_PARAMS]
    assert len(seed) == 1 and set(seed[0]["providers"]) == {"liger", "huggingface"}


def test_a_rerun_of_another_dtype_than_the_sources_script_decides_nothing(decided_home):
    """Upstream's Megatron RMSNorm script builds bfloat16 tensors and its runs record no dtype: a rerun that
    built float32 measured another workload. Where a bfloat16 session exists it alone decides; where there is
    none the claim waits for one, saying why."""
    rows = {hidden: (verdict, code, reason, awaiting, sessions, ratio) for hidden, verdict, code, reason, awaiting,
            sessions, ratio in query(
                decided_home,
                "SELECT CASE WHEN workload_slug LIKE '%hidden1024%' THEN 1024 ELSE 2048 END, verdict, reason_code, "
                "reason, awaiting_rerun, sessions, rerun_ratio FROM claim_checks WHERE kernel = 'megatron_rms_norm' "
                "AND operation_mode = 'forward' AND metric = 'latency' AND protocol = 'kernelindex-device-time' "
                "AND list_sort([a_provider, b_provider]) = ['liger', 'torch'] "
                "AND (workload_slug LIKE '%hidden1024%' OR workload_slug LIKE '%hidden2048%')")}
    verdict, code, _, _, sessions, ratio = rows[1024]
    assert verdict in ("held", "reversed") and code is None and sessions == 1
    assert abs(max(ratio, 1 / ratio) - 1.5) < 0.01  # the bfloat16 session's 1.5x, not the float32 one's 2x
    verdict, code, reason, awaiting, _, _ = rows[2048]
    assert (verdict, code, awaiting) == ("not re-checked", "other_dtype", True)
    assert "only with fp32 tensors, while the source's script builds bf16 ones" in reason


def test_parity_claims_name_their_outcome(shipped_warehouse):
    """A parity claim's `held` is "at parity" and its `reversed` "not at parity": verdicts_by_kernel counts
    them apart from ordered claims' reversals, claims_not_held names each outcome, and the pages say it."""
    from kernelindex_pipeline.site.glossary import outcome

    home = shipped_warehouse.home
    [(claims, counted, reversed_, not_at_parity)] = query(home, """
        SELECT sum(claims), sum(held + reversed + at_parity + not_at_parity + indistinguishable + not_rechecked),
               sum(reversed), sum(not_at_parity) FROM verdicts_by_kernel""")
    assert claims == counted and not_at_parity > 0
    assert reversed_ == query(home, "SELECT count(*) FROM claim_checks WHERE verdict = 'reversed' "
                                    "AND claim_type = 'ordered'")[0][0]
    named = dict(query(home, "SELECT claim_type || ' ' || verdict, any_value(outcome) FROM claims_not_held "
                             "GROUP BY ALL"))
    assert named["parity reversed"] == "not at parity" and named["ordered reversed"] == "reversed"
    assert outcome({"claim_type": "parity", "verdict": "held"}) == "at parity"
    assert outcome({"claim_type": "ordered", "verdict": "held"}) == "held"
