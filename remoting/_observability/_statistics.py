"""`Counters` an endpoint keeps, and the frozen `EndpointStatistics` snapshot of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._histogram import LatencyHistogram

__all__ = ["Counters", "EndpointStatistics", "ReceivingStatistics"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointStatistics:
    """Counters of a client or server at one instant.

    Attributes:
        connections: live connections.
        connecting: connects in progress (a client's).
        admitted: sockets a server accepted and holds against ``max_connections``: its
            connections, and those still in the TLS handshake or being refused.
        in_flight: requests sent and waiting for a response (the response table's size).
        requests_sent: requests sent, by code (sync, async and oneway).
        requests_received: requests received, by code.
        error_replies: non-SUCCESS replies this side sent, by request code: from the transport
            (unknown code, busy, GO_AWAY) and from processors (their own codes, and
            SYSTEM_ERROR for one that raised).
        requests_dropped: requests a client dropped unanswered because their connection's
            queue was over the high water mark (the peer does not read; logged as
            ``request.dropped``).
        timeouts: requests that expired without a response.
        orphaned_responses: responses that matched no pending request.
        processor_queue: tasks queued or running, by request code (sync processors).
        processing: requests handed to processors and not finished yet.
        latency: round-trip time of this side's calls by request code: count, mean, p50, p90,
            p99, max (seconds).
        connections_opened: connections opened since start.
        dropped_events: channel events dropped because the event queue was full.
        async_permits_free: in-flight permits free for invoke_sync/async (and invoke_many).
        oneway_permits_free: in-flight permits free for oneway sends.
        queued_bytes: bytes waiting to be sent, over all connections (a peer that does not
            read makes it grow, up to the high water mark per connection).
        writes: socket sends (each carries one or more frames).
        frames_written: frames handed to sockets.
        sent_by_threads: of those, frames a thread other than a loop's sent itself: a pool
            thread's lone reply, and every frame of a thread-driven ``RemotingClient``
            (``io="threads"``: its calling threads and background reader send everything;
            see docs/architecture.md).
        bytes_read: bytes received from sockets.
        bytes_written: bytes handed to sockets.
        go_away_received: GO_AWAY replies received (a server draining asked to go elsewhere).
    """

    connections: int
    in_flight: int
    connecting: int = 0
    admitted: int = 0
    connections_opened: int = 0
    requests_sent: dict[int, int] = field(default_factory=dict)
    requests_received: dict[int, int] = field(default_factory=dict)
    error_replies: dict[int, int] = field(default_factory=dict)
    timeouts: int = 0
    orphaned_responses: int = 0
    processor_queue: dict[int, int] = field(default_factory=dict)
    processing: int = 0
    latency: dict[int, dict[str, float]] = field(default_factory=dict)
    dropped_events: int = 0
    async_permits_free: int = 0
    oneway_permits_free: int = 0
    queued_bytes: int = 0
    writes: int = 0
    frames_written: int = 0
    sent_by_threads: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    go_away_received: int = 0
    requests_dropped: int = 0



@dataclass(frozen=True, slots=True, kw_only=True)
class ReceivingStatistics:
    """The receiving side's part of `EndpointStatistics` (a thread-driven client's is
    counted on the loop that processes the server's requests)."""

    requests_received: dict[int, int]
    error_replies: dict[int, int]
    processor_queue: dict[int, int]
    processing: int
    requests_dropped: int


class Counters:
    """The live counters of one endpoint; changed on its loop thread only."""

    __slots__ = ("bytes_read", "bytes_written", "connections_opened", "error_replies",
                 "frames_written", "go_away", "latency", "orphans", "received",
                 "requests_dropped", "sent", "sent_by_threads", "timeouts", "writes")

    def __init__(self) -> None:
        self.sent: dict[int, int] = {}
        self.received: dict[int, int] = {}
        self.error_replies: dict[int, int] = {}
        self.latency: dict[int, LatencyHistogram] = {}
        self.timeouts = 0
        self.orphans = 0
        self.connections_opened = 0
        self.writes = 0
        self.frames_written = 0
        self.sent_by_threads = 0
        self.bytes_read = 0
        self.bytes_written = 0  # by the loop; threads' sends are kept per connection
        self.go_away = 0
        self.requests_dropped = 0

    def count_thread_send(self) -> None:
        """Count a frame a thread sent itself (the bookkeeping, on the loop)."""
        self.writes += 1
        self.frames_written += 1
        self.sent_by_threads += 1

    def count_error_reply(self, code: int) -> None:
        """Count one non-SUCCESS reply to a request of ``code``."""
        self.error_replies[code] = self.error_replies.get(code, 0) + 1

    def latency_summary(self) -> dict[int, dict[str, float]]:
        """Return the latency percentiles by code."""
        return {code: hist.summary() for code, hist in self.latency.items()}
