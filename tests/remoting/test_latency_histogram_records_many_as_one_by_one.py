"""`LatencyHistogram.record_all` (one read's answers at once) counts as `record` each."""

from __future__ import annotations

from remoting._observability._histogram import LatencyHistogram


def test_recording_many_at_once_matches_recording_each() -> None:
    durations = [5e-6, 80e-6, 80e-6, 1.5e-3, 0.2, 3.0]
    together, alone = LatencyHistogram(), LatencyHistogram()
    together.record_all(durations)
    for seconds in durations:
        alone.record(seconds)
    assert together.counts == alone.counts
    assert (together.count, together.max) == (alone.count, alone.max) == (6, 3.0)
    assert abs(together.total - alone.total) < 1e-12
    assert together.percentile(50) == alone.percentile(50)
    together.record_all([])  # nothing changes
    assert together.count == 6 and together.max == 3.0
