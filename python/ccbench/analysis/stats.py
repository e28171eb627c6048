"""Statistics over the repetitions of one configuration.

:class:`Spread` of a metric over n repetitions: median, mean, min, max and a
95 % confidence interval of the mean by the percentile bootstrap (2000
resamples with replacement, numpy's default_rng seeded with a fixed seed, so
the same numbers always give the same interval and reports are reproducible).
With one value the interval is that value.

Outliers (:func:`outliers`): with at least 3 values, a value x is an outlier
when |x − median| > max(3.5 × 1.4826 × MAD, 0.25 × |median|), MAD = median
absolute deviation from the median. The 3.5 robust z-score is Iglewicz and
Hoaglin's rule; the 25 % floor keeps runs that are all nearly equal (a
deterministic simulator) from flagging tiny differences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Optional, Sequence

import numpy as np

SEED = 20240607
RESAMPLES = 2000


@dataclass
class Spread:
    """A metric over the repetitions of a configuration. The bootstrap CI is
    computed when first asked for (it is the costly part)."""

    n: int
    median: Optional[float]
    mean: Optional[float]
    min: Optional[float]
    max: Optional[float]
    values: list[float]

    @cached_property
    def ci(self) -> tuple[Optional[float], Optional[float]]:
        """95 % percentile-bootstrap confidence interval of the mean."""
        return bootstrap_ci(self.values)

    @property
    def ci_low(self) -> Optional[float]:
        return self.ci[0]

    @property
    def ci_high(self) -> Optional[float]:
        return self.ci[1]

    @property
    def range(self) -> Optional[float]:
        return None if self.min is None or self.max is None else self.max - self.min

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("n", "median", "mean", "ci_low", "ci_high", "min", "max", "values")}


def _clean(values: Iterable[Optional[float]]) -> list[float]:
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def bootstrap_ci(values: Sequence[float], level: float = 0.95, resamples: int = RESAMPLES,
                 seed: int = SEED, stat=np.mean) -> tuple[Optional[float], Optional[float]]:
    """Percentile-bootstrap confidence interval of ``stat`` (the mean by default)."""
    xs = np.asarray(_clean(values), dtype=float)
    if xs.size == 0:
        return None, None
    if xs.size == 1 or np.all(xs == xs[0]):
        return float(xs[0]), float(xs[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, xs.size, size=(resamples, xs.size))
    boots = stat(xs[idx], axis=1)
    a = (1 - level) / 2
    return float(np.quantile(boots, a)), float(np.quantile(boots, 1 - a))


def spread(values: Iterable[Optional[float]]) -> Spread:
    xs = _clean(values)
    if not xs:
        return Spread(0, None, None, None, None, [])
    return Spread(len(xs), float(np.median(xs)), float(np.mean(xs)), min(xs), max(xs), xs)


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
