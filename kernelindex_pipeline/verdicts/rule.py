"""Verdicts on source claims that a rerun re-checked.

A source claim orders two implementations a and b of one comparison group by the source's medians; its
ratio is r_src = m_b / m_a (above 1: the source says a < b). A rerun measures a and b side by side under
one protocol (`kernelindex-device-time` or `source-replica`) in one or more independent *sessions* (own
process, inputs and warm-up), each giving per-repetition samples of each side in the order they were taken.

Interval. The rerun ratio is median(b) / median(a) over every session's samples. Its interval is a
hierarchical percentile bootstrap whose units are sessions, then *chunks*: each session's samples cut into
`Thresholds.chunks` runs of consecutive repetitions, the rounds in which the device-time protocol
interleaves its providers. A resample draws sessions with replacement, then chunks with replacement within
each drawn session, and takes each side's median of the values so drawn; the interval is the central
`Thresholds.confidence` (95%) range of `Thresholds.bootstrap_resamples` (2000) resampled ratios. Resampling
chunks rather than single repetitions puts drift within a session (clocks, temperature, a busy host) into
the interval, and resampling sessions puts the drift between sessions there. Where a and b were timed in
the same rounds (`paired`: device time interleaves them), a resample draws the same chunks of both, so
drift common to both cancels in the ratio, as it does on the card; elsewhere each side's chunks are drawn
on their own. Randomness comes from numpy Generators seeded with (seed, stream, structure), so a claim's
interval depends only on its own samples, the thresholds and the seed, never on the other claims of a batch.

Decision. The parity band is [1 - parity, 1 + parity] around ratio 1. The label follows the interval:

- an ordered claim (r_src outside the band) is `held` when the interval lies wholly beyond the band on the
  side the source claims, `reversed` when it lies wholly beyond it on the other side;
- a parity claim (r_src inside the band) is `held` when the interval lies wholly inside the band, and
  `reversed` when it lies wholly outside it;
- otherwise the interval overlaps the band without settling the claim. That is `indistinguishable` when the
  samples are steady, and `not re-checked` (code `noisy`) when either side's relative spread
  (p80 - p20) / median is over `max_relative_spread`: as in NVIDIA nvbench's robust compare, noise decides
  between "the same" and "undecided" only where the gap is not clear, and never overrides a decisive interval;
- `not re-checked` also when there is no rerun, no interval (a single sample) or fewer than `min_samples`
  repetitions a side; `Verdict.code` says which.

A claim measured in one session only has no spread between sessions of its own: `widened` widens its
interval by the spread measured between sessions for its kernel and protocol (the `session_spread` view).

Long because the rule and the bootstrap behind its intervals are one method, read together; the bootstrap's
vectorized weighted medians are most of the code.

`consistent` states the rule as a predicate on (claim type, verdict, interval); docs/verdict-consistency.sql
is the same check over `claim_checks`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from kernelindex_pipeline.gpu.protocol import INTERLEAVE_ROUNDS
from kernelindex_pipeline.core.reasons import NO_INTERVAL, NO_SAMPLES, NOISY, TOO_FEW_REPETITIONS

HELD = "held"
REVERSED = "reversed"
INDISTINGUISHABLE = "indistinguishable"
NOT_RECHECKED = "not re-checked"
VERDICTS = (HELD, REVERSED, INDISTINGUISHABLE, NOT_RECHECKED)
DECIDED = (HELD, REVERSED, INDISTINGUISHABLE)

ORDERED, PARITY = "ordered", "parity"

_STREAM_SESSIONS, _STREAM_A, _STREAM_B, _STREAM_PAIRED = 0, 1, 2, 3
_CELLS_PER_BATCH = 1 << 22  # sides x values x distinct resamples searched at once


@dataclass(frozen=True)
class Thresholds:
    """Thresholds of a claim check.

    parity: ratios within ±2% of 1 are parity. Side-by-side reruns of one kernel on one H200 typically move
        the median by well under 1%, so 2% is above run-to-run drift yet below the gaps sources publish.
    confidence: 95% two-sided percentile interval, the usual level.
    bootstrap_resamples: 2000 puts the Monte Carlo error of the 2.5% and 97.5% percentiles well below the
        parity band.
    max_relative_spread: (p80 - p20) / median above 0.25 in either sample makes an interval that overlaps
        the band `noisy` (undecided) rather than `indistinguishable`; p20/p80 are the quantiles Triton
        do_bench reports, and 0.25 is about a 15% coefficient of variation for normal noise.
    min_samples: at least 5 repetitions of each side, below which a percentile interval of a median is
        mostly the extreme values.
    chunks: each session's samples are resampled in runs of consecutive repetitions, as many as the rounds
        in which the device-time protocol interleaves providers (`gpu.protocol.INTERLEAVE_ROUNDS`).
    """

    parity: float = 0.02
    confidence: float = 0.95
    bootstrap_resamples: int = 2000
    max_relative_spread: float = 0.25
    min_samples: int = 5
    chunks: int = INTERLEAVE_ROUNDS

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
        if int(self.chunks) != self.chunks or self.chunks < 1:
            raise ValueError(f"chunks must be a positive integer, got {self.chunks}")


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class RatioInterval:
    """median(b) / median(a) with its bootstrap interval (None when there is none), each side's relative
    spread (p80 - p20) / median, and how many sessions the samples came from."""

    ratio: float
    low: float | None
    high: float | None
    n_a: int
    n_b: int
    method: str
    spread_a: float = 0.0
    spread_b: float = 0.0
    deterministic: bool = False  # an exact count (peak memory bytes): one measurement is the value
    sessions: int = 1


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str
    code: str | None = None  # why a claim is not re-checked; None once it has a verdict


def claim_type(source_ratio: float, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> str:
    """`parity` when the source ratio lies inside the parity band, else `ordered`."""
    return PARITY if abs(float(source_ratio) - 1) <= thresholds.parity else ORDERED


def consistent(source_ratio: float, label: str, low: float | None, high: float | None,
               thresholds: Thresholds = DEFAULT_THRESHOLDS) -> bool:
    """Whether a label follows its interval by the rule of this module (labels other than held, reversed
    and indistinguishable make no statement about an interval, so they are consistent with any)."""
    if label not in DECIDED:
        return True
    if low is None or high is None:
        return False
    parity = thresholds.parity
    above, below = low > 1 + parity, high < 1 - parity
    inside = low >= 1 - parity and high <= 1 + parity
    if claim_type(source_ratio, thresholds) == PARITY:
        return {HELD: inside, REVERSED: above or below, INDISTINGUISHABLE: not inside and not (above or below)}[label]
    claimed_above = source_ratio > 1
    return {HELD: above if claimed_above else below, REVERSED: below if claimed_above else above,
            INDISTINGUISHABLE: not (above or below)}[label]


def ratio_interval(a_samples: Iterable, b_samples: Iterable, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                   seed: int = 0, paired: bool = False) -> RatioInterval:
    """The rerun ratio median(b) / median(a) with its hierarchical bootstrap interval.

    Each side is one session's samples (a sequence of numbers, in the order taken) or a list of sessions
    (the same sessions on both sides, in the same order). Samples must be non-empty, finite and positive;
    anything else raises ValueError. With a single sample on either side there is no interval.
    """
    sides = []
    for side, samples in (("a", a_samples), ("b", b_samples)):
        sessions, problem = _sessions(samples)
        if problem:
            raise ValueError(f"{side}: {problem}")
        sides.append(sessions)
    if len(sides[0]) != len(sides[1]):
        raise ValueError(f"a has {len(sides[0])} sessions and b {len(sides[1])}; a claim pools the sessions "
                         "that measured both")
    boot = _Bootstrap(thresholds, seed)
    return boot.intervals([boot.claim(sides[0], sides[1], paired)])[0]


def widened(interval: RatioInterval, between_sd: float, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> RatioInterval:
    """A one-session interval widened by the spread between sessions measured elsewhere (`between_sd`, a
    standard deviation of log ratios): each half-width, in logs, is combined in quadrature with z * sd, z
    the normal quantile of the interval's level."""
    if interval.low is None or interval.high is None or not between_sd:
        return interval
    z = NormalDist().inv_cdf(1 - (1 - thresholds.confidence) / 2)
    centre, extra = math.log(interval.ratio), (z * between_sd) ** 2
    low = centre - math.sqrt((centre - math.log(interval.low)) ** 2 + extra)
    high = centre + math.sqrt((math.log(interval.high) - centre) ** 2 + extra)
    return replace(interval, low=math.exp(low), high=math.exp(high),
                   method=f"{interval.method}; widened by a between-session spread of {between_sd:.3g} (log sd)")


