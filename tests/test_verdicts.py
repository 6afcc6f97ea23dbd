"""Claim verdicts on constructed rerun samples: the hierarchical bootstrap interval of median(b)/median(a)
(sessions, then chunks of consecutive repetitions), the rule that labels follow their intervals, and the
host-bound test across protocols."""

from __future__ import annotations

import itertools
import math
import random
import time

import numpy as np
import pytest

from kernelindex_pipeline.verdicts.rule import (
    HELD,
    INDISTINGUISHABLE,
    NOT_RECHECKED,
    REVERSED,
    NOISY,
    NO_INTERVAL,
    ORDERED,
    PARITY,
    TOO_FEW_REPETITIONS,
    VERDICTS,
    RatioInterval,
    Thresholds,
    _Bootstrap,
    _resampled_medians,
    _Side,
    check_claims,
    claim_type,
    consistent,
    host_bound,
    ratio_interval,
    verdict,
    widened,
)


def normal(mean: float, relative_sd: float, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(mean, mean * relative_sd, n)


def decide(source_ratio: float, a, b, **thresholds) -> tuple[RatioInterval, str, str]:
    t = Thresholds(**thresholds)
    interval = ratio_interval(a, b, t, seed=0)
    result = verdict(source_ratio, interval, t)
    return interval, result.verdict, result.reason


A = normal(100.0, 0.01, 40, seed=1)
B_SLOWER = normal(130.0, 0.01, 40, seed=2)
B_SAME = normal(100.0, 0.01, 40, seed=3)


def test_a_clear_win_in_the_claimed_direction_is_held():
    interval, outcome, reason = decide(136.0 / 120.0, A, B_SLOWER)
    assert interval.low > 1.02 and interval.low <= interval.ratio <= interval.high
    assert interval.ratio == pytest.approx(1.3, rel=0.01)
    assert outcome == HELD, reason
    # The same order claimed the other way round (b/a below 1) with a and b swapped is held too.
    assert decide(120.0 / 136.0, B_SLOWER, A)[1] == HELD


def test_a_clear_gap_against_the_claimed_direction_is_reversed():
    interval, outcome, reason = decide(0.85, A, B_SLOWER)
    assert outcome == REVERSED, reason
    assert "wholly above" in reason
    assert decide(1.15, B_SLOWER, A)[1] == REVERSED


def test_an_interval_that_overlaps_the_parity_band_is_indistinguishable():
    interval, outcome, reason = decide(1.3, A, B_SAME)
    assert interval.low < 1.02 and interval.high > 0.98
    assert outcome == INDISTINGUISHABLE, reason
    assert "overlaps" in reason
    # A real but small gap whose interval reaches into the band is not enough either.
    near = normal(102.5, 0.03, 10, seed=4)
    interval, outcome, _ = decide(1.3, A, near)
    assert interval.low < 1.02 < interval.high and outcome == INDISTINGUISHABLE


def test_a_single_sample_has_no_interval_and_is_not_rechecked():
    interval = ratio_interval([100.0], B_SLOWER)
    assert interval.ratio == pytest.approx(float(np.median(B_SLOWER)) / 100.0)
    assert interval.low is None and interval.high is None
    assert "single sample of a" in interval.method
    result = verdict(1.3, interval)
    assert result.verdict == NOT_RECHECKED and "1 of a" in result.reason and result.code == TOO_FEW_REPETITIONS
    stored = RatioInterval(1.3, None, None, 40, 40, "no interval: a single sample of a")
    assert verdict(1.3, stored).code == NO_INTERVAL
    both = ratio_interval([100.0], [130.0])
    assert both.low is None and "a and b" in both.method


def test_too_few_repetitions_or_no_rerun_is_not_rechecked():
    few = ratio_interval(A[:4], B_SLOWER)
    assert few.low is not None
    result = verdict(1.3, few)
    assert result.verdict == NOT_RECHECKED and "4 of a" in result.reason and result.code == TOO_FEW_REPETITIONS
    assert verdict(1.3, few, Thresholds(min_samples=4)).verdict == HELD
    assert verdict(1.3, None).verdict == NOT_RECHECKED


def test_identical_constant_samples_collapse_to_ratio_one():
    interval, outcome, reason = decide(1.0, [50.0] * 12, [50.0] * 12)
    assert (interval.ratio, interval.low, interval.high) == (1.0, 1.0, 1.0)
    assert interval.spread_a == interval.spread_b == 0.0
    assert outcome == HELD and "inside" in reason, reason
    assert decide(1.3, [50.0] * 12, [50.0] * 12)[1] == INDISTINGUISHABLE


def test_constant_samples_ten_percent_apart_give_a_zero_width_interval():
    interval = ratio_interval([100.0] * 8, [110.0] * 9)
    assert interval.low == interval.high == interval.ratio == 110.0 / 100.0
    assert verdict(1.2, interval).verdict == HELD
    assert verdict(0.8, interval).verdict == REVERSED


def test_a_large_gap_with_a_wide_spread_is_decided_by_its_interval():
    rng = np.random.default_rng(5)
    noisy_a = rng.lognormal(math.log(100.0), 0.4, 60)
    noisy_b = rng.lognormal(math.log(350.0), 0.4, 60)
    interval, outcome, reason = decide(1.5, noisy_a, noisy_b)
    assert interval.spread_a > 0.25 and interval.spread_b > 0.25
    assert interval.low > 1.02, interval
    assert outcome == HELD, reason
    assert decide(0.7, noisy_a, noisy_b)[1] == REVERSED
    # One noisy side with a clear gap decides too.
    assert decide(1.5, A, noisy_b)[1] == HELD


def test_a_noisy_interval_that_overlaps_the_band_is_not_rechecked():
    rng = np.random.default_rng(5)
    noisy_a = rng.lognormal(math.log(100.0), 0.4, 60)
    noisy_b = rng.lognormal(math.log(104.0), 0.4, 60)
    interval = ratio_interval(noisy_a, noisy_b)
    assert interval.low < 1.02 and interval.high > 0.98
    result = verdict(1.5, interval)
    assert result.verdict == NOT_RECHECKED and result.code == NOISY, result
    assert "overlaps" in result.reason and "over 0.25" in result.reason
    # A higher ceiling calls the same interval indistinguishable: noise only decides between the two.
    assert verdict(1.5, interval, Thresholds(max_relative_spread=2.0)).verdict == INDISTINGUISHABLE


def test_relative_spread_is_p80_minus_p20_over_the_median():
    a = [5.0, 1.0, 4.0, 2.0, 3.0]
    b = normal(10.0, 0.2, 37, seed=6)
    interval = ratio_interval(a, b)
    assert interval.spread_a == pytest.approx((4.2 - 1.8) / 3.0)
    p20, p50, p80 = np.quantile(b, [0.2, 0.5, 0.8])
    assert interval.spread_b == pytest.approx((p80 - p20) / p50)
    assert interval.ratio == pytest.approx(p50 / 3.0)


def test_a_parity_claim_holds_inside_the_band_and_reverses_outside_it():
    interval, outcome, reason = decide(1.01, A, B_SAME)
    assert 0.98 <= interval.low and interval.high <= 1.02
    assert outcome == HELD and "claims parity" in reason and "inside" in reason
    assert claim_type(1.01) == PARITY and claim_type(1.03) == ORDERED
    assert decide(0.99, A, B_SLOWER)[1] == REVERSED
    faster = normal(70.0, 0.01, 40, seed=7)
    interval, outcome, reason = decide(1.0, A, faster)
    assert interval.high < 0.98 and outcome == REVERSED and "below" in reason
    # An interval reaching past an edge of the band neither confirms nor refutes parity.
    wide = normal(102.5, 0.03, 10, seed=4)
    interval, outcome, reason = decide(1.0, A, wide)
    assert interval.low < 1.02 < interval.high and outcome == INDISTINGUISHABLE, reason
    noisy = np.random.default_rng(8).lognormal(math.log(100.0), 0.5, 40)
    assert verdict(1.0, ratio_interval(A, noisy)).code == NOISY


def test_the_same_seed_reproduces_the_interval_and_another_seed_moves_it():
    a, b = normal(100.0, 0.05, 40, seed=9), normal(104.0, 0.05, 40, seed=10)
    first, again = ratio_interval(a, b, seed=3), ratio_interval(a, b, seed=3)
    assert first == again
    bounds = {(i.low, i.high) for i in (ratio_interval(a, b, seed=s) for s in range(5))}
    assert len(bounds) > 1
    assert {ratio_interval(a, b, seed=s).ratio for s in range(5)} == {first.ratio}


def test_a_claim_gets_the_same_result_alone_or_in_any_batch():
    rows = [{"claim": i, "source_ratio": 1.0 + 0.1 * (i % 5 - 2),
             "a_samples": list(normal(100.0, 0.03, 20 + i, seed=100 + i)),
             "b_samples": list(normal(100.0 + i, 0.03, 30 - i, seed=200 + i))} for i in range(12)]
    rows.append({"claim": 12, "source_ratio": 1.2, "a_samples": None, "b_samples": [1.0]})
    batch = check_claims(rows)
    shuffled = rows[:]
    random.Random(0).shuffle(shuffled)
    by_claim = {r["claim"]: r for r in check_claims(shuffled)}
    for row, out in zip(rows, batch):
        assert by_claim[row["claim"]] == out
        if row["a_samples"] is None:
            continue
        interval = ratio_interval(row["a_samples"], row["b_samples"])
        assert (out["rerun_ratio"], out["ci_low"], out["ci_high"]) == (interval.ratio, interval.low, interval.high)
        assert out["verdict"] == verdict(row["source_ratio"], interval).verdict


def test_check_claims_keeps_the_row_and_reports_unusable_samples():
    rows = [
        {"id": "ok", "source_ratio": 1.3, "a_samples": list(A), "b_samples": list(B_SLOWER)},
        {"id": "none", "source_ratio": 1.3, "a_samples": list(A), "b_samples": None},
        {"id": "empty", "source_ratio": 1.3, "a_samples": [], "b_samples": list(A)},
        {"id": "nan", "source_ratio": 1.3, "a_samples": [100.0, float("nan")] * 5, "b_samples": list(A)},
        {"id": "zero", "source_ratio": 1.3, "a_samples": list(A), "b_samples": [0.0] * 10},
        {"id": "few", "source_ratio": 1.3, "a_samples": list(A[:3]), "b_samples": list(B_SLOWER)},
        {"id": "sessions", "source_ratio": 1.3, "a_samples": [list(A)], "b_samples": [list(B_SLOWER)] * 2},
    ]
    out = {r["id"]: r for r in check_claims(rows)}
    ok = out["ok"]
    assert ok["verdict"] == HELD and ok["a_samples"] == rows[0]["a_samples"]
    assert ok["reason_code"] is None and ok["claim_type"] == ORDERED and ok["sessions"] == 1
    assert out["sessions"]["verdict"] == NOT_RECHECKED and "sessions" in out["sessions"]["reason"]
    assert all(type(ok[k]) is float for k in ("rerun_ratio", "ci_low", "ci_high"))
    for key, problem in (("none", "b: no rerun samples"), ("empty", "a: no rerun samples"),
                         ("nan", "a: samples must be finite"), ("zero", "b: samples must be finite")):
        assert out[key]["verdict"] == NOT_RECHECKED and out[key]["reason"].startswith(problem), out[key]
        assert out[key]["rerun_ratio"] is out[key]["ci_low"] is out[key]["ci_high"] is None
        assert out[key]["reason_code"] == "no_samples"
    assert out["few"]["verdict"] == NOT_RECHECKED and out["few"]["ci_low"] is not None
    assert out["few"]["reason_code"] == TOO_FEW_REPETITIONS
    assert "verdict" not in rows[0]
    assert check_claims([]) == []


def test_invalid_inputs_raise():
    with pytest.raises(ValueError, match="row 1"):
        check_claims([{"source_ratio": 1.2, "a_samples": None, "b_samples": None},
                      {"source_ratio": float("nan"), "a_samples": list(A), "b_samples": list(A)}])
    with pytest.raises(ValueError):
        verdict(0.0, None)
    with pytest.raises(ValueError, match="a: no rerun samples"):
        ratio_interval([], [1.0])
    with pytest.raises(ValueError, match="b: samples must be finite and positive"):
        ratio_interval([1.0], [-1.0])
    with pytest.raises(ValueError, match="sessions"):
        ratio_interval([[1.0, 2.0]], [[1.0, 2.0], [1.0, 2.0]])
    for bad in ({"parity": -0.01}, {"confidence": 1.0}, {"bootstrap_resamples": 0}, {"min_samples": 1},
                {"max_relative_spread": 0.0}, {"chunks": 0}):
        with pytest.raises(ValueError):
            Thresholds(**bad)


HOST_BOUND = {
    (HELD, HELD): False,
    (HELD, REVERSED): True,
    (HELD, INDISTINGUISHABLE): True,
    (HELD, NOT_RECHECKED): False,
    (REVERSED, HELD): True,
    (REVERSED, REVERSED): False,
    (REVERSED, INDISTINGUISHABLE): True,
    (REVERSED, NOT_RECHECKED): False,
    (INDISTINGUISHABLE, HELD): True,
    (INDISTINGUISHABLE, REVERSED): True,
    (INDISTINGUISHABLE, INDISTINGUISHABLE): False,
    (INDISTINGUISHABLE, NOT_RECHECKED): False,
    (NOT_RECHECKED, HELD): False,
    (NOT_RECHECKED, REVERSED): False,
    (NOT_RECHECKED, INDISTINGUISHABLE): False,
    (NOT_RECHECKED, NOT_RECHECKED): False,
}


def test_host_bound_truth_table():
    assert set(HOST_BOUND) == set(itertools.product(VERDICTS, VERDICTS))
    for (device, replica), expected in HOST_BOUND.items():
        assert host_bound(device, replica) is expected, (device, replica)
    with pytest.raises(ValueError):
        host_bound("held", "faster")


@pytest.mark.parametrize("sizes", [(7,), (12,), (5, 9), (40, 3, 17)])
def test_resampled_medians_are_the_medians_of_the_resamples_built_out(sizes):
    rng = np.random.default_rng(11)
    sessions = [rng.lognormal(0, 0.5, n).round(2) for n in sizes]  # rounded: ties across chunks too
    shape = tuple(min(6, n) for n in sizes)
    weights = rng.integers(0, 4, size=(300, sum(shape)))
    weights[weights.sum(axis=1) == 0, 0] = 1
    distinct, inverse = np.unique(weights, axis=0, return_inverse=True)
    [ours] = _resampled_medians([_Side.of(sessions, 6)], distinct.T.astype(float), inverse.ravel())
    chunks = [c for s, k in zip(sessions, shape) for c in np.array_split(s, k)]
    built = [np.median(np.concatenate([np.repeat(c, w) for c, w in zip(chunks, row)])) for row in weights]
    np.testing.assert_allclose(ours, built, rtol=0, atol=0)


def test_drift_between_chunks_widens_the_interval():
    rng = np.random.default_rng(17)
    steps = np.repeat([1.00, 1.06, 0.97, 1.04, 0.95, 1.02], 10)
    a = 100.0 * steps * rng.normal(1, 0.005, 60)
    b = 120.0 * rng.normal(1, 0.005, 60)
    drifting = ratio_interval(a, b)
    shuffled = ratio_interval(rng.permutation(a), b)
    assert drifting.ratio == shuffled.ratio
    assert (drifting.high - drifting.low) > 2 * (shuffled.high - shuffled.low), (drifting, shuffled)
    # Drift both sides share, in rounds timed side by side, cancels in a paired ratio.
    common = ratio_interval(a, 1.2 * steps * 100.0 * rng.normal(1, 0.005, 60), paired=True)
    assert (common.high - common.low) < (drifting.high - drifting.low) / 2, common


def test_two_sessions_that_disagree_widen_the_interval_past_both():
    rng = np.random.default_rng(18)
    a1, a2 = normal(100.0, 0.01, 60, seed=19), normal(100.0, 0.01, 60, seed=20)
    b1, b2 = 105.0 * rng.normal(1, 0.01, 60), 112.0 * rng.normal(1, 0.01, 60)
    first, second = ratio_interval(a1, b1, paired=True), ratio_interval(a2, b2, paired=True)
    assert first.high < second.low, "the sessions disagree beyond their own intervals"
    both = ratio_interval([a1, a2], [b1, b2], paired=True)
    assert both.sessions == 2 and "2 sessions" in both.method
    assert both.low <= first.ratio and both.high >= second.ratio, both
    assert both.low < first.low and both.high > second.high
    # Sessions that agree keep the interval about as narrow as one session's.
    b2_same = 105.0 * rng.normal(1, 0.01, 60)
    agree = ratio_interval([a1, a2], [b1, b2_same], paired=True)
    assert agree.high - agree.low < (both.high - both.low) / 3


def test_every_label_follows_its_interval():
    rng = np.random.default_rng(21)
    rows = []
    for i in range(600):
        n = int(rng.integers(5, 80))
        spread = float(rng.choice([0.005, 0.05, 0.3, 0.6]))
        gap = float(rng.choice([0.9, 0.97, 0.99, 1.0, 1.01, 1.03, 1.2, 3.0]))
        rows.append({"source_ratio": float(rng.choice([0.5, 0.99, 1.0, 1.015, 1.3, 4.0])),
                     "a_samples": rng.lognormal(math.log(100.0), spread, n),
                     "b_samples": rng.lognormal(math.log(100.0 * gap), spread, n), "paired": bool(i % 2)})
    out = check_claims(rows)
    assert {r["verdict"] for r in out} == set(VERDICTS)
    for r in out:
        assert consistent(r["source_ratio"], r["verdict"], r["ci_low"], r["ci_high"]), r
        assert (r["reason_code"] is None) == (r["verdict"] != NOT_RECHECKED), r


def test_consistent_refuses_labels_against_their_interval():
    assert consistent(1.3, HELD, 1.05, 1.2) and not consistent(1.3, HELD, 1.01, 1.2)
    assert not consistent(1.3, HELD, 0.8, 0.9) and consistent(1.3, REVERSED, 0.8, 0.9)
    assert consistent(0.7, HELD, 0.8, 0.9) and not consistent(0.7, REVERSED, 0.8, 0.9)
    assert not consistent(1.3, INDISTINGUISHABLE, 3.39, 3.60) and consistent(1.3, INDISTINGUISHABLE, 0.99, 1.1)
    assert consistent(1.0, HELD, 0.99, 1.01) and not consistent(1.0, HELD, 0.99, 1.05)
    assert consistent(1.0, REVERSED, 1.05, 1.1) and not consistent(1.0, INDISTINGUISHABLE, 0.99, 1.01)
    assert not consistent(1.3, HELD, None, None) and consistent(1.3, NOT_RECHECKED, None, None)


def test_a_side_shared_by_claims_is_resampled_once_with_the_same_result():
    boot = _Bootstrap(Thresholds(), 0)
    a, b, c = [np.asarray(A)], [np.asarray(B_SLOWER)], [np.asarray(B_SAME)]
    claims = [boot.claim(a, b, True, "a", "b"), boot.claim(a, b, True, "a", "b"), boot.claim(a, c, True, "a", "c")]
    assert len(boot._wanted) == 3
    first, again, other = boot.intervals(claims)
    assert first == again == ratio_interval(A, B_SLOWER, paired=True)
    assert other == ratio_interval(A, B_SAME, paired=True)


def test_intervals_cover_the_true_ratio_about_as_often_as_their_level():
    rows = [{"source_ratio": 1.1, "a_samples": normal(100.0, 0.02, 51, seed=1000 + i),
             "b_samples": normal(110.0, 0.02, 51, seed=5000 + i)} for i in range(800)]
    covered = np.mean([r["ci_low"] <= 1.1 <= r["ci_high"] for r in check_claims(rows)])
    assert 0.90 <= covered <= 0.99, covered


def test_five_thousand_claims_of_fifty_samples_run_quickly():
    rng = np.random.default_rng(16)
    shifts = 1 + 0.1 * rng.standard_normal(5000)
    rows = [{"source_ratio": 1.1, "a_samples": list(rng.normal(100.0, 2.0, 50)),
             "b_samples": list(rng.normal(100.0 * s, 2.0, 50))} for s in shifts]
    start = time.perf_counter()
    out = check_claims(rows)
    elapsed = time.perf_counter() - start
    print(f"check_claims: 5000 claims x 50 samples x 2 sides in {elapsed:.2f} s")
    assert len(out) == 5000 and {r["verdict"] for r in out} == {HELD, REVERSED, INDISTINGUISHABLE}
    assert elapsed < 10.0


def test_a_one_session_interval_is_widened_by_the_spread_between_sessions():
    interval = ratio_interval(A, B_SLOWER)
    assert widened(interval, 0.0) == interval
    wide = widened(interval, 0.05)
    z = 1.959963984540054
    assert math.log(wide.high / wide.ratio) == pytest.approx(math.hypot(math.log(interval.high / interval.ratio), z * 0.05))
    assert math.log(wide.ratio / wide.low) == pytest.approx(math.hypot(math.log(interval.ratio / interval.low), z * 0.05))
    assert "between-session spread of 0.05" in wide.method and wide.ratio == interval.ratio
    # Enough spread between sessions turns a clear one-session gap into an undecided one.
    assert verdict(1.3, interval).verdict == HELD and verdict(1.3, widened(interval, 0.2)).verdict == INDISTINGUISHABLE
