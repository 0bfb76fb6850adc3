"""A fixed-bucket latency histogram: O(log buckets) to record, percentiles on demand."""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

__all__ = ["LatencyHistogram"]

# 10 µs .. ~100 s in steps of about 12% (80 buckets): percentiles within about 6%.
_BOUNDS: Final = tuple(10e-6 * (1.125**i) for i in range(138))


class LatencyHistogram:
    """Counts of durations (seconds) per bucket."""

    __slots__ = ("count", "counts", "max", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(_BOUNDS) + 1)
        self.count = 0
        self.total = 0.0
        self.max = 0.0

    def record(self, seconds: float, times: int = 1) -> None:
        """Add one duration (``times`` times: calls that took as long, counted at once)."""
        self.counts[bisect_left(_BOUNDS, seconds)] += times
        self.count += times
        self.total += seconds * times
        if seconds > self.max:
            self.max = seconds

    def percentile(self, p: float) -> float:
        """Return the upper bound of the bucket holding the ``p``-th percentile (0-100)."""
        if not self.count:
            return 0.0
        rank = max(1, round(self.count * p / 100.0))
        seen = 0
        for i, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                return min(_BOUNDS[i] if i < len(_BOUNDS) else self.max, self.max)
        return self.max

    def summary(self) -> dict[str, float]:
        """Return count, mean, p50, p90, p99 and max (seconds)."""
        return {
            "count": float(self.count),
            "mean": self.total / self.count if self.count else 0.0,
            "p50": self.percentile(50),
            "p90": self.percentile(90),
            "p99": self.percentile(99),
            "max": self.max,
        }
