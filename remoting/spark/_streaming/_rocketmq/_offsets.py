"""The ``rocketmq`` source's offsets and plans (bookkeeping only: no I/O, unit-tested
without Spark or a broker).

A topic of RocketMQ is message queues on brokers, each a log of consecutive offsets. The
stream's offset is every queue's next offset to read, as Spark's Kafka source keeps each
partition's: ``{"topic": {"broker-a": {"0": 120, "1": 98}}}`` in the checkpoint. A queue that
appears later (its topic's route grew: more queues, another broker) starts at offset 0; a
queue that leaves the route keeps its offset, unread.

A trigger reads from its start to the queues' ends when planned (`trigger_ends`), at most
``maxMessagesPerTrigger`` in all (shared among the queues by what each has to read: the
shares add up to the limit exactly) and, under ``Trigger.AvailableNow``, not past the ends
the query found when it started. The ranges become Spark partitions (`plan_partitions`): at
least ``minPartitions`` of them and as many as ``messagesPerPartition`` asks for, each of
about the same number of offsets; a partition may read parts of several queues, and a large
queue range is split among several partitions.

JSON offsets given as options (``startingOffsets``, ``endingOffsets``) use Kafka's words:
``-2`` is a queue's earliest offset, ``-1`` its latest; the topic level may be left out when
the source reads one topic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

import orjson

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = ["EARLIEST", "LATEST", "Given", "QueueKey", "Segment", "given_offsets",
           "offsets_from_json", "offsets_json", "plan_partitions", "resolve",
           "trigger_ends"]

EARLIEST: Final = -2  # Kafka's words in offsets JSON
LATEST: Final = -1

QueueKey = tuple[str, str, int]  # topic, broker name, queue id
Given = Literal["earliest", "latest"] | dict[QueueKey, int]  # an option's offsets


@dataclass(frozen=True, slots=True)
class Segment:
    """Offsets ``[start, end)`` of one queue."""

    topic: str
    broker: str
    queue_id: int
    start: int
    end: int

    @property
    def key(self) -> QueueKey:
        return (self.topic, self.broker, self.queue_id)

    @property
    def size(self) -> int:
        return self.end - self.start


def offsets_json(offsets: Mapping[QueueKey, int]) -> dict[str, dict[str, dict[str, int]]]:
    """Return ``offsets`` as the stream's offset JSON (sorted, so the same offsets always
    write the same text)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for (topic, broker, queue_id), offset in sorted(offsets.items()):
        out.setdefault(topic, {}).setdefault(broker, {})[str(queue_id)] = offset
    return out


def _nested(raw: object, what: str) -> dict[QueueKey, int]:
    """Return ``{topic: {broker: {queue id: offset}}}`` flattened (ValueError otherwise)."""
    out: dict[QueueKey, int] = {}
    if not isinstance(raw, dict):
        raise ValueError(f"{what} is not a JSON object of topics")
    for topic, brokers in raw.items():
        if not isinstance(brokers, dict):
            raise ValueError(f"{what}: topic {topic!r} does not map broker names to queues")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise ValueError(f"{what}: broker {broker!r} of {topic!r} does not map queue "
                                 "ids to offsets")
            for queue_id, offset in queues.items():
                if not (isinstance(queue_id, str) and queue_id.isdigit()) or isinstance(
                        offset, bool) or not isinstance(offset, int):
                    raise ValueError(f"{what}: queue {queue_id!r} of {broker}/{topic}: queue "
                                     f"ids are digits and offsets integers, got {offset!r}")
                out[(topic, broker, int(queue_id))] = offset
    return out


def offsets_from_json(raw: object, topics: Sequence[str]) -> dict[QueueKey, int]:
    """Return the offsets Spark kept for a source reading ``topics``.

    Raises:
        ValueError: they are not the rocketmq source's, or of other topics (the checkpoint
            belongs to another query).
    """
    try:
        offsets = _nested(raw, "the checkpoint's offset")
    except ValueError as exc:
        raise ValueError(f"{exc} ({str(raw)[:200]}): it is not the rocketmq source's; start "
                         "the query with a new checkpoint location") from None
    other = sorted({topic for topic, _, _ in offsets} - set(topics))
    if other or any(offset < 0 for offset in offsets.values()):
        raise ValueError(f"the checkpoint is of a query reading {', '.join(other) or 'other'} "
                         f"offsets, not topics {', '.join(topics)}: start the query with a new "
                         "checkpoint location to read other topics")
    return offsets


