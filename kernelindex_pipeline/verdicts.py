"""Verdicts on source claims that a rerun re-checked.

A source claim orders two implementations a and b of one comparison group by the source's medians; its
ratio is r_src = m_b / m_a (above 1: the source says a < b). A rerun measures a and b side by side under
one protocol (`kernelindex-device-time` or `source-replica`) and gives per-repetition samples of each.

Method. The rerun ratio is median(b) / median(a). Its interval is a percentile bootstrap: each sample is
resampled with replacement independently of the other, `Thresholds.bootstrap_resamples` times (2000), and
the interval is the central `Thresholds.confidence` (95%) range of the resampled ratios. Randomness comes
from numpy Generators seeded with (seed, side, sample size), seed 0 unless given, so a claim's interval
depends only on its own samples, the thresholds and the seed, never on the other claims of a batch.

A resample's median is drawn without building the resample: for a sorted sample x of size n, the k-th
smallest value of a resample is x[floor(n * U_(k))], where U_(k) ~ Beta(k, n - k + 1) is the k-th order
statistic of n uniforms. So each resampled median costs one Beta draw (odd n) or two (even n: U_(m) and,
given it, U_(m+1) = U_(m) + (1 - U_(m)) * Beta(1, m)) instead of n draws and a partition. This is the same
distribution as resampling, and it lets thousands of claims be bootstrapped in one vectorized pass.

Decision, modelled on NVIDIA nvbench's robust compare (`nvbench-compare-robust`): centres are medians, a
difference counts only when it clears the noise with a gap, dispersion is taken relative to the median and
has a ceiling, and whatever is not clearly separated stays undecided instead of being forced. Here the gap
is the parity band [1 - parity, 1 + parity] around ratio 1, and the noise is the bootstrap interval:

- held: the interval lies wholly beyond the band on the side the source claims;
- reversed: it lies wholly beyond the band on the other side;
- indistinguishable: it overlaps the band, or either sample's relative spread (p80 - p20) / median is over
  `max_relative_spread` (too noisy to order, whatever the centres say);
- not re-checked: no rerun, no interval (one sample), or fewer than `min_samples` repetitions.

A source ratio inside the band is a parity claim ("a and b are at parity"). It is held unless the rerun
shows a clear gap (interval wholly outside the band, either side), which reverses it; parity is the null
claim, so an interval that overlaps the band does not refute it. The noise ceiling still applies first, so a
noisy rerun cannot confirm parity.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

HELD = "held"
REVERSED = "reversed"
INDISTINGUISHABLE = "indistinguishable"
NOT_RECHECKED = "not re-checked"
VERDICTS = (HELD, REVERSED, INDISTINGUISHABLE, NOT_RECHECKED)

_SIDE_A, _SIDE_B = 0, 1
_CHUNK_ELEMENTS = 1 << 20
_CLAIMS_PER_MATRIX = 1024


@dataclass(frozen=True)
class Thresholds:
    """Thresholds of a claim check.

    parity: ratios within ±2% of 1 are parity. Side-by-side reruns of one kernel on one H200 typically move
        the median by well under 1%, so 2% is above run-to-run drift yet below the gaps sources publish.
    confidence: 95% two-sided percentile interval, the usual level; a claim is decided only when the whole
        interval is on one side of the band.
    bootstrap_resamples: 2000 puts the Monte Carlo error of the 2.5% and 97.5% percentiles well below the
        parity band, and costs little with the order-statistic draw.
    max_relative_spread: (p80 - p20) / median above 0.25 in either sample means too noisy to order; p20/p80
        are the quantiles Triton do_bench reports, and 0.25 is about a 15% coefficient of variation for
        normal noise. nvbench's robust compare likewise refuses to decide above a dispersion ceiling.
    min_samples: at least 5 repetitions of each side, below which a percentile interval of a median is
        mostly the extreme values.
    """

    parity: float = 0.02
    confidence: float = 0.95
    bootstrap_resamples: int = 2000
    max_relative_spread: float = 0.25
    min_samples: int = 5

    def __post_init__(self) -> None:
        if not 0 <= self.parity < 1:
            raise ValueError(f"parity must be in [0, 1), got {self.parity}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")
        if int(self.bootstrap_resamples) != self.bootstrap_resamples or self.bootstrap_resamples < 1:
            raise ValueError(f"bootstrap_resamples must be a positive integer, got {self.bootstrap_resamples}")
        if not self.max_relative_spread > 0:
            raise ValueError(f"max_relative_spread must be positive, got {self.max_relative_spread}")
        if int(self.min_samples) != self.min_samples or self.min_samples < 2:
            raise ValueError(f"min_samples must be an integer >= 2, got {self.min_samples}")


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class RatioInterval:
    """median(b) / median(a) with its bootstrap interval (None when there is none) and each sample's
    relative spread (p80 - p20) / median."""

    ratio: float
    low: float | None
    high: float | None
    n_a: int
    n_b: int
    method: str
    spread_a: float = 0.0
    spread_b: float = 0.0
    deterministic: bool = False  # an exact count (peak memory bytes): one measurement is the value


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str


def ratio_interval(a_samples: Iterable[float], b_samples: Iterable[float],
                   thresholds: Thresholds = DEFAULT_THRESHOLDS, seed: int = 0) -> RatioInterval:
    """The rerun ratio median(b) / median(a) with its percentile-bootstrap interval.

    Samples must be non-empty, finite and positive (latencies or byte counts); anything else raises
    ValueError. With a single sample on either side there is no interval: low = high = None.
    """
    arrays = []
    for side, samples in (("a", a_samples), ("b", b_samples)):
        values, problem = _samples(samples)
        if problem:
            raise ValueError(f"{side}: {problem}")
        arrays.append(values)
    return _intervals([arrays[0]], [arrays[1]], thresholds, seed)[0]


def verdict(source_ratio: float, interval: RatioInterval | None,
            thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Verdict:
    """Whether the rerun interval confirms the source ratio (see the module docstring for the rules)."""
    source_ratio = float(source_ratio)
    if not (math.isfinite(source_ratio) and source_ratio > 0):
        raise ValueError(f"source ratio must be finite and positive, got {source_ratio}")
    if interval is None:
        return Verdict(NOT_RECHECKED, "no rerun samples")
    if not interval.deterministic and min(interval.n_a, interval.n_b) < thresholds.min_samples:
        return Verdict(NOT_RECHECKED, f"too few repetitions: {interval.n_a} of a, {interval.n_b} of b; "
                                      f"at least {thresholds.min_samples} each are needed")
    if interval.low is None or interval.high is None:
        return Verdict(NOT_RECHECKED, interval.method)

    noisy = [f"{side} {spread:.3g}" for side, spread in (("a", interval.spread_a), ("b", interval.spread_b))
             if spread > thresholds.max_relative_spread]
    if noisy:
        return Verdict(INDISTINGUISHABLE, f"noisy: relative spread (p80 - p20) / median of {', '.join(noisy)} "
                                          f"is over {thresholds.max_relative_spread:g}")

    parity = thresholds.parity
    above = interval.low > 1 + parity
    below = interval.high < 1 - parity
    rerun = f"rerun ratio {interval.ratio:.4g} [{interval.low:.4g}, {interval.high:.4g}]"
    band = f"the ±{parity * 100:g}% parity band"
    if abs(source_ratio - 1) <= parity:
        if above or below:
            return Verdict(REVERSED, f"source ratio {source_ratio:.4g} claims parity; {rerun} lies wholly "
                                     f"{'above' if above else 'below'} {band}")
        return Verdict(HELD, f"source ratio {source_ratio:.4g} claims parity; {rerun} shows no clear gap "
                             f"beyond {band}")
    claimed = "above" if source_ratio > 1 else "below"
    if above or below:
        side = "above" if above else "below"
        return Verdict(HELD if side == claimed else REVERSED,
                       f"source ratio {source_ratio:.4g} is {claimed} {band}; {rerun} lies wholly {side} it")
    return Verdict(INDISTINGUISHABLE, f"source ratio {source_ratio:.4g} is {claimed} {band}; {rerun} "
                                      f"overlaps it")


def host_bound(device_verdict: str, replica_verdict: str) -> bool:
    """True when both protocols re-checked the claim and their verdicts differ: the order then comes from
    what differs between them, the host overhead that `source-replica` includes."""
    for name in (device_verdict, replica_verdict):
        if name not in VERDICTS:
            raise ValueError(f"unknown verdict {name!r}; expected one of {VERDICTS}")
    if NOT_RECHECKED in (device_verdict, replica_verdict):
        return False
    return device_verdict != replica_verdict


def check_claims(rows: Sequence[dict], thresholds: Thresholds = DEFAULT_THRESHOLDS, seed: int = 0) -> list[dict]:
    """Each row (`source_ratio`, `a_samples`, `b_samples`) with `rerun_ratio`, `ci_low`, `ci_high`, the
    samples' relative spreads (`spread_a`, `spread_b`), `verdict` and `reason` added, as plain Python values.
    Missing, empty or invalid samples give `not re-checked`; an invalid source ratio raises ValueError. Each row's result equals ratio_interval + verdict on it alone."""
    problems: dict[int, str] = {}
    pending, a_arrays, b_arrays = [], [], []
    for i, row in enumerate(rows):
        (a, a_problem), (b, b_problem) = _samples(row.get("a_samples")), _samples(row.get("b_samples"))
        if a_problem or b_problem:
            problems[i] = "; ".join(f"{side}: {p}" for side, p in (("a", a_problem), ("b", b_problem)) if p)
        else:
            pending.append(i)
            a_arrays.append(a)
            b_arrays.append(b)
    intervals = dict(zip(pending, _intervals(a_arrays, b_arrays, thresholds, seed)))

    out = []
    for i, row in enumerate(rows):
        interval = intervals.get(i)
        try:
            decided = verdict(row["source_ratio"], interval, thresholds)
        except (TypeError, ValueError) as error:
            raise ValueError(f"row {i}: {error}") from error
        if i in problems:
            decided = Verdict(NOT_RECHECKED, problems[i])
        out.append({
            **row,
            "rerun_ratio": None if interval is None else interval.ratio,
            "ci_low": None if interval is None else interval.low,
            "ci_high": None if interval is None else interval.high,
            "spread_a": None if interval is None else interval.spread_a,
            "spread_b": None if interval is None else interval.spread_b,
            "verdict": decided.verdict,
            "reason": decided.reason,
        })
    return out


