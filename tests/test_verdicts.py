"""Claim verdicts on constructed rerun samples: the bootstrap interval of median(b)/median(a), the decision
rules against the parity band and the noise ceiling, and the host-bound test across protocols."""

from __future__ import annotations

import itertools
import math
import random
import time

import numpy as np
import pytest

from kernelindex_pipeline.verdicts import (
    HELD,
    INDISTINGUISHABLE,
    NOT_RECHECKED,
    REVERSED,
    VERDICTS,
    RatioInterval,
    Thresholds,
    _median_index_draws,
    check_claims,
    host_bound,
    ratio_interval,
    verdict,
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
    assert result.verdict == NOT_RECHECKED and "1 of a" in result.reason
    both = ratio_interval([100.0], [130.0])
    assert both.low is None and "a and b" in both.method


def test_too_few_repetitions_or_no_rerun_is_not_rechecked():
    few = ratio_interval(A[:4], B_SLOWER)
    assert few.low is not None
    result = verdict(1.3, few)
    assert result.verdict == NOT_RECHECKED and "4 of a" in result.reason
    assert verdict(1.3, few, Thresholds(min_samples=4)).verdict == HELD
    assert verdict(1.3, None).verdict == NOT_RECHECKED


def test_identical_constant_samples_collapse_to_ratio_one():
    interval, outcome, reason = decide(1.0, [50.0] * 12, [50.0] * 12)
    assert (interval.ratio, interval.low, interval.high) == (1.0, 1.0, 1.0)
    assert interval.spread_a == interval.spread_b == 0.0
    assert outcome == HELD, reason
    assert decide(1.3, [50.0] * 12, [50.0] * 12)[1] == INDISTINGUISHABLE


def test_constant_samples_ten_percent_apart_give_a_zero_width_interval():
    interval = ratio_interval([100.0] * 8, [110.0] * 9)
    assert interval.low == interval.high == interval.ratio == 110.0 / 100.0
    assert verdict(1.2, interval).verdict == HELD
    assert verdict(0.8, interval).verdict == REVERSED


def test_noisy_samples_are_indistinguishable_even_with_a_gap():
    rng = np.random.default_rng(5)
    noisy_a = rng.lognormal(math.log(100.0), 0.4, 60)
    noisy_b = rng.lognormal(math.log(200.0), 0.4, 60)
    interval, outcome, reason = decide(1.5, noisy_a, noisy_b)
    assert interval.low > 1.02, "the gap is clear, so only the noise ceiling can make this undecided"
    assert interval.spread_a > 0.25 and interval.spread_b > 0.25
    assert outcome == INDISTINGUISHABLE and reason.startswith("noisy")
    # One noisy side is enough; a higher ceiling lets the same samples decide.
    assert decide(1.5, A, noisy_b)[1] == INDISTINGUISHABLE
    assert decide(1.5, noisy_a, noisy_b, max_relative_spread=2.0)[1] == HELD


def test_relative_spread_is_p80_minus_p20_over_the_median():
    a = [5.0, 1.0, 4.0, 2.0, 3.0]
    b = normal(10.0, 0.2, 37, seed=6)
    interval = ratio_interval(a, b)
    assert interval.spread_a == pytest.approx((4.2 - 1.8) / 3.0)
    p20, p50, p80 = np.quantile(b, [0.2, 0.5, 0.8])
    assert interval.spread_b == pytest.approx((p80 - p20) / p50)
    assert interval.ratio == pytest.approx(p50 / 3.0)


def test_a_source_parity_claim_holds_unless_the_rerun_shows_a_clear_gap():
    interval, outcome, reason = decide(1.01, A, B_SAME)
    assert outcome == HELD and "claims parity" in reason
    assert decide(0.99, A, B_SLOWER)[1] == REVERSED
    faster = normal(70.0, 0.01, 40, seed=7)
    interval, outcome, reason = decide(1.0, A, faster)
    assert interval.high < 0.98 and outcome == REVERSED and "below" in reason
    wide = normal(102.5, 0.03, 10, seed=4)
    interval, outcome, _ = decide(1.0, A, wide)
    assert interval.low < 1.02 < interval.high and outcome == HELD
    noisy = np.random.default_rng(8).lognormal(math.log(100.0), 0.5, 40)
    assert decide(1.0, A, noisy)[1] == INDISTINGUISHABLE


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
    ]
    out = {r["id"]: r for r in check_claims(rows)}
    ok = out["ok"]
    assert ok["verdict"] == HELD and ok["a_samples"] == rows[0]["a_samples"]
    assert all(type(ok[k]) is float for k in ("rerun_ratio", "ci_low", "ci_high"))
    for key, problem in (("none", "b: no rerun samples"), ("empty", "a: no rerun samples"),
                         ("nan", "a: samples must be finite"), ("zero", "b: samples must be finite")):
        assert out[key]["verdict"] == NOT_RECHECKED and out[key]["reason"].startswith(problem), out[key]
        assert out[key]["rerun_ratio"] is out[key]["ci_low"] is out[key]["ci_high"] is None
    assert out["few"]["verdict"] == NOT_RECHECKED and out["few"]["ci_low"] is not None
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
    for bad in ({"parity": -0.01}, {"confidence": 1.0}, {"bootstrap_resamples": 0}, {"min_samples": 1},
                {"max_relative_spread": 0.0}):
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


@pytest.mark.parametrize("n", [2, 3, 7, 8, 50])
def test_order_statistic_draws_match_resampling_with_replacement(n):
    draws = 200_000
    lo, hi = _median_index_draws(n, draws, np.random.default_rng(11))
    ours = np.bincount(lo + hi, minlength=2 * n) / draws
    picks = np.sort(np.random.default_rng(12).integers(0, n, size=(draws, n)), axis=1)
    naive = np.bincount(picks[:, (n - 1) // 2] + picks[:, n // 2], minlength=2 * n) / draws
    assert 0.5 * np.abs(ours - naive).sum() < 0.01
    if n % 2:
        # Exact: P(median index <= k) = P(Binomial(n, (k + 1) / n) >= (n + 1) / 2).
        m = n // 2
        exact = [sum(math.comb(n, j) * ((k + 1) / n) ** j * (1 - (k + 1) / n) ** (n - j)
                     for j in range(m + 1, n + 1)) for k in range(n)]
        assert np.abs(np.cumsum(ours[0::2][:n]) - exact).max() < 0.005


def test_the_interval_agrees_with_a_plain_resampling_bootstrap():
    a, b = normal(100.0, 0.05, 24, seed=13), normal(103.0, 0.05, 31, seed=14)
    resamples = 40_000
    rng = np.random.default_rng(15)
    ratios = (np.median(rng.choice(b, (resamples, b.size)), axis=1)
              / np.median(rng.choice(a, (resamples, a.size)), axis=1))
    plain_low, plain_high = np.quantile(ratios, [0.025, 0.975])
    interval = ratio_interval(a, b, Thresholds(bootstrap_resamples=resamples))
    assert interval.low == pytest.approx(plain_low, abs=0.003)
    assert interval.high == pytest.approx(plain_high, abs=0.003)


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