def given_offsets(option: str, text: str, topics: Sequence[str]) -> Given:
    """Return an offsets option: ``earliest``, ``latest`` or JSON (per topic, broker and
    queue id; the topic level may be left out for one topic; -2 earliest, -1 latest).

    Raises:
        ValueError: it is none of these (the message says what is expected).
    """
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return "earliest" if word == "earliest" else "latest"
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError:
        raw = None
    if isinstance(raw, dict) and len(topics) == 1 and raw and all(
            isinstance(v, dict) and all(isinstance(o, int) for o in v.values())
            for v in raw.values()):
        raw = {topics[0]: raw}  # {"broker-a": {"0": 12}}: one topic, level left out
    try:
        offsets = _nested(raw, f"option {option}")
    except ValueError as exc:
        raise ValueError(f"{exc}; option {option} is earliest, latest or JSON such as "
                         '{"' + topics[0] + '": {"broker-a": {"0": 120, "1": -2}}} '
                         "(-2: a queue's earliest, -1: its latest)") from None
    other = sorted({topic for topic, _, _ in offsets} - set(topics))
    if other:
        raise ValueError(f"option {option} names topics the source does not read: "
                         f"{', '.join(other)}")
    bad = {k: v for k, v in offsets.items() if v < EARLIEST}
    if bad:
        raise ValueError(f"option {option}: offsets are >= 0, or -2 (earliest) or -1 "
                         f"(latest), got {sorted(bad.values())[:3]}")
    return offsets


def resolve(given: Given, earliest: Mapping[QueueKey, int], latest: Mapping[QueueKey, int],
            default: Literal["earliest", "latest"]) -> dict[QueueKey, int]:
    """Return the offsets of every queue of ``latest`` for an option: the word's, or the
    JSON's (-2 and -1 resolved; a queue it does not name gets ``default``), each within
    the queue's bounds."""
    out: dict[QueueKey, int] = {}
    for key, end in latest.items():
        first = earliest.get(key, 0)
        if given == "earliest":
            offset = first
        elif given == "latest":
            offset = end
        else:
            wanted = given.get(key, EARLIEST if default == "earliest" else LATEST)
            offset = first if wanted == EARLIEST else end if wanted == LATEST else wanted
        out[key] = min(max(offset, first), end)
    return out


def trigger_ends(start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int],
                 max_messages: int | None = None,
                 target: Mapping[QueueKey, int] | None = None) -> dict[QueueKey, int]:
    """Return the end of the trigger that starts at ``start``.

    Args:
        latest: each queue's end now (queues missing from it keep their start: a broker that
            did not answer, a queue gone from the route).
        max_messages: at most this many offsets in all (``maxMessagesPerTrigger``), shared
            among the queues in proportion to what each has to read; None: all.
        target: not past these (``Trigger.AvailableNow``'s ends; a queue it lacks is not
            read); None: no bound.
    """
    ends = dict(start)
    wants: dict[QueueKey, int] = {}
    for key, end in latest.items():
        bound = end if target is None else min(end, target.get(key, start.get(key, 0)))
        first = start.get(key, 0)  # a new queue starts at 0
        ends.setdefault(key, first)
        if bound > first:
            wants[key] = bound - first
    total = sum(wants.values())
    if max_messages is None or total <= max_messages:
        for key, count in wants.items():
            ends[key] += count
        return ends
    # shares in proportion, floored; the rest one each to the largest remainders (ties: by
    # queue), so the shares add up to max_messages and the same state gives the same ends
    shares = {key: count * max_messages // total for key, count in wants.items()}
    left = max_messages - sum(shares.values())
    order = sorted(wants, key=lambda k: (-(wants[k] * max_messages % total), k))
    for key in order[:left]:
        shares[key] += 1
    for key, share in shares.items():
        ends[key] += share
    return ends


def plan_partitions(segments: Iterable[Segment], min_partitions: int,
                    per_partition: int) -> list[list[Segment]]:
    """Return ``segments`` (queue ranges) as Spark partitions of about equal sizes: at least
    ``min_partitions`` (if there are as many offsets) and at most ``per_partition`` offsets
    each; a partition holds consecutive parts of the segments in their order."""
    ranges = sorted((s for s in segments if s.size > 0), key=lambda s: s.key)
    total = sum(s.size for s in ranges)
    if not total:
        return []
    parts = min(total, max(min_partitions, math.ceil(total / per_partition)))
    bounds = [total * i // parts for i in range(parts + 1)]  # cumulative cut points
    out: list[list[Segment]] = [[] for _ in range(parts)]
    done = 0  # offsets of the segments before this one
    part = 0
    for seg in ranges:
        at = seg.start
        while at < seg.end:
            while bounds[part + 1] <= done + (at - seg.start):
                part += 1
            upto = min(seg.end, seg.start + bounds[part + 1] - done)
            out[part].append(Segment(seg.topic, seg.broker, seg.queue_id, at, upto))
            at = upto
        done += seg.size
    return out
