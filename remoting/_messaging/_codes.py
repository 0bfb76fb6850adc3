"""Request codes of our own, and the ext fields they carry: defined once here.

The ROCKETMQ binary header carries a code as an int16, so ours sit just below 32,767, far
from RocketMQ's: 32,000 is the statistics processor's (`remoting.STATS_REQUEST_CODE`),
32,100-32,199 the transport's streams, 32,200-32,299 the queue service, 32,300-32,399 the
event bus. docs/protocol.md documents each with its fields.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = [
    "COST",
    "CREDITS",
    "END_CODE",
    "QUEUE_CODES",
    "STREAM_CODES",
    "STREAM_ID",
    "QueueCode",
    "StreamCode",
]


class StreamCode(IntEnum):
    """The frames of a credit-based stream (each a oneway request)."""

    ITEM = 32_100  # server -> client: one item (ext streamId, cost)
    CREDIT = 32_101  # client -> server: more credits (ext streamId, credits)
    CANCEL = 32_102  # client -> server: stop the stream (ext streamId)
    END = 32_103  # server -> client: the stream ended (ext streamId, endCode; remark)


class QueueCode(IntEnum):
    """The requests of the queue service (`remoting.queue`)."""

    PUBLISH = 32_200  # one or many messages to a topic; answered with their offsets
    SUBSCRIBE = 32_201  # opens a stream of deliveries from a channel
    ACK = 32_202  # finish / requeue / touch deliveries, grouped
    PULL = 32_203  # messages from an offset or a group's offset; held while there are none
    COMMIT = 32_204  # a group's offset
    OFFSETS = 32_205  # a topic's earliest and latest offsets and its groups' offsets
    STATS = 32_206  # statistics per topic, channel and group (JSON)
    CREATE_TOPIC = 32_207  # make a topic before anything is published to it


STREAM_CODES: Final = frozenset(StreamCode)
QUEUE_CODES: Final = frozenset(QueueCode)

# ext fields of the stream frames
STREAM_ID: Final = "streamId"  # the stream's id, chosen by the client (on every frame)
CREDITS: Final = "credits"  # on the opening request: the first grant; on CREDIT: more
COST: Final = "cost"  # on ITEM: the credits the item uses (default 1)
END_CODE: Final = "endCode"  # on END: a response code, SUCCESS for a normal end
