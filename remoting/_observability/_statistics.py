"""Frozen snapshots returned by ``statistics()``."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["EndpointStatistics"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointStatistics:
    """Counters of a client or server at one instant.

    Attributes:
        connections: live connections.
        in_flight: requests sent and waiting for a response (the response table's size).
        requests_sent: requests sent, by code (sync, async and oneway).
        requests_received: requests received, by code.
        error_replies: non-SUCCESS replies this side produced, by request code.
        timeouts: requests that expired without a response.
        orphaned_responses: responses that matched no pending request.
        processor_queue: tasks queued or running, by request code (sync processors).
        latency: round-trip time of this side's calls by request code: count, mean, p50, p90,
            p99, max (seconds).
        connections_opened: connections opened since start.
        dropped_events: channel events dropped because the event queue was full.
    """

    connections: int
    in_flight: int
    connections_opened: int = 0
    requests_sent: dict[int, int] = field(default_factory=dict)
    requests_received: dict[int, int] = field(default_factory=dict)
    error_replies: dict[int, int] = field(default_factory=dict)
    timeouts: int = 0
    orphaned_responses: int = 0
    processor_queue: dict[int, int] = field(default_factory=dict)
    latency: dict[int, dict[str, float]] = field(default_factory=dict)
    dropped_events: int = 0


EndpointStatistics.__module__ = "remoting"
