"""A consumer group's offsets and how queues are shared in a group, sans-I/O.

- `OffsetTable` (Java's ``RemoteBrokerOffsetStore`` / ``LocalFileOffsetStore`` without the
  I/O): each queue's offset in memory, moved forward as messages are handled, and which of
  them changed since they were last stored (`changed`); the caller stores those on the
  brokers (clustering) or in a file (broadcasting: `load_file` / `dump_file`).
- `allocate_averagely` (Java's ``AllocateMessageQueueAveragely``): every member computes
  the same split from the same sorted queues and members, so each queue goes to exactly
  one member without any coordination.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ._message import MessageQueue
from ._route import queue_key

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["OffsetTable", "allocate_averagely", "dump_file", "load_file"]


class OffsetTable:
    """Offsets of a group's queues in memory, and which changed since stored."""

    def __init__(self) -> None:
        self._offsets: dict[MessageQueue, int] = {}
        self._stored: dict[MessageQueue, int] = {}

    def update(self, queue: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        """Set ``queue``'s offset (only forward if ``increase_only``)."""
        if offset < 0:
            return
        old = self._offsets.get(queue)
        if old is None or not increase_only or offset > old:
            self._offsets[queue] = offset

    def read(self, queue: MessageQueue) -> int | None:
        """Return ``queue``'s offset in memory, or None."""
        return self._offsets.get(queue)

    def changed(self) -> list[tuple[MessageQueue, int]]:
        """Return the queues whose offset changed since last `stored`."""
        return [(q, o) for q, o in self._offsets.items() if self._stored.get(q) != o]

    def stored(self, queue: MessageQueue, offset: int) -> None:
        """Record that ``offset`` of ``queue`` is stored."""
        self._stored[queue] = offset

    def remove(self, queue: MessageQueue) -> None:
        """Forget ``queue`` (it went to another member)."""
        self._offsets.pop(queue, None)
        self._stored.pop(queue, None)

    def items(self) -> list[tuple[MessageQueue, int]]:
        return list(self._offsets.items())


def allocate_averagely(queues: Sequence[MessageQueue], members: Sequence[str], me: str
                       ) -> list[MessageQueue]:
    """Return the queues of ``me`` when ``members`` share ``queues``: contiguous runs of the
    sorted queues, the first ``len(queues) % len(members)`` members one more each.
    Empty if ``me`` is not a member (its heartbeat has not reached the broker yet)."""
    all_queues = sorted(queues, key=queue_key)
    all_members = sorted(members, key=lambda m: m.encode("utf-16-be", "surrogatepass"))
    if me not in all_members or not all_queues:
        return []
    index = all_members.index(me)
    n, m = len(all_queues), len(all_members)
    mod = n % m
    if n <= m:
        size = 1
    elif mod > 0 and index < mod:
        size = n // m + 1
    else:
        size = n // m
    start = index * size if mod > 0 and index < mod else index * size + mod
    count = min(size, n - start)
    return [all_queues[(start + i) % n] for i in range(max(count, 0))]


def dump_file(path: str, offsets: list[tuple[MessageQueue, int]]) -> None:
    """Write ``offsets`` to ``path`` at once (a new file renamed over the old one)."""
    data = {"offsets": [{"topic": q.topic, "brokerName": q.broker_name,
                         "queueId": q.queue_id, "offset": o} for q, o in offsets]}
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_file(path: str) -> dict[MessageQueue, int]:
    """Return the offsets stored at ``path`` ({} if there is no file).

    Raises:
        ValueError: the file is not one `dump_file` wrote.
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    try:
        return {MessageQueue(str(e["topic"]), str(e["brokerName"]), int(e["queueId"])):
                int(e["offset"]) for e in data["offsets"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path} is not an offsets file ({exc!r}): move it away") from None
