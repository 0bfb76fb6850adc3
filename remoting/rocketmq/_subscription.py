"""Subscriptions and heartbeats (Java's ``FilterAPI``, ``SubscriptionData``, ``HeartbeatData``).

A tag expression is ``"*"`` (every message) or tags joined by ``||`` (``"a || b"``). The
broker filters by the tags' hash codes (Java's ``String.hashCode``) and the client checks
each message's tag against the set again, since two tags may share a hash code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import orjson

from ._fault import java_hash

if TYPE_CHECKING:
    from ._message import Message

__all__ = ["ConsumerData", "Subscription", "heartbeat_body"]

SUB_ALL: Final = "*"


@dataclass(frozen=True, slots=True)
class Subscription:
    """A topic and the tags of it a consumer wants."""

    topic: str
    expression: str
    tags: frozenset[str]
    version: int  # subVersion: the time it was made, in ms (newer replaces older at the broker)

    @classmethod
    def parse(cls, topic: str, expression: str | None, version: int) -> Subscription:
        """Return the subscription of ``topic`` to ``expression`` (None or "" mean "*").

        Raises:
            TypeError: ``expression`` is not a str.
            ValueError: it names no tag (only ``||`` and spaces).
        """
        if expression is not None and not isinstance(expression, str):
            raise TypeError(f"a tag expression is a str such as 'a || b', got {expression!r}")
        if not expression or expression.strip() == SUB_ALL:
            return cls(topic, SUB_ALL, frozenset(), version)
        tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
        if not tags:
            raise ValueError(f"the tag expression {expression!r} names no tag")
        return cls(topic, expression, tags, version)

    @property
    def all(self) -> bool:
        return not self.tags

    def matches(self, message: Message) -> bool:
        """Return whether ``message``'s tag is one this subscription wants."""
        return not self.tags or message.properties.get("TAGS") in self.tags

    def as_json(self) -> dict[str, object]:
        """Return it as Java's SubscriptionData serializes."""
        return {"classFilterMode": False, "topic": self.topic, "subString": self.expression,
                "tagsSet": sorted(self.tags), "codeSet": sorted(java_hash(t) for t in self.tags),
                "subVersion": self.version, "expressionType": "TAG"}


@dataclass(frozen=True, slots=True)
class ConsumerData:
    """A consumer group's part of a heartbeat."""

    group: str
    consume_type: str  # "CONSUME_PASSIVELY" (push) or "CONSUME_ACTIVELY" (pull)
    message_model: str  # "CLUSTERING" or "BROADCASTING"
    consume_from_where: str
    subscriptions: tuple[Subscription, ...]

    def as_json(self) -> dict[str, object]:
        return {"groupName": self.group, "consumeType": self.consume_type,
                "messageModel": self.message_model, "consumeFromWhere": self.consume_from_where,
                "subscriptionDataSet": [s.as_json() for s in self.subscriptions],
                "unitMode": False}


def heartbeat_body(client_id: str, producer_groups: list[str],
                   consumers: list[ConsumerData]) -> bytes:
    """Return a HEART_BEAT request's body (HeartbeatData)."""
    return orjson.dumps({"clientID": client_id,
                         "producerDataSet": [{"groupName": g} for g in producer_groups],
                         "consumerDataSet": [c.as_json() for c in consumers]})
