"""Rerun targets derived from a warehouse built from the shipped data, and their export for the device."""

from __future__ import annotations

import json

import pytest

import kernels
from kernels.adapter import load_adapter
from kernelindex_pipeline.gpu import targets as T
from kernelindex_pipeline.gpu import workloads as W
from kernelindex_pipeline.gpu.protocol import TIMED_MODES


def test_targets_follow_the_source_comparison_groups(shipped_warehouse):
    with shipped_warehouse.reader() as con:
        chosen = T.warehouse_targets(con)
        groups = con.execute("""
            SELECT r.kernel, w.definition, list(DISTINCT r.provider), list(DISTINCT r.operation_mode)
            FROM ranks k JOIN runs r USING (run_id) JOIN workloads w USING (workload_digest)
            WHERE r.evidence_level = 'source-native' AND r.kernel = 'rms_norm' GROUP BY ALL""").fetchall()
    assert {t["kernel"] for t in chosen} <= set(kernels.FAMILIES)
    keys = [(t["kernel"], json.dumps(t["params"], sort_keys=True), t["dtype"]) for t in chosen]
    assert len(keys) == len(set(keys))
    rms = [t for t in chosen if t["kernel"] == "rms_norm"]
    assert len(rms) == len({(json.dumps(json.loads(d)["spec"]["parameters"], sort_keys=True),
                             json.loads(d)["spec"]["dtype"]) for _, d, _, _ in groups})
    for t in chosen:
        impl = load_adapter(t["kernel"])
        assert set(t["providers"]) - set(t["aliases"]) <= set(impl.PROVIDERS)
        assert set(t["aliases"].values()) <= set(impl.PROVIDERS)
        assert set(t["providers"]) - {"kernelindex"} <= set(t["source_providers"])
        for p, reason in t["unavailable"].items():
            assert p not in impl.PROVIDERS and reason == f"no rerun provider for {p}"
        assert set(t["providers"]) | set(t["unavailable"]) >= set(t["source_providers"])
        assert t["modes"] and set(t["modes"]) <= set(TIMED_MODES)


def test_coverage_first_then_the_rest(shipped_warehouse):
    with shipped_warehouse.reader() as con:
        chosen = T.warehouse_targets(con)
    kernels_ = list(dict.fromkeys(t["kernel"] for t in chosen))
    head = [t["kernel"] for t in chosen[:len(kernels_)]]
    assert head == sorted(kernels_)
    first_rms = next(t for t in chosen if t["kernel"] == "rms_norm")
    assert first_rms["params"]["hidden"] == min(t["params"]["hidden"] for t in chosen if t["kernel"] == "rms_norm")


def test_only_unchecked_keeps_workloads_awaiting_a_rerun(shipped_warehouse):
    with shipped_warehouse.reader() as con:
        every = T.warehouse_targets(con)
        unchecked = T.warehouse_targets(con, only_unchecked=True)
        # A Liger backend tag that no adapter built when last measured is measurable now through its alias.
        retagged = {d for _, d, p in con.execute(T.PROVIDER_MISSING_SQL).fetchall() if p in W.PROVIDER_TAGS}
        settled = [(k, d) for k, d in con.execute("""
            SELECT r.kernel, r.workload_digest FROM claim_checks c JOIN runs r ON r.run_id = c.a_run_id
            GROUP BY ALL HAVING NOT bool_or(c.awaiting_rerun)
        """).fetchall() if d not in retagged]
        awaiting = con.execute("""
            SELECT DISTINCT r.workload_digest FROM claim_checks c JOIN runs r ON r.run_id = c.a_run_id
            WHERE c.awaiting_rerun
        """).fetchall()
    digests = {d for t in unchecked for d in t["workload_digests"]}
    assert settled and not digests & {d for _, d in settled}
    # Every workload with a claim awaiting a rerun is a target.
    assert awaiting and {d for (d,) in awaiting} <= digests
    assert len(unchecked) < len(every)


def test_own_card_targets_the_claims_no_rerun_on_their_model_has_checked(shipped_warehouse):
    from kernelindex_pipeline.core.catalog import GPUS

    wanted_somewhere = False
    with shipped_warehouse.reader() as con:
        with pytest.raises(ValueError, match="unknown card"):
            T.warehouse_targets(con, own_card="NVIDIA H999")
        for device, model in (("NVIDIA H100 80GB HBM3", "NVIDIA H100%"), ("NVIDIA A100-SXM4-80GB", "NVIDIA A100%")):
            chosen = T.warehouse_targets(con, own_card=device)
            by_card = con.execute("""
                SELECT r.workload_digest, c.source_gpu LIKE ? AS on_model,
                       coalesce(c.card_match, '') IN ('same_card', 'same_model') AS checked_on_model,
                       c.card_match IS NULL AND NOT c.awaiting_rerun AS settled_elsewhere
                FROM claim_checks c JOIN runs r ON r.run_id = c.a_run_id""", [model]).fetchall()
            digests = {d for t in chosen for d in t["workload_digests"]}
            wanted = {d for d, on_model, checked, settled in by_card if on_model and not checked and not settled}
            assert wanted <= digests
            wanted_somewhere |= bool(wanted)
            # A workload only claimed on other models, or checked on this model for every claim, is not a target.
            on_model = {d for d, on, _, _ in by_card if on}
            elsewhere = {d for d, _, _, _ in by_card} - on_model
            done = on_model - {d for d, on, checked, _ in by_card if on and not checked}
            assert elsewhere and not digests & (elsewhere | done)
    assert wanted_somewhere
    assert GPUS["NVIDIA H100 NVL"].product == GPUS["NVIDIA H100 80GB HBM3"].product


