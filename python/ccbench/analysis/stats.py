"""Statistics over the repetitions of one configuration.

:class:`Spread` of a metric over n repetitions: median, mean, min, max and a
95 % confidence interval of the mean, Student's t interval (:func:`mean_ci`):
mean ± t(0.975, n − 1) · s / √n, s the sample standard deviation. Studies run
few repetitions (2 to 5 is common), and at those sizes a percentile
bootstrap (this module's method until session 43) holds the true mean far
less often than it says: 48 % of the time at n = 2 (its interval is then the
two values), 76 % at n = 3, 83 % at n = 5, for normally distributed runs
(1000 draws each, session 43). The t interval is exact for normal runs and
wide when it should be (tests/test_analysis.py checks that it holds the
mean 95 % of the time from n = 2 on). With one value there is no interval
(None). Every metric here is non-negative,
so when all the values are, the interval is clipped at 0, and a metric that
cannot exceed 1 (Jain's index) is clipped there too: neither can drop the
true mean.

Outliers (:func:`outliers`): with at least 3 values, a value x is an outlier
when |x − median| > max(3.5 × 1.4826 × MAD, 0.25 × |median|), MAD = median
absolute deviation from the median. The 3.5 robust z-score is Iglewicz and
Hoaglin's rule; the 25 % floor keeps runs that are all nearly equal (a
deterministic simulator) from flagging tiny differences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Iterable, Optional, Sequence

import numpy as np


@dataclass
class Spread:
    """A metric over the repetitions of a configuration; the CI is computed
    when first asked for."""

    n: int
    median: Optional[float]
    mean: Optional[float]
    min: Optional[float]
    max: Optional[float]
    values: list[float]

    # The most the metric can be (Jain's index: 1); the interval stops there.
    upper: Optional[float] = None

    @cached_property
    def ci(self) -> tuple[Optional[float], Optional[float]]:
        """95 % confidence interval of the mean (Student's t)."""
        return mean_ci(self.values, upper=self.upper)

    @property
    def ci_low(self) -> Optional[float]:
        return self.ci[0]

    @property
    def ci_high(self) -> Optional[float]:
        return self.ci[1]

    @property
    def drawn_ci(self) -> tuple[Optional[float], Optional[float]]:
        """The interval a figure draws: the CI, or the mean itself where
        there is none (one repetition)."""
        lo, hi = self.ci
        return (self.mean, self.mean) if lo is None else (lo, hi)

    @property
    def range(self) -> Optional[float]:
        return None if self.min is None or self.max is None else self.max - self.min

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("n", "median", "mean", "ci_low", "ci_high", "min", "max", "values")}


def _clean(values: Iterable[Optional[float]]) -> list[float]:
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def mean_ci(values: Sequence[float], level: float = 0.95,
            upper: Optional[float] = None) -> tuple[Optional[float], Optional[float]]:
    """Student's t confidence interval of the mean at ``level`` (two-sided);
    (None, None) with fewer than two values; clipped at 0 when no value is
    negative, and at ``upper``, the most the metric can be."""
    xs = np.asarray(_clean(values), dtype=float)
    if xs.size < 2:
        return None, None
    mean = float(xs.mean())
    half = t_quantile(level, xs.size - 1) * float(xs.std(ddof=1)) / math.sqrt(xs.size)
    lo, hi = mean - half, mean + half
    if xs.min() >= 0:
        lo = max(lo, 0.0)
    if upper is not None:
        hi = min(hi, upper)
    return lo, hi


def t_two_sided(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with ``df`` degrees of freedom, t >= 0: the
    closed forms for whole degrees of freedom (Abramowitz and Stegun 26.7.3
    and 26.7.4), with θ = atan(t / √df)."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2:  # odd: (2/π)(θ + sin θ (cos θ + 2/3 cos³θ + 2·4/(3·5) cos⁵θ + …)), to cos^(df−2)
        term = total = math.cos(theta) if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= 2 * k / (2 * k + 1) * c2
            total += term
        return 2 / math.pi * (theta + math.sin(theta) * total)
    term = total = 1.0  # even: sin θ (1 + 1/2 cos²θ + 1·3/(2·4) cos⁴θ + …), to cos^(df−2)
    for k in range(1, df // 2):
        term *= (2 * k - 1) / (2 * k) * c2
        total += term
    return math.sin(theta) * total


@lru_cache(maxsize=256)
def t_quantile(level: float, df: int) -> float:
    """The t with P(|T| < t) = level (e.g. 12.71 for 0.95 and df = 1, 1.96
    as df grows), by bisection on :func:`t_two_sided`."""
    lo, hi = 0.0, 2.0
    while t_two_sided(hi, df) < level:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if t_two_sided(mid, df) < level:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def spread(values: Iterable[Optional[float]], upper: Optional[float] = None) -> Spread:
    """``upper``: the most the metric can be (its interval is clipped there)."""
    xs = _clean(values)
    if not xs:
        return Spread(0, None, None, None, None, [], upper)
    return Spread(len(xs), float(np.median(xs)), float(np.mean(xs)), min(xs), max(xs), xs, upper)


def outliers(values: Sequence[Optional[float]], rel_floor: float = 0.25, z: float = 3.5) -> list[int]:
    """Indexes of the outlying values (None values are never outliers)."""
    pairs = [(i, float(v)) for i, v in enumerate(values) if v is not None and not math.isnan(v)]
    if len(pairs) < 3:
        return []
    xs = np.asarray([v for _, v in pairs])
    med = float(np.median(xs))
    mad = float(np.median(np.abs(xs - med)))
    limit = max(z * 1.4826 * mad, rel_floor * abs(med))
    if limit == 0:
        return []
    return [i for i, v in pairs if abs(v - med) > limit]
