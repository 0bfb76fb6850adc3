"""`LatencyHistogram.record(seconds, times)` (calls sent together and answered in one read
share one round trip) counts as ``times`` single records."""

from __future__ import annotations

from remoting._observability._histogram import LatencyHistogram


def test_equal_durations_recorded_at_once_match_recording_each() -> None:
    at_once, each = LatencyHistogram(), LatencyHistogram()
    at_once.record(80e-6, 5)
    at_once.record(3.0)
    for seconds in [80e-6] * 5 + [3.0]:
        each.record(seconds)
    assert at_once.counts == each.counts
    assert (at_once.count, at_once.max) == (each.count, each.max) == (6, 3.0)
    assert abs(at_once.total - each.total) < 1e-12
    assert at_once.percentile(50) == each.percentile(50) == each.percentile(80)
