"""The queue client's side of the wire: each request built from checked arguments, each
answer read (both faces, and Spark's source and sink, build and read them here only).

A builder raises ``TypeError`` or ``ValueError`` for a bad argument before anything is sent;
a reader raises `QueueError` for an answer other than SUCCESS (`QueueFullError` for a full
topic) or for a field the service should not have sent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

import orjson

from codec import FLAG_ONEWAY, RemotingCommand, ResponseCode

from .._checks import seconds
from .._messaging._codes import STREAM_ID
from ._errors import refusal_error
from ._sansio._acks import MAX_DELAY_MS, pack_acks
from ._sansio._records import MAX_PUBLISH_HEADERS, encode_content, pack_entries
from ._stats import MAX_TOPICS_PER_PAGE, QueueStatistics, TopicOffsets, statistics_from_json
from ._wire import (
    AFTER,
    CHANNEL,
    COUNT,
    DEFER_MS,
    DUPLICATE,
    GROUP,
    INCARNATION,
    KEY,
    LIMIT,
    MAX,
    MAX_PUBLISH,
    MAX_PULL,
    MAX_WAIT_MS,
    OFFSET,
    TOPIC,
    QueueCode,
    answered_int,
)

if TYPE_CHECKING:
    from .._errors import RemotingError, RemotingStreamError
    from ._sansio._acks import AckOp

__all__ = [
    "DEFAULT_ACK_WINDOW",
    "DEFAULT_TIMEOUT",
    "PULL_SLACK",
    "Body",
    "Published",
    "ack_request",
    "checked",
    "commit_request",
    "create_topic_request",
    "delay_ms",
    "offsets_of",
    "offsets_request",
    "publish_request",
    "published",
    "pull_request",
    "pull_timeout",
    "statistics_of",
    "stats_request",
    "stream_refusal",
    "subscribe_request",
]

DEFAULT_TIMEOUT: Final = 3.0
DEFAULT_ACK_WINDOW: Final = 0.05  # seconds; Pulsar's client groups acknowledgements 100 ms
PULL_SLACK: Final = 5.0  # seconds a pull's call waits past its max_wait
MAX_WAIT_MS_LIMIT: Final = 3_600_000  # the service holds a pull an hour at most

Body = bytes | tuple[bytes, Mapping[str, str]]


# ---------------------------------------------------------------------- arguments

def _request(code: QueueCode, fields: dict[str, str], body: bytes | None = None
             ) -> RemotingCommand:
    return RemotingCommand.create_request(code, header=fields, body=body)


def _name(kind: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{kind} must be a str, got {value!r}")
    return value


def _offset(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"offset must be an int >= 0, got {value!r}")
    return str(value)


def _ms(duration: float) -> int:
    """Return ``duration`` (seconds, infinity allowed) in whole ms, at most `MAX_DELAY_MS`."""
    return math.ceil(min(MAX_DELAY_MS, duration * 1000))


def delay_ms(delay: float) -> int:
    """Return a requeue's ``delay`` (seconds) in whole ms.

    Raises:
        TypeError, ValueError: not seconds >= 0.
    """
    return _ms(seconds("delay", delay))


def pull_timeout(max_wait: float, timeout: float | None) -> float:
    """Return how long a pull's call waits for its answer: ``timeout``, or by default
    `PULL_SLACK` past the time the service may hold it."""
    return max_wait + PULL_SLACK if timeout is None else timeout


# ---------------------------------------------------------------------- requests

def publish_request(topic: str, bodies: Iterable[Body], defer: float, key: str | None
                    ) -> tuple[RemotingCommand, int]:
    """Return a PUBLISH request of ``bodies`` and how many messages it carries.

    Raises:
        TypeError, ValueError: a body that is not bytes (or ``(bytes, headers)``), no body
            or more than `MAX_PUBLISH`, bad headers (more than 64 in a message, 65,536 in
            the publish), a ``defer`` that is not seconds >= 0, a ``key`` that is not a str.
    """
    fields = {TOPIC: _name("topic", topic)}
    contents = []
    header_count = 0
    for item in bodies:
        if isinstance(item, tuple):
            body, headers = item
            contents.append(encode_content(headers, body))
            header_count += len(headers) if headers else 0
        else:
            contents.append(encode_content(None, item))
    if not contents:
        raise ValueError("publish_many needs at least one body")
    if len(contents) > MAX_PUBLISH:
        raise ValueError(f"a publish carries at most {MAX_PUBLISH} messages, got "
                         f"{len(contents)}: split the batch")
    if header_count > MAX_PUBLISH_HEADERS:
        raise ValueError(f"a publish carries at most {MAX_PUBLISH_HEADERS} headers in all, "
                         f"got {header_count}: split the batch")
    defer = seconds("defer", defer)
    if defer:
        fields[DEFER_MS] = str(_ms(defer))
    if key is not None:
        fields[KEY] = _name("key", key)
    return _request(QueueCode.PUBLISH, fields, pack_entries(contents)), len(contents)


def pull_request(topic: str, group: str | None, offset: int | None, max_messages: int,
                 max_wait: float, incarnation: str | None = None) -> RemotingCommand:
    """Return a PULL request (``incarnation``: refused with PULL_OFFSET_MOVED unless the
    topic's log is that one, see `TopicOffsets`).

    Raises:
        TypeError, ValueError: neither ``group`` nor ``offset``, an offset below 0,
            ``max_messages`` out of 1-4096, ``max_wait`` not seconds >= 0.
    """
    fields = {TOPIC: _name("topic", topic)}
    if incarnation is not None:
        fields[INCARNATION] = _name("incarnation", incarnation)
    if group is not None:
        fields[GROUP] = _name("group", group)
    if offset is not None:
        fields[OFFSET] = _offset(offset)
    if group is None and offset is None:
        raise ValueError("a pull reads from a group's offset or from an offset: give one")
    if isinstance(max_messages, bool) or not isinstance(max_messages, int) or not (
            1 <= max_messages <= MAX_PULL):
        raise ValueError(f"max_messages must be an int from 1 to {MAX_PULL}, got "
                         f"{max_messages!r}")
    fields[MAX] = str(max_messages)
    fields[MAX_WAIT_MS] = str(min(MAX_WAIT_MS_LIMIT, _ms(seconds("max_wait", max_wait))))
    return _request(QueueCode.PULL, fields)


def commit_request(topic: str, group: str, offset: int) -> RemotingCommand:
    """Return a COMMIT request.

    Raises:
        TypeError, ValueError: a name that is not a str, an offset that is not an int >= 0.
    """
    return _request(QueueCode.COMMIT, {TOPIC: _name("topic", topic),
                                       GROUP: _name("group", group), OFFSET: _offset(offset)})


def subscribe_request(topic: str, channel: str) -> RemotingCommand:
    """Return a SUBSCRIBE request (the stream's opening request)."""
    return _request(QueueCode.SUBSCRIBE, {TOPIC: _name("topic", topic),
                                          CHANNEL: _name("channel", channel)})


def create_topic_request(topic: str) -> RemotingCommand:
    """Return a CREATE_TOPIC request."""
    return _request(QueueCode.CREATE_TOPIC, {TOPIC: _name("topic", topic)})


def stats_request(topic: str | None, after: str | None, limit: int | None
                  ) -> RemotingCommand:
    """Return a STATS request: the service's totals; with ``topic``, that topic in detail;
    with ``limit``, a page of topics after ``after``.

    Raises:
        TypeError, ValueError: a name that is not a str, a ``limit`` that is not an int
            from 1 to 1,000.
    """
    fields: dict[str, str] = {}
    if topic is not None:
        fields[TOPIC] = _name("topic", topic)
    if after is not None:
        fields[AFTER] = _name("after", after)
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or not (
                1 <= limit <= MAX_TOPICS_PER_PAGE):
            raise ValueError(f"limit must be an int from 1 to {MAX_TOPICS_PER_PAGE}, got "
                             f"{limit!r}")
        fields[LIMIT] = str(limit)
    return _request(QueueCode.STATS, fields)


def offsets_request(topic: str, offset: int | None) -> RemotingCommand:
    """Return an OFFSETS request (``offset``: where ``readable`` is counted from).

    Raises:
        TypeError, ValueError: a topic that is not a str, an offset that is not an int >= 0.
    """
    fields = {TOPIC: _name("topic", topic)}
    if offset is not None:
        fields[OFFSET] = _offset(offset)
    return _request(QueueCode.OFFSETS, fields)


def ack_request(stream_id: int, topic: str, channel: str,
                acks: list[tuple[AckOp, int, int]], oneway: bool) -> RemotingCommand:
    """Return an ACK request of ``acks`` for the subscription on stream ``stream_id``; a
    ``oneway`` one gets no answer (its refusals come back on the stream)."""
    request = _request(QueueCode.ACK, {STREAM_ID: str(stream_id), TOPIC: topic,
                                       CHANNEL: channel}, pack_acks(acks))
    if oneway:
        request.flag |= FLAG_ONEWAY
    return request


# ---------------------------------------------------------------------- answers

def checked(addr: str | None, reply: RemotingCommand) -> RemotingCommand:
    """Return ``reply`` if it is SUCCESS.

    Raises:
        QueueError: the service refused the request (`QueueFullError`: the topic is full).
    """
    if reply.code != ResponseCode.SUCCESS:
        raise refusal_error(addr, reply.code, reply.remark)
    return reply


class Published:
    """What a publish got: its first offset, its count, and whether the service had seen its
    idempotence key already (nothing appended: the offsets are the first publish's)."""

    __slots__ = ("count", "duplicate", "first")

    def __init__(self, first: int, count: int, duplicate: bool) -> None:
        self.first = first
        self.count = count
        self.duplicate = duplicate

    @property
    def offsets(self) -> list[int]:
        """The offsets of the messages, in publish order."""
        return list(range(self.first, self.first + self.count))


def published(addr: str | None, reply: RemotingCommand) -> Published:
    """Return what a PUBLISH's reply says.

    Raises:
        QueueError: as `checked`; or an offset or count that is not an int >= 0.
    """
    fields = checked(addr, reply).ext_fields
    return Published(answered_int(addr, fields, OFFSET), answered_int(addr, fields, COUNT),
                     (fields or {}).get(DUPLICATE) == "true")


def offsets_of(addr: str | None, reply: RemotingCommand) -> TopicOffsets:
    """Return the `TopicOffsets` of an OFFSETS reply.

    Raises:
        QueueError: as `checked`.
    """
    raw = orjson.loads(checked(addr, reply).body or b"{}")
    return TopicOffsets(earliest=raw["earliest"], end=raw["end"], groups=dict(raw["groups"]),
                        readable=raw.get("readable", raw["end"]),  # an older service
                        incarnation=raw.get("incarnation"))


def statistics_of(addr: str | None, reply: RemotingCommand) -> QueueStatistics:
    """Return the `QueueStatistics` of a STATS reply.

    Raises:
        QueueError: as `checked`.
    """
    return statistics_from_json(checked(addr, reply).body or b"{}")


def stream_refusal(error: RemotingStreamError) -> RemotingError:
    """A subscription the service refused is a `QueueError`; a stream failure stays one."""
    if error.code is None or error.code == ResponseCode.GO_AWAY:
        return error
    return refusal_error(error.addr, error.code, error.remark)
