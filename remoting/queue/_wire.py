"""The queue service's requests on the wire: their ext fields, read and checked in one place.

Each request is an ordinary `RemotingCommand` with a `QueueCode`; its parameters are ext
fields (names below), messages travel in the body (`_sansio/_records.py`). `name_of`,
`optional_int`, `required_int` and `key_of` turn a request's fields into checked values or
raise a `Refusal` (a response code and a remark that says what to do), which the service
answers with; the client builds the same fields.
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import TYPE_CHECKING, Final

from codec import RemotingCommand, ResponseCode
from codec._header_numbers import header_int

from ._errors import QueueError
from ._sansio._records import MAX_KEY_BYTES

if TYPE_CHECKING:
    from codec import ExtFields

__all__ = [
    "QueueCode",
    "AFTER",
    "ATTEMPTS",
    "CHANNEL",
    "COUNT",
    "DEFER_MS",
    "DUPLICATE",
    "END",
    "GROUP",
    "INCARNATION",
    "KEY",
    "LIMIT",
    "MAX",
    "MAX_PUBLISH",
    "MAX_PULL",
    "MAX_WAIT_MS",
    "OFFSET",
    "REFUSED",
    "TOPIC",
    "Refusal",
    "answered_int",
    "format_attempts",
    "is_name",
    "key_of",
    "name_of",
    "optional_int",
    "parse_attempts",
    "refusal_response",
    "required_int",
]

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


# ext field names
TOPIC: Final = "topic"
CHANNEL: Final = "channel"
GROUP: Final = "group"
OFFSET: Final = "offset"  # PUBLISH's answer: the first offset; PULL / COMMIT: where
COUNT: Final = "count"  # PUBLISH's answer: how many were appended
DUPLICATE: Final = "duplicate"  # PUBLISH's answer: "true" when the key was seen already
KEY: Final = "key"  # PUBLISH: the idempotence key
DEFER_MS: Final = "deferMs"  # PUBLISH: deliver not before this many ms from now
MAX: Final = "max"  # PULL: messages at most
MAX_WAIT_MS: Final = "maxWaitMs"  # PULL: how long to hold it while there are none
END: Final = "end"  # CREATE_TOPIC's answer: the topic's end offset
ATTEMPTS: Final = "attempts"  # a delivery: "offset:attempt,..." for redeliveries only
REFUSED: Final = "refused"  # ACK's answer: how many acknowledgements were refused
INCARNATION: Final = "incarnation"  # PULL: the id of the log the offset is of (optional)
AFTER: Final = "after"  # STATS: a page of topics named after this one
LIMIT: Final = "limit"  # STATS: a page of this many topics at most

MAX_PULL: Final = 4096  # messages one pull may ask for
# Messages in one publish at most: it is appended in one step of the service's loop (about
# 1.5 us a message), so this bounds that step to tens of ms; a Spark Arrow batch (10,000
# rows by default) fits.
MAX_PUBLISH: Final = 16_384
MAX_WAIT_SECONDS: Final = 3600.0  # a pull held longer than an hour is a mistake
_NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,128}")  # NSQ's rule, longer names allowed


class Refusal(Exception):  # noqa: N818 - it is an answer, not an error of ours
    """A request the service refuses: answered with ``code`` and ``remark``."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def refusal_response(refusal: Refusal) -> RemotingCommand:
    """Return the response that answers with ``refusal``."""
    return RemotingCommand.create_response(refusal.code, refusal.remark)


def is_name(value: object) -> bool:
    """True if ``value`` is a topic, channel or group name: 1-128 of ``A-Z a-z 0-9 . _ -``,
    not only dots ("." and ".." name directories)."""
    return isinstance(value, str) and bool(_NAME.fullmatch(value)) and bool(value.strip("."))


def name_of(request: RemotingCommand, field: str) -> str:
    """Return the topic, channel or group name in ``field``.

    Raises:
        Refusal: missing, or not 1-128 of ``A-Z a-z 0-9 . _ -``.
    """
    value = (request.ext_fields or {}).get(field)
    if value is None:
        raise Refusal(ResponseCode.INVALID_PARAMETER, f"the {field} is missing")
    if not is_name(value):
        raise Refusal(ResponseCode.INVALID_PARAMETER,
                      f"a {field} name is 1-128 of A-Z a-z 0-9 . _ - and not only dots (got "
                      f"{len(value)} characters that are not)")
    return value


def optional_int(request: RemotingCommand, field: str, low: int, high: int) -> int | None:
    """Return the int in ``field`` (None if absent).

    Raises:
        Refusal: not an int from ``low`` to ``high``.
    """
    value = (request.ext_fields or {}).get(field)
    if value is None:
        return None
    try:
        return header_int(field, value, low, high)
    except ValueError as exc:
        raise Refusal(ResponseCode.INVALID_PARAMETER, str(exc)) from None


def required_int(request: RemotingCommand, field: str, low: int, high: int) -> int:
    """Return the int in ``field``.

    Raises:
        Refusal: missing, or not an int from ``low`` to ``high``.
    """
    number = optional_int(request, field, low, high)
    if number is None:
        raise Refusal(ResponseCode.INVALID_PARAMETER, f"{field} is missing")
    return number


def key_of(request: RemotingCommand) -> str | None:
    """Return a publish's idempotence key (None: none).

    Raises:
        Refusal: longer than `MAX_KEY_BYTES`.
    """
    key = (request.ext_fields or {}).get(KEY)
    if key is not None and len(key.encode()) > MAX_KEY_BYTES:
        raise Refusal(ResponseCode.INVALID_PARAMETER,
                      f"an idempotence key is at most {MAX_KEY_BYTES} bytes")
    return key


def format_attempts(attempts: list[tuple[int, int]]) -> str:
    """Return the ``attempts`` field for redeliveries: ``"offset:attempt,..."``."""
    return ",".join(f"{offset}:{attempt}" for offset, attempt in attempts)


def parse_attempts(text: str | None) -> dict[int, int]:
    """Return the redeliveries' attempts by offset (others are first attempts).

    Raises:
        ValueError: not ``"offset:attempt,..."`` of ints >= 0 (a broken service).
    """
    if not text:
        return {}
    pairs = (item.partition(":") for item in text.split(","))
    return {header_int(ATTEMPTS, offset, 0): header_int(ATTEMPTS, attempt, 0)
            for offset, _, attempt in pairs}


def answered_int(addr: str | None, fields: ExtFields | None, name: str) -> int:
    """Return the count or offset a service answered in ``name`` (0 if absent).

    Raises:
        QueueError: not an int from 0 to 2**63 - 1 (a broken service).
    """
    try:
        return header_int(name, (fields or {}).get(name) or "0", 0)
    except ValueError as exc:
        raise QueueError(addr, None, f"the service answered a bad {name}: {exc}") from None
