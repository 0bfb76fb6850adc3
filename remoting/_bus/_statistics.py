"""`BusCounters` a bus keeps (under its lock) and the frozen `BusStatistics` snapshot."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BusCounters", "BusStatistics"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BusStatistics:
    """A bus's counters at one instant (`EventBus.statistics`, `BusClient.statistics`).

    Attributes:
        addresses: addresses with a consumer here (a bus server: any consumer it routes to).
        consumers: consumers registered on this bus (local ones included).
        remote_consumers: a bus server's consumers that live in its clients.
        sent, published, requests, replies: messages this bus sent of each kind (``replies``
            counts ``reply``, ``fail`` and ``reply_and_request``).
        delivered: messages handed to this bus's consumers.
        no_handlers: sends and requests that found no consumer.
        unrouted_publishes: publishes that found no consumer (no error, as Vert.x).
        dropped: publishes a bus server dropped for remote consumers that were full.
        discarded: messages this bus's consumers discarded, being full.
        handler_failures: handlers (or inbound interceptors) that raised.
        timeouts: requests of this bus that got no answer in time.
        recipient_failures: messages of this bus failed by their recipient.
        expired_replies: answers that came for a reply address no longer waited on.
        pending_replies: reply addresses waited on now.
        queued: messages a bus server holds now for remote consumers whose window is full.
    """

    addresses: int
    consumers: int
    remote_consumers: int
    sent: int
    published: int
    requests: int
    replies: int
    delivered: int
    no_handlers: int
    unrouted_publishes: int
    dropped: int
    discarded: int
    handler_failures: int
    timeouts: int
    recipient_failures: int
    expired_replies: int
    pending_replies: int
    queued: int



@dataclass(slots=True)
class BusCounters:
    """What a bus counts (changed under its lock)."""

    sent: int = 0
    published: int = 0
    requests: int = 0
    replies: int = 0
    delivered: int = 0
    no_handlers: int = 0
    unrouted_publishes: int = 0
    dropped: int = 0
    discarded: int = 0
    handler_failures: int = 0
    timeouts: int = 0
    recipient_failures: int = 0
    expired_replies: int = 0
