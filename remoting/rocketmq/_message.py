"""The values a RocketMQ client hands its users: messages, queues and send results."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Message", "MessageQueue", "SendResult", "SendStatus"]

# MessageConst's property names
TAGS = "TAGS"
KEYS = "KEYS"
WAIT = "WAIT"
UNIQ_KEY = "UNIQ_KEY"
RETRY_TOPIC = "RETRY_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUME_TIME = "RECONSUME_TIME"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
CONSUME_START_TIME = "CONSUME_START_TIME"
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
DELAY = "DELAY"
SHARDING_KEY = "__SHARDINGKEY"
KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR: a message's keys in one property
# what a user may not set through ``properties`` (MessageConst.STRING_HASH_SET's core)
RESERVED = frozenset({TAGS, KEYS, WAIT, UNIQ_KEY, RETRY_TOPIC, ORIGIN_MESSAGE_ID,
                      RECONSUME_TIME, MAX_RECONSUME_TIMES, MIN_OFFSET, MAX_OFFSET,
                      "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP", "TRANSACTION_CHECK_TIMES",
                      "CONSUME_START_TIME", "INSTANCE_ID", "MSG_REGION", "TRACE_ON"})


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker (Java's MessageQueue); ordered as Java orders
    them (topic, broker name, queue id)."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}:{self.queue_id}"


@dataclass(slots=True, eq=False)
class Message:
    """A message a consumer received (Java's MessageExt).

    ``msg_id`` is the id its producer gave it (the ``UNIQ_KEY`` property, upper-case hex,
    as Java's ``MessageExt.getMsgId`` of a received message and RocketMQ's tools show it),
    or, for a message sent without one, ``offset_msg_id``: the broker's id made of its
    store address and commit-log offset. ``properties`` holds every property the message
    carries, the user's and RocketMQ's (``TAGS``, ``KEYS``, ``UNIQ_KEY``...). Timestamps are
    milliseconds since the epoch, as Java's. A message from the retry topic shows its
    original ``topic`` and ``reconsume_times`` >= 1.
    """

    topic: str
    body: bytes
    properties: dict[str, str]
    msg_id: str
    offset_msg_id: str
    broker_name: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    reconsume_times: int
    born_timestamp: int
    store_timestamp: int
    born_host: str
    store_host: str
    sys_flag: int
    flag: int
    store_size: int = 0
    body_crc: int = 0

    @property
    def tags(self) -> str | None:
        """The message's tag, or None."""
        return self.properties.get(TAGS)

    @property
    def keys(self) -> list[str]:
        """The message's keys (its ``KEYS`` property split on spaces)."""
        value = self.properties.get(KEYS)
        return [k for k in value.split(KEY_SEPARATOR) if k] if value else []

    @property
    def queue(self) -> MessageQueue:
        """The queue the message was read from."""
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def __repr__(self) -> str:
        return (f"Message(topic={self.topic!r}, msg_id={self.msg_id!r}, tags={self.tags!r}, "
                f"queue={self.broker_name}:{self.queue_id}, offset={self.queue_offset}, "
                f"body_bytes={len(self.body)})")


class SendStatus(Enum):
    """How a broker stored a sent message (Java's SendStatus)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # stored, not yet on disk (SYNC_FLUSH brokers)
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"  # stored, not yet on the slave (SYNC_MASTER)
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"  # stored, no slave to copy it to


@dataclass(frozen=True, slots=True, kw_only=True)
class SendResult:
    """What a broker answered a send (Java's SendResult).

    ``msg_id`` is the message's ``UNIQ_KEY`` as Java prints it (for a batch: the ids joined
    with commas, as Java's; ``msg_ids`` lists them); ``offset_msg_id`` the broker's id of
    the stored message; ``queue_offset`` its offset in its queue (a batch's first).
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    broker_name: str
    queue_id: int
    queue_offset: int
    topic: str
    msg_ids: tuple[str, ...] = field(default=())

    @property
    def queue(self) -> MessageQueue:
        """The queue the message went to."""
        return MessageQueue(self.topic, self.broker_name, self.queue_id)


def property_map(properties: Mapping[str, str] | None) -> dict[str, str]:
    """Return a copy of a user's ``properties``, checked.

    Raises:
        TypeError: a key or value is not a str.
        ValueError: a key is empty or one RocketMQ reserves (``TAGS``, ``KEYS``, ``UNIQ_KEY``
            ...: use the arguments for those), or a key or value holds the separators
            ``\\x01`` / ``\\x02``.
    """
    if not properties:
        return {}
    out: dict[str, str] = {}
    for k, v in properties.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"properties must map str to str, got {k!r}: {v!r}")
        if not k or k in RESERVED:
            raise ValueError(f"property name {k!r} is empty or reserved by RocketMQ")
        if "\x01" in k or "\x02" in k or "\x01" in v or "\x02" in v:
            raise ValueError(f"property {k!r} holds a separator (\\x01 or \\x02)")
        out[k] = v
    return out
