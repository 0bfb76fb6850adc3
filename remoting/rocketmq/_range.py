"""Reading explicit offsets of queues, as a reader that keeps its offsets itself does (a Spark
task, a tool): pull ``[start, end)`` of a queue without a group offset committed and without
rebalancing (Java's ``DefaultMQPullConsumer.pull(mq, expression, offset, maxNums)``), and the
queues' bounds and commits in one round trip per broker. Sans-I/O flows (`_flows`).

Theory of operation of `read_range`. The range is cut into windows of ``window`` offsets;
each window is one PULL_MESSAGE for its offsets (``maxMsgNums`` its size, no suspend: the
broker answers at once), and every window of the range goes out together (`Calls`, at most
``in_flight`` at a time), since a queue's offsets are consecutive and a window's place is
known before the one before it is answered. An answer may end before its window does (the
broker caps a pull at ``maxTransferCountOnMessageInMemory``, 32 messages by default, and at
256 KiB): the rest of the window is pulled again, in the next round. With a tag
expression the broker skips messages of other tags and may answer messages past the window:
a window keeps only its own offsets (`RangeRead.windows`), so no message comes twice.

What an answer's status means for the window ``[a, b)`` (PullMessageProcessor and
DefaultMessageStore.getMessage, 4.9.8):

- FOUND: messages from ``a``; ``nextBeginOffset`` says where the rest starts.
- NO_MATCHED_MSG: none of the tag from ``a`` to ``nextBeginOffset`` (go on from there);
  also a message being removed (``nextBeginOffset`` = ``a``): asked again, a few times.
- OFFSET_ILLEGAL (PULL_OFFSET_MOVED): ``a`` is below the queue's first offset (its files were
  deleted) or past its end (the queue was made afresh): the offsets up to the corrected
  ``nextBeginOffset`` are lost.
- NO_NEW_MSG: ``a`` is the queue's end (the planned range went past what the queue holds
  now: the tail is lost), or the file holding ``a`` is gone (lost up to
  ``nextBeginOffset``).

Lost offsets are reported (`RangeRead.lost`), never raised here: the caller decides (Spark's
``failOnDataLoss``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from codec import RemotingCommand, ResponseCode

from .._errors import RemotingError
from ._errors import MalformedResponseError, MQBrokerError
from ._flows import Calls, Flow
from ._instance import API_TIMEOUT
from ._protocol import Code, PullStatus, checked, int_field, request
from ._pull import pull_request

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._message import MessageQueue
    from ._subscription import Subscription

__all__ = ["DEFAULT_IN_FLIGHT", "DEFAULT_WINDOW", "RangeRead", "commit_offsets",
           "queue_bounds", "read_range", "windows_of"]

DEFAULT_WINDOW: Final = 32  # MessageStoreConfig.maxTransferCountOnMessageInMemory
DEFAULT_IN_FLIGHT: Final = 16  # pulls of one read in flight at once
MAX_REPEATS: Final = 5  # a window answered "being removed" is asked again this often
PULL_TIMEOUT: Final = 10.0  # seconds per pull (an answer without suspend comes at once)


@dataclass(slots=True)
class RangeRead:
    """What `read_range` got, in offset order.

    Attributes:
        bodies: the FOUND answers' bodies (stored messages back to back,
            `decode_messages`' layout).
        windows: for each body, the offsets ``[a, b)`` of it to keep (an answer filtered by
            tag may hold messages past its window, which the next window holds).
        lost: ``[first, end)`` ranges the broker no longer holds.
        min_offset, max_offset: the queue's bounds in the last answer (-1: no answer).
        pulls: the pulls made.
        capped: the fewest messages an answer capped below its window held (None: none
            was capped): a window size the broker serves whole.
    """

    bodies: list[bytes] = field(default_factory=list)
    windows: list[tuple[int, int]] = field(default_factory=list)
    lost: list[tuple[int, int]] = field(default_factory=list)
    min_offset: int = -1
    max_offset: int = -1
    pulls: int = 0
    capped: int | None = None


def windows_of(start: int, end: int, window: int) -> list[tuple[int, int]]:
    """Return ``[start, end)`` cut into consecutive windows of ``window`` offsets."""
    return [(a, min(a + window, end)) for a in range(start, end, window)]


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def read_range(addr: str, group: str, queue: MessageQueue, start: int, end: int,
               subscription: Subscription, *, window: int = DEFAULT_WINDOW,
               in_flight: int = DEFAULT_IN_FLIGHT, timeout: float = PULL_TIMEOUT
               ) -> Flow[RangeRead]:
    """Pull offsets ``[start, end)`` of ``queue`` from its broker at ``addr`` (see the module
    docstring); ``group`` names the reader to the broker, and nothing is committed to it.

    Raises:
        MQBrokerError: the broker refused a pull (no such topic or group, no permission,
            busy); MalformedResponseError: an answer lacks its offsets or names no progress;
        RemotingError: a pull got no answer (the first such error).
    """
    if window < 1 or in_flight < 1:
        raise ValueError(f"window and in_flight are >= 1, got {window} and {in_flight}")
    result = RangeRead()
    pieces: list[tuple[int, int, bytes]] = []
    lost: list[tuple[int, int]] = []
    pending = windows_of(start, end, window)
    repeats = 0
    while pending:
        requests = [pull_request(group, queue, a, subscription, max_messages=b - a,
                                 suspend=None) for a, b in pending]
        answers = yield Calls(addr, requests, timeout, in_flight)
        result.pulls += len(requests)
        again: list[tuple[int, int]] = []
        for (a, b), answer in zip(pending, answers, strict=True):
            if isinstance(answer, RemotingError):
                raise answer
            if not isinstance(answer, RemotingCommand):  # an unexpected error object
                raise RemotingError(f"a pull of {queue} ended without an answer: {answer!r}",
                                    addr)
            status, next_offset = _status(answer, addr)
            result.min_offset = int_field(answer, "minOffset")
            result.max_offset = int_field(answer, "maxOffset")
            if status == PullStatus.FOUND:
                if answer.body:
                    pieces.append((a, b, answer.body))
                if next_offset <= a:
                    raise MalformedResponseError(
                        f"a pull of {queue} from {a} found messages and names no progress "
                        f"(nextBeginOffset {next_offset})", addr)
                if next_offset < b:
                    capped = next_offset - a
                    result.capped = capped if result.capped is None else min(result.capped,
                                                                             capped)
                    again.append((next_offset, b))
            elif status == PullStatus.NO_MATCHED_MSG:
                if next_offset > a:
                    if next_offset < b:
                        again.append((next_offset, b))
                else:  # a message being removed: ask again
                    repeats += 1
                    if repeats > MAX_REPEATS:
                        raise MQBrokerError(ResponseCode.PULL_RETRY_IMMEDIATELY,
                                            f"offset {a} of {queue} stays unreadable", addr)
                    again.append((a, b))
            elif next_offset > a:  # OFFSET_ILLEGAL or NO_NEW_MSG: up to the corrected offset
                lost.append((a, min(next_offset, b)))
                if next_offset < b:
                    again.append((next_offset, b))
            else:  # at or past the queue's end: the rest of the window is not there
                lost.append((a, b))
        pending = again
    pieces.sort(key=lambda piece: piece[0])
    result.bodies = [body for _, _, body in pieces]
    result.windows = [(a, b) for a, b, _ in pieces]
    result.lost = _merge(lost)
    return result


def _status(answer: RemotingCommand, addr: str) -> tuple[PullStatus, int]:
    try:
        status = PullStatus(answer.code)
    except ValueError:
        raise MQBrokerError(answer.code, answer.remark, addr) from None
    return status, int_field(answer, "nextBeginOffset")


def queue_bounds(addr: str, queues: Sequence[MessageQueue], *, earliest: bool = False,
                 timeout: float = API_TIMEOUT) -> Flow[list[int | Exception]]:
    """Return each queue's end (GET_MAX_OFFSET), or with ``earliest`` its first offset
    (GET_MIN_OFFSET), of queues of the broker at ``addr``: one round trip. An entry is the
    error of its queue (`MQBrokerError`, `MalformedResponseError`, `RemotingError`)."""
    code = Code.GET_MIN_OFFSET if earliest else Code.GET_MAX_OFFSET
    answers = yield Calls(addr, [request(code, {"topic": q.topic, "queueId": q.queue_id})
                                 for q in queues], timeout)
    out: list[int | Exception] = []
    for answer in answers:
        if not isinstance(answer, RemotingCommand):
            out.append(answer)
            continue
        try:
            out.append(int_field(checked(answer, addr), "offset"))
        except (MQBrokerError, MalformedResponseError) as exc:
            out.append(exc)
    return out


def commit_offsets(addr: str, group: str, offsets: Sequence[tuple[MessageQueue, int]], *,
                   timeout: float = API_TIMEOUT) -> Flow[list[Exception | None]]:
    """Commit ``group``'s offsets of queues of the broker at ``addr``
    (UPDATE_CONSUMER_OFFSET), in one round trip; return each one's error or None."""
    answers = yield Calls(addr, [request(Code.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": q.topic, "queueId": q.queue_id,
        "commitOffset": offset}) for q, offset in offsets], timeout)
    out: list[Exception | None] = []
    for answer in answers:
        if not isinstance(answer, RemotingCommand):
            out.append(answer)
            continue
        try:
            checked(answer, addr)
            out.append(None)
        except MQBrokerError as exc:
            out.append(exc)
    return out