def verdict(source_ratio: float, interval: RatioInterval | None,
            thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Verdict:
    """Whether the rerun interval confirms the source ratio (see the module docstring for the rule)."""
    source_ratio = float(source_ratio)
    if not (math.isfinite(source_ratio) and source_ratio > 0):
        raise ValueError(f"source ratio must be finite and positive, got {source_ratio}")
    if interval is None:
        return Verdict(NOT_RECHECKED, "no rerun samples", NO_SAMPLES)
    if not interval.deterministic and min(interval.n_a, interval.n_b) < thresholds.min_samples:
        return Verdict(NOT_RECHECKED, f"too few repetitions: {interval.n_a} of a, {interval.n_b} of b; "
                                      f"at least {thresholds.min_samples} each are needed", TOO_FEW_REPETITIONS)
    if interval.low is None or interval.high is None:
        return Verdict(NOT_RECHECKED, interval.method, NO_INTERVAL)

    parity = thresholds.parity
    above, below = interval.low > 1 + parity, interval.high < 1 - parity
    inside = interval.low >= 1 - parity and interval.high <= 1 + parity
    rerun = f"rerun ratio {interval.ratio:.4g} [{interval.low:.4g}, {interval.high:.4g}]"
    band = f"the ±{parity * 100:g}% parity band"
    if claim_type(source_ratio, thresholds) == PARITY:
        claim = f"source ratio {source_ratio:.4g} claims parity"
        if above or below:
            return Verdict(REVERSED, f"{claim}; {rerun} lies wholly {'above' if above else 'below'} {band}")
        if inside:
            return Verdict(HELD, f"{claim}; {rerun} lies wholly inside {band}")
        unsettled = f"{claim}; {rerun} reaches past an edge of {band}"
    else:
        claimed = "above" if source_ratio > 1 else "below"
        claim = f"source ratio {source_ratio:.4g} is {claimed} {band}"
        if above or below:
            side = "above" if above else "below"
            return Verdict(HELD if side == claimed else REVERSED, f"{claim}; {rerun} lies wholly {side} it")
        unsettled = f"{claim}; {rerun} overlaps it"
    noisy = [f"{side} {spread:.3g}" for side, spread in (("a", interval.spread_a), ("b", interval.spread_b))
             if spread > thresholds.max_relative_spread]
    if noisy:
        return Verdict(NOT_RECHECKED, f"noisy: {unsettled}, and the relative spread (p80 - p20) / median of "
                                      f"{', '.join(noisy)} is over {thresholds.max_relative_spread:g}", NOISY)
    return Verdict(INDISTINGUISHABLE, unsettled)


# The host's launch floor (gpu/launch_floor.py): what an empty Triton kernel takes under do_bench, the source
# replica's timer. On a bare-metal H200 host it took 3.8 us under do_bench (2.7 us of device time); the H100
# hosts of this repository's December sessions took 3.5-4.1 us. The H200 host of the first replica sessions
# put Liger's softmax at 24-73 us under do_bench against 6 us of device time: its launch path, not the card,
# set those times.
BARE_METAL_FLOOR_NS = 3_800
# A host whose floor is above this multiple of bare metal launches slower than the source's could have; a
# waiting pass that took this multiple of the source's own do_bench median of it, on the claim's card model,
# was slowed by this host.
SLOW_HOST_FACTOR = 1.5
# A pass whose replica median exceeds its device median by more than this factor waits on its host.
HOST_WAIT_FACTOR = 1.2


def host_bound_here(floor_ns: float | None, replica_ns: Sequence[float | None],
                    device_ns: Sequence[float | None], source_ns: Sequence[float | None] = (None, None)) -> bool:
    """Whether a source-replica verdict may have been timed by this session's host rather than the card, so
    that it cannot decide the claim: the pass of a or b took over HOST_WAIT_FACTOR x its device-time median
    under do_bench (``replica_ns``, ``device_ns``: a's and b's medians; a side without a device median counts as
    waiting), and this host is unlike the source's for it: the session's launch floor ``floor_ns`` (do_bench's
    median of an empty Triton kernel) is over SLOW_HOST_FACTOR x BARE_METAL_FLOOR_NS or was not measured, or a
    waiting pass took over SLOW_HOST_FACTOR x the source's own do_bench median of it (``source_ns``, given where
    the source measured the claim's card model). A pass that waits on a host like the source's waited there
    too, and decides; a pass that does not wait on its host decides on any host."""
    waiting = [side for side, (r, d) in enumerate(zip(replica_ns, device_ns))
               if d is None or r is None or r > HOST_WAIT_FACTOR * d]
    if not waiting:
        return False
    if floor_ns is None or floor_ns > SLOW_HOST_FACTOR * BARE_METAL_FLOOR_NS:
        return True
    return any(replica_ns[side] is not None and source_ns[side] is not None
               and replica_ns[side] > SLOW_HOST_FACTOR * source_ns[side] for side in waiting)


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
    """Each row (`source_ratio`, `a_samples`, `b_samples`, optionally `paired`, and `a_key` / `b_key`
    naming the samples so that a side shared by several claims is resampled once) with `rerun_ratio`,
    `ci_low`, `ci_high`, `n_a`, `n_b`, `spread_a`, `spread_b`, `sessions`, `claim_type`, `verdict`, `reason` and
    `reason_code` added, as plain Python values. Missing, empty or invalid samples give `not re-checked`; an
    invalid source ratio raises ValueError. Each row's result equals ratio_interval + verdict on it alone."""
    boot = _Bootstrap(thresholds, seed)
    problems, pending = {}, {}
    for i, row in enumerate(rows):
        (a, a_problem), (b, b_problem) = _sessions(row.get("a_samples")), _sessions(row.get("b_samples"))
        problem = "; ".join(f"{side}: {p}" for side, p in (("a", a_problem), ("b", b_problem)) if p)
        if not problem and len(a) != len(b):
            problem = f"a has {len(a)} sessions and b {len(b)}"
        if problem:
            problems[i] = problem
        else:
            pending[i] = boot.claim(a, b, bool(row.get("paired")), row.get("a_key"), row.get("b_key"))
    intervals = dict(zip(pending, boot.intervals(list(pending.values()))))
    out = []
    for i, row in enumerate(rows):
        interval = intervals.get(i)
        try:
            decided = verdict(row["source_ratio"], interval, thresholds)
            kind = claim_type(row["source_ratio"], thresholds)
        except (TypeError, ValueError) as error:
            raise ValueError(f"row {i}: {error}") from error
        if i in problems:
            decided = Verdict(NOT_RECHECKED, problems[i], NO_SAMPLES)
        out.append({
            **row,
            "rerun_ratio": None if interval is None else interval.ratio,
            "ci_low": None if interval is None else interval.low,
            "ci_high": None if interval is None else interval.high,
            "spread_a": None if interval is None else interval.spread_a,
            "spread_b": None if interval is None else interval.spread_b,
            "n_a": None if interval is None else interval.n_a,
            "n_b": None if interval is None else interval.n_b,
            "sessions": None if interval is None else interval.sessions,
            "claim_type": kind,
            "verdict": decided.verdict,
            "reason": decided.reason,
            "reason_code": decided.code,
        })
    return out


def bootstrap_method(thresholds: Thresholds = DEFAULT_THRESHOLDS, seed: int = 0, sessions: int = 1,
                     paired: bool = False) -> str:
    """How a bootstrapped interval was drawn, as RatioInterval.method says it."""
    units = f"{sessions} sessions, then " if sessions > 1 else ""
    return (f"hierarchical percentile bootstrap of median(b)/median(a): {units}{thresholds.chunks} chunks of "
            f"consecutive repetitions per session{', paired' if paired else ''}; "
            f"{int(thresholds.bootstrap_resamples)} resamples, {thresholds.confidence:.0%} interval, seed {seed}")


def _sessions(samples) -> tuple[list[np.ndarray] | None, str | None]:
    """The samples as one float array per session, or the reason they cannot be used."""
    if samples is None:
        return None, "no rerun samples"
    items = list(samples)
    if not items:
        return None, "no rerun samples"
    nested = isinstance(items[0], (list, tuple, np.ndarray))
    sessions = []
    for session in (items if nested else [items]):
        try:
            values = np.asarray(session, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            return None, "samples are not numbers"
        if values.size == 0:
            return None, "no rerun samples"
        if not np.all(np.isfinite(values)) or not np.all(values > 0):
            return None, "samples must be finite and positive"
        sessions.append(values)
    return sessions, None


def _sorted_quantile(values: np.ndarray, q: float, of: Callable[[float], float] = float) -> float:
    """numpy's default (linear) quantile `q` of `of` of a sorted array's values, `of` (monotonic) taken of the
    two values the quantile lies between alone. `math.log` so, rather than numpy's vectorized log over the
    array: that differs in its last bits between CPUs (its AVX-512 kernels), and an interval published from
    the same samples does not."""
    h = (values.size - 1) * q
    lo = math.floor(h)
    below, above = of(values[lo]), of(values[min(lo + 1, values.size - 1)])
    return below + (h - lo) * (above - below)


@dataclass(frozen=True)
class _Side:
    """One side's samples, pooled over its sessions and sorted, with the chunk each value came from."""

    values: np.ndarray
    units: np.ndarray
    shape: tuple[int, ...]  # chunks per session
    median: float
    spread: float

    @classmethod
    def of(cls, sessions: list[np.ndarray], chunks: int) -> _Side:
        shape = tuple(min(chunks, len(s)) for s in sessions)
        units, offset = [], 0
        for s, k in zip(sessions, shape):
            # np.array_split's chunks: the first len % k hold one value more
            size, extra = divmod(len(s), k)
            units.append(offset + np.repeat(np.arange(k), np.where(np.arange(k) < extra, size + 1, size)))
            offset += k
        values = np.concatenate(sessions)
        order = np.argsort(values, kind="stable")
        values = values[order]
        p20, median, p80 = (_sorted_quantile(values, q) for q in (0.2, 0.5, 0.8))
        return cls(values, np.concatenate(units)[order], shape, float(median), float((p80 - p20) / median))


def _resampled_medians(sides: Sequence[_Side], distinct: np.ndarray, inverse: np.ndarray) -> list[np.ndarray]:
    """Each side's median of each resample r, chunk u taken distinct[u, inverse[r]] times (all sides of one
    chunk structure).

    With P[i, u] the number of chunk u's values among a side's first i + 1 sorted values, a resample of
    weights w holds cum(i) = P[i] . w values up to sorted position i, so its k-th smallest (from 0) is the
    value at the first i with cum(i) > k: a binary search over i, for every side of a batch and every
    distinct resample at once (a single session of 6 chunks has 462 distinct resamples)."""
    weights = distinct.T  # distinct resamples x chunks
    order = sorted(range(len(sides)), key=lambda i: sides[i].values.size)
    out: list[np.ndarray] = [np.empty(0)] * len(sides)
    first = 0
    while first < len(order):
        width = sides[order[first]].values.size
        last = first + 1
        while last < len(order) and (last - first + 1) * max(width, sides[order[last]].values.size) * len(weights) \
                <= _CELLS_PER_BATCH:
            width = max(width, sides[order[last]].values.size)
            last += 1
        batch = [sides[i] for i in order[first:last]]
        # Rows past a side's own values repeat its last counts, so no search ends there.
        prefix = np.zeros((len(batch), width, weights.shape[1]), dtype=np.float32)
        values = np.zeros((len(batch), width))
        for j, side in enumerate(batch):
            prefix[j, np.arange(side.values.size), side.units] = 1.0
            values[j, :side.values.size] = side.values
        np.cumsum(prefix, axis=1, out=prefix)
        total = prefix[:, -1, :] @ weights.T.astype(np.float32)
        rows = np.arange(len(batch))[:, None]
        lo, hi = (values[rows, _first_above(prefix, weights, k)] for k in ((total - 1) // 2, total // 2))
        for j, i in enumerate(order[first:last]):
            out[i] = ((lo[j] + hi[j]) / 2)[inverse]
        first = last
    return out


def _first_above(prefix: np.ndarray, weights: np.ndarray, k: np.ndarray) -> np.ndarray:
    """For each side j and weight row r, the first i with prefix[j, i] . weights[r] > k[j, r]."""
    width = prefix.shape[1]
    flat = prefix.reshape(-1, prefix.shape[2])
    weights = weights.astype(np.float32)
    lo = np.zeros(k.shape, dtype=np.intp)
    hi = np.full(k.shape, width - 1, dtype=np.intp)
    base = (np.arange(k.shape[0]) * width)[:, None]
    while (lo < hi).any():
        mid = (lo + hi) // 2
        below = np.einsum("sru,ru->sr", flat[base + mid], weights) <= k
        lo, hi = np.where(below, mid + 1, lo), np.where(below, hi, mid)
    return lo


class _Bootstrap:
    """Intervals of a batch of claims: each side's resampled medians are computed once per (side, stream),
    all sides of one chunk structure together, then every claim's interval from its two sides."""

    def __init__(self, thresholds: Thresholds, seed: int):
        self.thresholds, self.seed = thresholds, int(seed)
        self._weights: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._sides: dict[Hashable, _Side] = {}
        self._medians: dict[tuple, np.ndarray] = {}
        self._wanted: dict[tuple, _Side] = {}

    def claim(self, a: list[np.ndarray], b: list[np.ndarray], paired: bool = False, a_key: Hashable | None = None,
              b_key: Hashable | None = None) -> tuple:
        """A claim to be bootstrapped: its sides, and the medians it will need (`intervals` computes them)."""
        side_a, side_b = self._side(a, a_key), self._side(b, b_key)
        paired = paired and side_a.shape == side_b.shape
        streams = (_STREAM_PAIRED, _STREAM_PAIRED) if paired else (_STREAM_A, _STREAM_B)
        wanted = []
        if side_a.values.size >= 2 and side_b.values.size >= 2:
            for side, stream in ((side_a, streams[0]), (side_b, streams[1])):
                key = (id(side), stream)
                self._wanted.setdefault(key, side)
                wanted.append(key)
        return side_a, side_b, paired, wanted

    def intervals(self, claims: Sequence[tuple]) -> list[RatioInterval]:
        self._compute()
        return [self._interval(*claim) for claim in claims]

    def _compute(self) -> None:
        by_stream: dict[tuple, list[tuple]] = {}
        for (ident, stream), side in self._wanted.items():
            if (ident, stream) not in self._medians:
                by_stream.setdefault((side.shape, stream), []).append(((ident, stream), side))
        for (shape, stream), group in by_stream.items():
            medians = _resampled_medians([side for _, side in group], *self._draws(shape, stream))
            self._medians.update(zip((key for key, _ in group), medians))

    def _interval(self, side_a: _Side, side_b: _Side, paired: bool, wanted: list[tuple]) -> RatioInterval:
        t = self.thresholds
        ratio = side_b.median / side_a.median
        common = dict(n_a=side_a.values.size, n_b=side_b.values.size, spread_a=side_a.spread,
                      spread_b=side_b.spread, sessions=len(side_a.shape))
        if not wanted:
            single = [side for side, x in (("a", side_a), ("b", side_b)) if x.values.size < 2]
            return RatioInterval(ratio, None, None, method=f"no interval: a single sample of {' and '.join(single)}",
                                 **common)
        ratios = np.sort(self._medians[wanted[1]] / self._medians[wanted[0]])
        # A bootstrap over u units spreads a mean (u - 1) / u as widely as it varies: widened by the inverse.
        sessions = len(side_a.shape)
        units = sessions if sessions > 1 else max(side_a.shape + side_b.shape)
        widen = math.sqrt(units / (units - 1)) if units > 1 else 1.0
        tail = (1 - t.confidence) / 2
        low, high = (math.exp(math.log(ratio) + widen * (_sorted_quantile(ratios, q, math.log) - math.log(ratio)))
                     for q in (tail, 1 - tail))
        return RatioInterval(ratio, low, high, method=bootstrap_method(t, self.seed, sessions, paired), **common)

    def _side(self, sessions: list[np.ndarray], key: Hashable | None) -> _Side:
        if key is not None and key in self._sides:
            return self._sides[key]
        side = _Side.of(sessions, self.thresholds.chunks)
        if key is not None:
            self._sides[key] = side
        return side

    def _draws(self, shape: tuple[int, ...], stream: int) -> tuple[np.ndarray, np.ndarray]:
        """The distinct unit weights (rows over the chunks of every session) and, for each resample, its
        row: sessions drawn with replacement (a draw both sides share, seeded by the number of sessions
        alone), then chunks within each drawn session."""
        if (shape, stream) not in self._weights:
            resamples = int(self.thresholds.bootstrap_resamples)
            n_sessions = len(shape)
            if n_sessions == 1:
                counts = np.ones((resamples, 1), dtype=np.int64)
            else:
                counts = np.random.default_rng([self.seed, _STREAM_SESSIONS, n_sessions]).multinomial(
                    n_sessions, np.full(n_sessions, 1 / n_sessions), size=resamples)
            rng = np.random.default_rng([self.seed, stream, *shape])
            weights = np.concatenate(
                [rng.multinomial(counts[:, s] * k, np.full(k, 1 / k)) for s, k in enumerate(shape)], axis=1)
            distinct, inverse = np.unique(weights, axis=0, return_inverse=True)
            self._weights[(shape, stream)] = distinct.T.astype(np.float64), inverse.ravel()
        return self._weights[(shape, stream)]
