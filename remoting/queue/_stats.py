"""The queue service's statistics: frozen snapshots per topic, channel and group, and their
JSON form (what ``QueueCode.STATS`` answers and `BlockingQueueClient.statistics` reads).

A snapshot is bounded whatever the service holds: by default the service's totals only; one
topic in detail (its channels and groups, at most ``max_channels`` of each); or a page of
topics in name order (``limit`` of them, each with its counts), ``next_after`` naming where
the next page starts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

__all__ = ["MAX_PROBLEMS_SHOWN", "MAX_TOPICS_PER_PAGE", "ChannelStatistics", "GroupStatistics",
           "QueueStatistics", "TopicOffsets", "TopicStatistics", "statistics_from_json",
           "statistics_to_json"]

MAX_PROBLEMS_SHOWN: Final = 100  # a snapshot's problems at most (``problem_count``: all)
MAX_TOPICS_PER_PAGE: Final = 1_000  # a page of topics at most (a few hundred KB of JSON)


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
        memory_bytes: their bytes.
        disk_bytes: the size of its segment files (0 without a data directory).
        published: messages appended since the service started.
        duplicates: publishes answered from the idempotence keys (nothing appended).
        channel_count, group_count: its channels and groups.
        incarnation: the id of its log (changes when the log starts afresh: a service
            without a data directory restarted); None from a service that has none.
        channels, groups: by name, in a topic's detail (``statistics(addr, topic)``);
            empty in a page of topics.
    """

    earliest: int
    end: int
    in_memory: int = 0
    memory_bytes: int = 0
    disk_bytes: int = 0
    published: int = 0
    duplicates: int = 0
    channel_count: int = 0
    group_count: int = 0
    incarnation: str | None = None
    channels: dict[str, ChannelStatistics] = field(default_factory=dict)
    groups: dict[str, GroupStatistics] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueStatistics:
    """A queue service at one instant: its totals, its held pulls, what recovery found, and
    the topics asked for (see the module docstring).

    Attributes:
        topics: none by default; one in detail, or a page of them, when asked for.
        topic_count, channel_count, group_count: the service's topics, channels and groups.
        memory_bytes: bytes of messages all topics hold in memory; total_memory_bytes: the
            service's bound on them.
        held_pulls: pulls held now; pulls_refused: pulls answered POLLING_FULL because the
            service held ``max_held_pulls``, since it started.
        channels_expired: channels deleted after ``channel_idle_timeout`` without
            subscribers, since the service started.
        problems: what recovery found and the disk operations failing now (the first 100;
            ``problem_count``: all of them).
        connections_at_bound: connections whose subscriptions hold
            ``max_in_flight_per_connection`` deliveries now: delivery to them is paused
            until some of those end.
        times_at_bound: times a connection reached that bound, since the service started.
        next_after: in a page of topics, the name to ask the next page after (None: the
            page is the last).
    """

    topics: dict[str, TopicStatistics] = field(default_factory=dict)
    held_pulls: int = 0
    problems: list[str] = field(default_factory=list)
    connections_at_bound: int = 0
    times_at_bound: int = 0
    topic_count: int = 0
    channel_count: int = 0
    group_count: int = 0
    memory_bytes: int = 0
    total_memory_bytes: int = 0
    pulls_refused: int = 0
    channels_expired: int = 0
    problem_count: int = 0
    next_after: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicOffsets:
    """A topic's offsets: ``earliest`` held, ``end`` (the next one), each group's, and
    ``readable``: the offset a pull (from the offset asked about, or the earliest) reads up
    to now, which is ``end`` unless a deferred message not yet due holds back those after it;
    and ``incarnation``, the id of the log they are offsets of (see `TopicStatistics`).
    """

    earliest: int
    end: int
    readable: int
    groups: dict[str, int] = field(default_factory=dict)
    incarnation: str | None = None  # the log's id (None: a service that has none)




def statistics_to_json(stats: QueueStatistics) -> bytes:
    """Return ``stats`` as JSON."""
    return orjson.dumps(dataclasses.asdict(stats))


def statistics_from_json(data: bytes) -> QueueStatistics:
    """Return the statistics in ``data`` (from `statistics_to_json`)."""
    raw: dict[str, Any] = orjson.loads(data)
    topics = {
        name: TopicStatistics(
            earliest=t["earliest"], end=t["end"], in_memory=t["in_memory"],
            memory_bytes=t.get("memory_bytes", 0), disk_bytes=t.get("disk_bytes", 0),
            published=t["published"], duplicates=t["duplicates"],
            channel_count=t.get("channel_count", len(t["channels"])),
            group_count=t.get("group_count", len(t["groups"])),
            incarnation=t.get("incarnation"),
            channels={c: ChannelStatistics(**v) for c, v in t["channels"].items()},
            groups={g: GroupStatistics(**v) for g, v in t["groups"].items()})
        for name, t in raw["topics"].items()}
    problems = list(raw["problems"])
    # what a service of an earlier version does not send is absent: its defaults
    return QueueStatistics(topics=topics, held_pulls=raw["held_pulls"], problems=problems,
                           connections_at_bound=raw.get("connections_at_bound", 0),
                           times_at_bound=raw.get("times_at_bound", 0),
                           topic_count=raw.get("topic_count", len(topics)),
                           channel_count=raw.get("channel_count", 0),
                           group_count=raw.get("group_count", 0),
                           memory_bytes=raw.get("memory_bytes", 0),
                           total_memory_bytes=raw.get("total_memory_bytes", 0),
                           pulls_refused=raw.get("pulls_refused", 0),
                           channels_expired=raw.get("channels_expired", 0),
                           problem_count=raw.get("problem_count", len(problems)),
                           next_after=raw.get("next_after"))
