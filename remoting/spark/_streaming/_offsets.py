"""Offsets of a queue topic as Spark's streaming source keeps them, and what each trigger
reads (bookkeeping only: no I/O, unit-tested without Spark or sockets).

A topic of the queue service is one ordered log, so the stream's offset is one number: the
next offset to read (RocketMQ's pull model: the queue's offsets are the stream's offsets).
Spark writes it to its checkpoint as JSON, with the topic (so a restart against another
topic fails clearly), the consumer group the source commits to (option ``group``; none
unless named: checkpoints written before kept a ``spark-<id>`` group made for the query,
which their query goes on committing to), and the log's
*incarnation*: the id the service gives the topic's log when it makes it (kept across
restarts with a data directory). Offsets of another incarnation are another log's: a
service without a data directory that restarted numbers its new messages from 0 again, and
a query that kept reading from its old offset would skip them without a word. A checkpoint
written before incarnations has none: the source cannot tell, says so once, and takes the
log's from then on. ``reset`` marks the end of the first batch read from a new incarnation
(with ``failOnDataLoss=false``): that batch starts at that offset of the new log, not at the
previous batch's end.

A trigger reads ``[start, end)``: ``end`` is what the service can serve now (its readable
end), bounded by ``maxMessagesPerTrigger`` and, under ``Trigger.AvailableNow``, by what was
there when the query started. The range is split into tasks of at most
``messagesPerPartition`` offsets each, of equal size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["Starting", "StreamOffset", "batch_start", "resolve_start", "split_range",
           "trigger_end"]

Starting = Literal["earliest", "latest"] | int


@dataclass(frozen=True, slots=True)
class StreamOffset:
    """A place in the stream: the next offset to read of ``topic``, the group that commits
    it (None: none), and the incarnation of the log it is an offset of (None: not known)."""

    topic: str
    offset: int
    group: str | None = None
    incarnation: str | None = None
    reset: int | None = None  # a batch ending here starts at this offset of its log

    def to_json(self) -> dict[str, str | int]:
        """Return the offset as Spark checkpoints it."""
        raw: dict[str, str | int] = {"topic": self.topic, "offset": self.offset}
        if self.group is not None:
            raw["group"] = self.group
        if self.incarnation is not None:
            raw["incarnation"] = self.incarnation
        if self.reset is not None:
            raw["reset"] = self.reset
        return raw

    @classmethod
    def from_json(cls, raw: object, topic: str) -> StreamOffset:
        """Return the offset Spark kept for a source reading ``topic``.

        Raises:
            ValueError: it is not one of ours, or it is for another topic (the checkpoint
                belongs to another query).
        """
        if not isinstance(raw, Mapping) or not isinstance(raw.get("offset"), int) or not (
                isinstance(raw.get("topic"), str) and isinstance(raw.get("group"), str | None)):
            raise ValueError(f"the checkpoint holds an offset that is not the remoting "
                             f"source's ({raw!r}): start the query with a new checkpoint "
                             "location")
        if raw["topic"] != topic:
            raise ValueError(f"the checkpoint is of a query reading topic {raw['topic']!r}, "
                             f"not {topic!r}: start the query with a new checkpoint location "
                             "to read another topic")
        incarnation = raw.get("incarnation")  # absent from checkpoints written before it
        reset = raw.get("reset")
        if not isinstance(incarnation, str | None) or not (
                reset is None or (isinstance(reset, int) and not isinstance(reset, bool))):
            raise ValueError(f"the checkpoint holds an offset that is not the remoting "
                             f"source's ({raw!r}): start the query with a new checkpoint "
                             "location")
        return cls(topic, raw["offset"], raw.get("group"), incarnation, reset)

    def at(self, offset: int) -> StreamOffset:
        """Return this offset moved to ``offset`` (of the same log)."""
        return StreamOffset(self.topic, offset, self.group, self.incarnation)

    def of(self, incarnation: str | None) -> StreamOffset:
        """Return this offset as one of the log ``incarnation`` (taken for an unknown one)."""
        return StreamOffset(self.topic, self.offset, self.group, incarnation, self.reset)


def batch_start(start: StreamOffset, end: StreamOffset) -> int:
    """Return the first offset of the batch ``[start, end)``: ``start``'s, unless ``end``
    is of another log (`StreamOffset.reset`: where it began reading that one)."""
    if (end.reset is not None and start.incarnation is not None
            and end.incarnation != start.incarnation):
        return end.reset
    return start.offset


def resolve_start(starting: Starting, earliest: int, end: int) -> int:
    """Return the first offset to read for ``startingOffsets`` (``earliest``, ``latest``, or
    an offset, raised to the earliest the topic holds)."""
    if starting == "earliest":
        return earliest
    if starting == "latest":
        return end
    return min(max(starting, earliest), end)


def trigger_end(start: int, readable: int, max_messages: int | None = None,
                target: int | None = None) -> int:
    """Return the end (exclusive) of the trigger that starts at ``start``.

    Args:
        readable: the offset the service can serve up to now.
        max_messages: at most this many offsets (``maxMessagesPerTrigger``); None: all.
        target: not past this (``Trigger.AvailableNow``'s end); None: no bound.
    """
    end = readable if target is None else min(readable, target)
    if max_messages is not None:
        end = min(end, start + max_messages)
    return max(start, end)


def split_range(start: int, end: int, per_partition: int) -> list[tuple[int, int]]:
    """Return ``[start, end)`` as consecutive ranges of at most ``per_partition`` offsets,
    of equal sizes (within one)."""
    count = end - start
    if count <= 0:
        return []
    parts = math.ceil(count / per_partition)
    bounds = [start + count * i // parts for i in range(parts + 1)]
    return list(zip(bounds, bounds[1:], strict=False))