def _samples(samples) -> tuple[np.ndarray | None, str | None]:
    """The samples as a float array, or the reason they cannot be used."""
    if samples is None:
        return None, "no rerun samples"
    try:
        values = np.asarray(samples, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return None, "samples are not numbers"
    if values.size == 0:
        return None, "no rerun samples"
    if not np.all(np.isfinite(values)) or not np.all(values > 0):
        return None, "samples must be finite and positive"
    return values, None


def _median_index_draws(n: int, resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Positions (lo, hi) in a sorted sample of size n such that (x[lo] + x[hi]) / 2 is the median of a
    resample with replacement, one pair per resample."""
    m = n // 2
    if n % 2:
        u_lo = u_hi = rng.beta(m + 1, m + 1, resamples)
    else:
        u_lo = rng.beta(m, m + 1, resamples)
        u_hi = u_lo + (1.0 - u_lo) * rng.beta(1, m, resamples)
    lo = np.minimum((n * u_lo).astype(np.intp), n - 1)
    hi = lo if n % 2 else np.minimum((n * u_hi).astype(np.intp), n - 1)
    return lo, hi


def _index_tables(sizes: np.ndarray, side: int, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) draws for every sample size in `sizes`, as tables indexed by size."""
    width = int(sizes.max()) + 1
    lo = np.zeros((width, resamples), dtype=np.intp)
    hi = np.zeros((width, resamples), dtype=np.intp)
    for n in np.unique(sizes):
        rng = np.random.default_rng([int(seed), side, int(n)])
        lo[n], hi[n] = _median_index_draws(int(n), resamples, rng)
    return lo, hi


def _sorted_matrix(arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.fromiter((len(x) for x in arrays), dtype=np.intp, count=len(arrays))
    matrix = np.full((len(arrays), int(sizes.max())), np.inf)
    for i, x in enumerate(arrays):
        matrix[i, :len(x)] = x
    matrix.sort(axis=1)
    return matrix, sizes


def _row_quantile(matrix: np.ndarray, sizes: np.ndarray, q: float) -> np.ndarray:
    """numpy's default (linear) quantile of each sorted row's first `sizes` values."""
    h = (sizes - 1) * q
    lo = np.floor(h).astype(np.intp)
    hi = np.minimum(lo + 1, sizes - 1)
    rows = np.arange(len(sizes))
    return matrix[rows, lo] + (h - lo) * (matrix[rows, hi] - matrix[rows, lo])


def _medians_and_spreads(matrix: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.arange(len(sizes))
    medians = (matrix[rows, (sizes - 1) // 2] + matrix[rows, sizes // 2]) / 2
    spreads = (_row_quantile(matrix, sizes, 0.8) - _row_quantile(matrix, sizes, 0.2)) / medians
    return medians, spreads


def _intervals(a_arrays: Sequence[np.ndarray], b_arrays: Sequence[np.ndarray], thresholds: Thresholds,
               seed: int) -> list[RatioInterval]:
    """Ratio intervals of validated sample pairs, bootstrapped in chunks of claims. Claims of similar
    sample counts share a padded matrix, _CLAIMS_PER_MATRIX at a time, so memory follows the chunk rather
    than every claim padded to the largest sample."""
    if not a_arrays:
        return []
    resamples = int(thresholds.bootstrap_resamples)
    tail = (1 - thresholds.confidence) / 2
    n_a = np.fromiter((len(x) for x in a_arrays), dtype=np.intp, count=len(a_arrays))
    n_b = np.fromiter((len(x) for x in b_arrays), dtype=np.intp, count=len(b_arrays))
    ratio, a_spread, b_spread = (np.empty(len(n_a)) for _ in range(3))
    low = np.full(len(n_a), np.nan)
    high = np.full(len(n_a), np.nan)
    boot = (n_a >= 2) & (n_b >= 2)
    if boot.any():  # draws depend only on a sample's size, so chunking leaves every interval as it is
        a_lo, a_hi = _index_tables(n_a[boot], _SIDE_A, resamples, seed)
        b_lo, b_hi = _index_tables(n_b[boot], _SIDE_B, resamples, seed)
    step = max(1, _CHUNK_ELEMENTS // resamples)
    order = np.argsort(np.maximum(n_a, n_b), kind="stable")
    for first in range(0, len(order), _CLAIMS_PER_MATRIX):
        claims = order[first:first + _CLAIMS_PER_MATRIX]
        a_matrix, _ = _sorted_matrix([a_arrays[i] for i in claims])
        b_matrix, _ = _sorted_matrix([b_arrays[i] for i in claims])
        a_median, a_spread[claims] = _medians_and_spreads(a_matrix, n_a[claims])
        b_median, b_spread[claims] = _medians_and_spreads(b_matrix, n_b[claims])
        ratio[claims] = b_median / a_median
        rows = np.flatnonzero(boot[claims])  # positions in this chunk's matrices
        for start in range(0, rows.size, step):
            part = rows[start:start + step]
            sa, sb = n_a[claims[part]], n_b[claims[part]]
            a_star = _resampled_medians(a_matrix[part], a_lo[sa], a_hi[sa])
            b_star = _resampled_medians(b_matrix[part], b_lo[sb], b_hi[sb])
            low[claims[part]], high[claims[part]] = np.quantile(b_star / a_star, [tail, 1 - tail], axis=1)

    method = bootstrap_method(thresholds, seed)
    out = []
    for i in range(len(ratio)):
        bootstrapped = n_a[i] >= 2 and n_b[i] >= 2
        if bootstrapped:
            row_method = method
        else:
            single = [side for side, n in (("a", n_a[i]), ("b", n_b[i])) if n < 2]
            row_method = f"no interval: a single sample of {' and '.join(single)}"
        out.append(RatioInterval(
            ratio=float(ratio[i]),
            low=float(low[i]) if bootstrapped else None,
            high=float(high[i]) if bootstrapped else None,
            n_a=int(n_a[i]), n_b=int(n_b[i]), method=row_method,
            spread_a=float(a_spread[i]), spread_b=float(b_spread[i]),
        ))
    return out


def bootstrap_method(thresholds: Thresholds = DEFAULT_THRESHOLDS, seed: int = 0) -> str:
    """How a bootstrapped interval was drawn, as RatioInterval.method says it."""
    return (f"percentile bootstrap of median(b)/median(a): {int(thresholds.bootstrap_resamples)} resamples, "
            f"{thresholds.confidence:.0%} interval, seed {seed}")


def _resampled_medians(matrix: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return (np.take_along_axis(matrix, lo, axis=1) + np.take_along_axis(matrix, hi, axis=1)) / 2
