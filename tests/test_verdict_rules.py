"""The rules that make a verdict hold on anyone's machine, each on its own: which card decides, whether the
host decided a replica verdict, and correctness as the field judges it."""

from __future__ import annotations

import math

import pytest

from kernelindex_pipeline.core import catalog
from kernelindex_pipeline.gpu import protocol as P
from kernelindex_pipeline.verdicts import rule


def test_a_rerun_card_is_named_as_the_source_names_it():
    """The device name a rerun records is the catalog's card: model and form factor as the source's runs
    carry them, so that an H100 80GB HBM3 rerun is the same card as an H100 80GB HBM3 claim."""
    cards = {device: (model, form) for device, model, form in
             (tuple(None if v == "NULL" else v.strip("'") for v in row.strip("()").split(", "))
              for row in catalog.CARDS_VALUES.split("), ("))}
    assert cards["NVIDIA H100 80GB HBM3"] == ("NVIDIA H100", "80GB HBM3")
    assert cards["NVIDIA H200"] == ("NVIDIA H200", None)
    assert catalog.CARD_MATCHES == ("same_card", "same_model", "other_card")


@pytest.mark.parametrize("floor, replica, device, bound", [
    (3_700, (24_000, 73_000), (6_000, 6_000), False),   # a host like the source's: its waits are the source's too
    (20_000, (24_000, 73_000), (6_000, 6_000), True),   # a slow host, and the passes wait on it
    (20_000, (6_100, 6_050), (6_000, 6_000), False),    # a slow host, but the card sets the time
    (None, (111_600, 60_000), (59_800, 53_500), True),  # no floor measured: a waiting pass cannot decide
    (None, (60_000, 54_000), (59_800, 53_500), False),  # no floor measured, nothing waits
    (20_000, (60_000, 54_000), (None, 53_500), True),   # a side without a device median counts as waiting
])
def test_a_replica_verdict_decides_only_where_the_pass_is_not_bound_by_this_host(floor, replica, device, bound):
    assert rule.host_bound_here(floor, replica, device) is bound


@pytest.mark.parametrize("source, bound", [
    ((136_000, 153_600), True),   # the seed's: its waiting pass took 2.4x the source's own do_bench time here
    ((250_000, 153_600), False),  # within 1.5x of the source's: this host dispatches as the source's did
    ((None, None), False),        # another card model: the source's times say nothing of this host
])
def test_a_waiting_pass_decides_only_where_it_ran_about_as_fast_as_at_the_source(source, bound):
    """A floor like bare metal's, and Transformers' RoPE backward waiting on its host (322.7 µs under do_bench
    against 59.6 µs of device time): the pass's own time at the source, on the claim's card model, decides."""
    assert rule.host_bound_here(4_380, (322_700, 94_100), (59_600, 54_200), source) is bound
    assert rule.host_bound_here(4_380, (60_000, 54_000), (59_600, 54_200), (10_000, 10_000)) is False  # no wait


def _check(**errors):
    return {"outputs": {"out": {"rel_error": errors.get("out", 0.0), "tolerance": errors.get("tol_out", 1e-2)}},
            "gradients": {"x": {"rel_error": errors.get("x", 0.0), "tolerance": errors.get("tol_x", 2e-2)}}}


def test_correctness_is_judged_against_the_eager_baselines_own_error_in_the_same_dtype():
    baseline = _check(out=0.002, x=0.07)  # DyT's bf16 alpha gradient: the eager baseline itself is 7% off
    # within 3x the baseline's own error in bf16 (0.21), though beyond the fixed 2%
    assert P.field_failures(_check(out=0.004, x=0.09), baseline, "bf16") == []
    # beyond every bound: both errors and the bounds named
    [failure] = P.field_failures(_check(out=0.004, x=0.5), baseline, "bf16")
    assert failure.startswith("gradient x: rel_error 0.5 beyond the protocol's 0.02, 3x the eager baseline's 0.07")
    # fp32: twice the baseline's error
    fp32 = _check(out=1e-7, x=1e-7, tol_out=1e-4, tol_x=2e-4)
    assert P.field_failures(_check(out=8.6e-4, x=1e-5, tol_out=1e-4, tol_x=2e-4), fp32, "fp32") != []
    # ... or within the kernel's own upstream test tolerance where that is looser (Liger's FNA test: 5e-3)
    assert P.field_failures(_check(out=8.6e-4, x=1e-5, tol_out=1e-4, tol_x=2e-4), fp32, "fp32", upstream=5e-3) == []


def test_the_eager_baseline_sets_the_level_only_while_it_computes_the_references_quantity():
    assert P.field_failures(_check(x=0.07), _check(x=0.07), "bf16", is_baseline=True) == []
    # a "baseline" 86x off computes another quantity (a CPO loss for SimPO): it fails, and sets no level
    assert P.field_failures(_check(x=86.3), _check(x=86.3), "bf16", is_baseline=True) != []
    assert P.field_failures(_check(x=0.5), _check(x=86.3), "bf16") != []
    assert P.field_failures(_check(x=math.nan), _check(x=0.001), "bf16") != []


def test_every_script_artifact_names_a_known_family_pass_and_code_and_a_span_of_releases():
    for artifact in catalog.SCRIPT_ARTIFACTS:
        assert set(artifact["modes"]) <= set(catalog.MODES) and artifact["code"] in catalog.SCRIPT_ARTIFACT_CODES
        low, high = catalog.release_bounds(artifact["releases"])
        assert low is None or low <= high, artifact
        assert artifact["reason"] and artifact["commit"]
    scripts = {s["kernel"] for s in catalog.SOURCE_SCRIPTS["scripts"]}
    assert scripts >= {a["kernel"] for a in catalog.SCRIPT_ARTIFACTS}
