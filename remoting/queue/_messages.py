"""`Message`: one message as the queue's users see it, made from a delivered or pulled record;
`PulledRecords`: a pull's answer as the service sent it, for reading in bulk."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._sansio._records import record_fields

if TYPE_CHECKING:
    from ._sansio._records import Fields

__all__ = ["Message", "PulledRecords", "messages_of"]


class Message:
    """A message of a topic.

    Attributes:
        topic: its topic.
        offset: its place in the topic's log (0, 1, 2... in publish order).
        body: its bytes.
        headers: its headers (str to str).
        timestamp: when the service appended it (seconds since the epoch).
        attempts: 1 for a first delivery, one more for each redelivery (1 for a pull).
    """

    __slots__ = ("attempts", "body", "headers", "offset", "timestamp", "topic")

    def __init__(self, topic: str, fields: Fields, attempts: int = 1) -> None:
        self.topic = topic
        self.offset = fields[0]
        self.timestamp = fields[1] / 1000
        self.headers = fields[3]
        self.body = fields[4]
        self.attempts = attempts

    @property
    def id(self) -> str:
        """``"<topic>@<offset>"``: unique in a service."""
        return f"{self.topic}@{self.offset}"

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.id} {len(self.body)} bytes, "
                f"attempt {self.attempts}>")


def messages_of(topic: str, data: bytes | None, attempts: dict[int, int] | None = None
                ) -> list[Message]:
    """Return the messages of a delivery or a pull answer's body."""
    if not data:
        return []
    tries = attempts or {}
    return [Message(topic, fields, tries.get(fields[0], 1)) for fields in record_fields(data)]


class PulledRecords:
    """A pull's answer as the service sent it, for reading in bulk
    (`BlockingQueueClient.pull_records`).

    ``data`` holds the records back to back in offset order, each in the layout
    docs/protocol.md gives under "Records" (a length, a CRC, the offset, the timestamp, the
    time it was due, flags, an optional key, then the headers and the body); so a reader
    may decode them in bulk (into columns, say) without a Python object per message.
    ``fields`` and ``messages`` decode them one by one.

    Attributes:
        topic: the topic pulled.
        data: the records, back to back (empty: none).
    """

    __slots__ = ("data", "topic")

    def __init__(self, topic: str, data: bytes) -> None:
        self.topic = topic
        self.data = data

    def __bool__(self) -> bool:
        """True if it holds a record."""
        return bool(self.data)

    def __repr__(self) -> str:
        return f"<PulledRecords of {self.topic!r}, {len(self.data)} bytes>"

    def fields(self) -> list[Fields]:
        """Return each record as a tuple: offset, timestamp_ms, deliver_at_ms, headers,
        body, key, batch_count (no object per record).

        Raises:
            ValueError: ``data`` is not whole records (a broken service).
        """
        return record_fields(self.data)

    def messages(self) -> list[Message]:
        """Return the records as `Message` objects (what `BlockingQueueClient.pull` returns)."""
        return messages_of(self.topic, self.data)
