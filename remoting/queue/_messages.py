"""`Message`: one message as the queue's users see it, made from a delivered or pulled record."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._messaging._records import record_fields

if TYPE_CHECKING:
    from .._messaging._records import Fields

__all__ = ["Message", "messages_of"]


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
