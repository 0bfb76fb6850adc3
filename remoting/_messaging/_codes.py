"""Request codes of our own: the ranges, and the transport's stream frames with their ext fields.

The ROCKETMQ binary header carries a code as an int16, so ours sit just below 32,767, far
from RocketMQ's: 32,000 is the statistics processor's (`remoting.STATS_REQUEST_CODE`),
32,100-32,199 the transport's streams, 32,200-32,299 the queue service, 32,300-32,399 the
event bus. The stream frames are defined here (the core, the faces and the queue share
them); the queue's own codes in `remoting.queue._wire`, the bus's in `remoting._bus._wire`.
docs/protocol.md documents each with its fields.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = [
    "COST",
    "CREDITS",
    "END_CODE",
    "STREAM_CODES",
    "STREAM_ID",
    "StreamCode",
]


class StreamCode(IntEnum):
    """The frames of a credit-based stream (each a oneway request)."""

    ITEM = 32_100  # server -> client: one item (ext streamId, cost)
    CREDIT = 32_101  # client -> server: more credits (ext streamId, credits)
    CANCEL = 32_102  # client -> server: stop the stream (ext streamId)
    END = 32_103  # server -> client: the stream ended (ext streamId, endCode; remark)


STREAM_CODES: Final = frozenset(StreamCode)

# ext fields of the stream frames
STREAM_ID: Final = "streamId"  # the stream's id, chosen by the client (on every frame)
CREDITS: Final = "credits"  # on the opening request: the first grant; on CREDIT: more
COST: Final = "cost"  # on ITEM: the credits the item uses (default 1)
END_CODE: Final = "endCode"  # on END: a response code, SUCCESS for a normal end