def test_export_writes_what_the_device_reads(analyst_home, tmp_path, capsys):
    from kernelindex_pipeline.gpu.rerun import read_targets

    out = tmp_path / "targets.json"
    assert T.main(["--warehouse", str(analyst_home), "--out", str(out), "--kernels", "rms_norm", "geglu"]) == 0
    exported = read_targets(out)
    assert exported and {t["kernel"] for t in exported} == {"rms_norm", "geglu"}
    assert f"wrote {len(exported)} targets over 2 kernels" in capsys.readouterr().out


@pytest.mark.parametrize("tag", sorted(W.PROVIDER_TAGS))
def test_a_liger_backend_tag_is_measured_as_the_liger_provider(shipped_warehouse, tag):
    with shipped_warehouse.reader() as con:
        every = T.warehouse_targets(con)
        unchecked = T.warehouse_targets(con, only_unchecked=True)
    tagged = [t for t in every if tag in t["source_providers"]]
    assert tagged
    for t in tagged:
        known = load_adapter(t["kernel"]).PROVIDERS
        if tag in known:
            assert tag not in t["aliases"] and tag in t["providers"]
        elif "liger" in known:
            assert t["aliases"][tag] == "liger" and tag in t["providers"]
            assert tag not in t["unavailable"]
        else:
            assert tag in t["unavailable"]
    assert all(p not in t["unavailable"] for t in unchecked for p in t["aliases"])


def test_a_session_measures_the_providers_of_its_liger_backend(shipped_warehouse):
    """Liger reads LIGER_KERNEL_IMPL once per process: the default session measures every provider but the
    cuTile and CuTe DSL tags, and a cuTile session those tags alone; together, each provider once."""
    with shipped_warehouse.reader() as con:
        every = T.warehouse_targets(con)
    default, cutile = W.session_slice(every, ""), W.session_slice(every, "cutile")
    assert cutile and all(t["providers"] == ["liger_cutile"] for t in cutile)
    assert not any("liger_cutile" in t["providers"] or "liger_cutedsl" in t["providers"] for t in default)
    measured = sorted((t["kernel"], json.dumps(t["params"], sort_keys=True), t["dtype"] or "", p)
                      for sliced in (default, cutile, W.session_slice(every, "cutedsl")) for t in sliced
                      for p in t["providers"])
    assert measured == sorted((t["kernel"], json.dumps(t["params"], sort_keys=True), t["dtype"] or "", p)
                              for t in every for p in t["providers"])


def test_a_replication_sample_draws_from_every_family_with_verdicts(shipped_warehouse):
    import math

    with shipped_warehouse.reader() as con:
        sample = T.replication_targets(con, 0.1, seed=1)
        again = T.replication_targets(con, 0.1, seed=1)
        other = T.replication_targets(con, 0.1, seed=2)
        decided = {}
        for kernel, digest in con.execute(T.DECIDED_WORKLOADS_SQL).fetchall():
            decided.setdefault(kernel, set()).add(digest)
        eligible = [t for t in T.warehouse_targets(con, list(decided)) if decided[t["kernel"]] & set(t["workload_digests"])]
    assert sample == again and sample != other
    kernels = {t["kernel"] for t in eligible}
    assert {t["kernel"] for t in sample} == kernels and len(kernels) >= 20
    for kernel in kernels:
        drawn = sum(t["kernel"] == kernel for t in sample)
        assert drawn >= math.ceil(0.1 * sum(t["kernel"] == kernel for t in eligible)), kernel


def test_a_card_replication_sample_draws_what_that_card_decided_once(shipped_warehouse):
    with shipped_warehouse.reader() as con:
        with pytest.raises(ValueError, match="unknown card"):
            T.replication_targets(con, 0.1, card="NVIDIA H999")
        by_card = con.execute("""
            SELECT x.gpu, r.kernel, r.workload_digest, min(c.sessions) AS sessions
            FROM claim_checks c JOIN runs r ON r.run_id = c.a_run_id JOIN controlled_runs x ON x.run_id = c.rerun_a_run_id
            WHERE c.verdict <> 'not re-checked' GROUP BY ALL""").fetchall()
        for card in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
            sample = T.replication_targets(con, 0.05, seed=3, card=card)
            once = {(k, d) for gpu, k, d, n in by_card if gpu == card and n < 2}
            # Every family the card decided once is drawn, and only from what that card decided once.
            assert once and {k for k, _ in once} == {t["kernel"] for t in sample}
            assert all(once & {(t["kernel"], d) for d in t["workload_digests"]} for t in sample)


@pytest.mark.parametrize("kernel, params, batch", [
    # Upstream's script fixed a batch of 1 before its refactor and left it out of its runs.
    ("qwen2vl_mrope", {"hidden": 2048, "kv_heads": 8, "q_heads": 32, "seq": 2048}, 1),
    # Published with their inputs unknown: the spec sizes the reruns only.
    ("fused_linear_grpo_loss_token",
     {"batch": 4, "hidden": 4096, "importance_sampling_level": "token", "seq": 1024, "vocab": 128256}, 4),
])
def test_a_workload_published_without_its_shapes_is_still_a_rerun_target(kernel, params, batch):
    from kernelindex_pipeline.core.documents import workload_definition
    from kernels.tensors import input_shapes

    w = workload_definition(kernel, params, "bf16")
    assert w["definition"]["spec"]["inputs"] == "unknown" and w["shapes_known"]
    shapes = input_shapes(kernel, params)
    assert next(iter(shapes.values()))[0] == batch
    assert W.input_bytes(kernel, params, "bf16") > 0
