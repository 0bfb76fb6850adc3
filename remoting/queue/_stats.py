"""The queue service's statistics: frozen snapshots per topic, channel and group, and their
JSON form (what ``QueueCode.STATS`` answers and `BlockingQueueClient.statistics` reads)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["ChannelStatistics", "GroupStatistics", "QueueStatistics", "TopicOffsets",
           "TopicStatistics", "statistics_from_json", "statistics_to_json"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelStatistics:
    """One channel at one instant.

    Attributes:
        depth: messages waiting for a delivery (not in flight), deferred ones included.
        in_flight: delivered and not yet finished, requeued or timed out.
        deferred: waiting until a time (published with ``defer``, requeued with a delay).
        consumers: subscriptions open on it.
        delivered, finished, requeued, timed_out, dead_lettered: counts since the service
            started (a delivery that times out is requeued: it counts in both).
        expired: messages the topic's retention (``retention``, ``retention_bytes``) let go
            of before this channel delivered them, since the service started.
        acks_refused: acknowledgements of messages this channel had not delivered to the
            subscription that sent them (unknown, foreign, or already timed out).
    """

    depth: int
    in_flight: int
    deferred: int = 0
    consumers: int = 0
    delivered: int = 0
    finished: int = 0
    requeued: int = 0
    timed_out: int = 0
    dead_lettered: int = 0
    acks_refused: int = 0
    expired: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupStatistics:
    """One consumer group: its committed offset and how far behind the topic's end it is."""

    offset: int
    lag: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicStatistics:
    """One topic at one instant.

    Attributes:
        earliest: the first offset still held.
        end: the offset the next message gets (``end - earliest`` are held).
        in_memory: messages held in memory.
        disk_bytes: the size of its segment files (0 without a data directory).
        published: messages appended since the service started.
        duplicates: publishes answered from the idempotence keys (nothing appended).
        channels, groups: by name.
    """

    earliest: int
    end: int
    in_memory: int = 0
    disk_bytes: int = 0
    published: int = 0
    duplicates: int = 0
    channels: dict[str, ChannelStatistics] = field(default_factory=dict)
    groups: dict[str, GroupStatistics] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueStatistics:
    """A queue service at one instant: its topics, its held pulls, what recovery found.

    Attributes:
        connections_at_bound: connections whose subscriptions hold
            ``max_in_flight_per_connection`` deliveries now: delivery to them is paused
            until some of those end.
        times_at_bound: times a connection reached that bound, since the service started.
    """

    topics: dict[str, TopicStatistics] = field(default_factory=dict)
    held_pulls: int = 0
    problems: list[str] = field(default_factory=list)
    connections_at_bound: int = 0
    times_at_bound: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicOffsets:
    """A topic's offsets: ``earliest`` held, ``end`` (the next one), each group's, and
    ``readable``: the offset a pull (from the offset asked about, or the earliest) reads up
    to now, which is ``end`` unless a deferred message not yet due holds back those after it.
    """

    earliest: int
    end: int
    readable: int
    groups: dict[str, int] = field(default_factory=dict)




def statistics_to_json(stats: QueueStatistics) -> bytes:
    """Return ``stats`` as JSON."""
    return orjson.dumps(dataclasses.asdict(stats))


def statistics_from_json(data: bytes) -> QueueStatistics:
    """Return the statistics in ``data`` (from `statistics_to_json`)."""
    raw: dict[str, Any] = orjson.loads(data)
    topics = {
        name: TopicStatistics(
            earliest=t["earliest"], end=t["end"], in_memory=t["in_memory"],
            disk_bytes=t.get("disk_bytes", 0),
            published=t["published"], duplicates=t["duplicates"],
            channels={c: ChannelStatistics(**v) for c, v in t["channels"].items()},
            groups={g: GroupStatistics(**v) for g, v in t["groups"].items()})
        for name, t in raw["topics"].items()}
    return QueueStatistics(topics=topics, held_pulls=raw["held_pulls"],
                           problems=list(raw["problems"]),
                           # absent from a service of a version before the bound
                           connections_at_bound=raw.get("connections_at_bound", 0),
                           times_at_bound=raw.get("times_at_bound", 0))
