"""Pulling a queue: the PULL_MESSAGE request and what its answer means (Java's
``PullAPIWrapper`` and ``MQClientAPIImpl.processPullResponse``), sans-I/O.

A pull asks for up to ``max_messages`` from ``offset``. With the suspend flag the broker holds
it while the queue has nothing new, up to ``suspend`` seconds, and answers as soon as a
message arrives (long polling); the client's call waits ``suspend`` plus a margin. The
subscription travels in the pull (the subscription flag), so the broker filters by tag
without waiting for a heartbeat; the client checks each message's tag again. With the
commit-offset flag the broker also stores the group's offset (the push consumer's way of
committing between its 5 s commits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from codec import RemotingCommand

from ._errors import MalformedResponseError, MQBrokerError
from ._message import MAX_OFFSET, MIN_OFFSET, RETRY_TOPIC, Message
from ._message_codec import decode_messages
from ._protocol import (
    CLIENT_VERSION,
    PULL_COMMIT_OFFSET,
    PULL_LITE,
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
    SERIALIZE_TYPE,
    Code,
    PullStatus,
    json_int,
)

if TYPE_CHECKING:
    from ._message import MessageQueue
    from ._subscription import Subscription

__all__ = ["PullResult", "pull_request", "pull_result"]

SUSPEND: Final = 15.0  # DefaultMQPushConsumerImpl.BROKER_SUSPEND_MAX_TIME_MILLIS
CALL_MARGIN: Final = 15.0  # CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND (30 s) - the suspend
PULL_BATCH: Final = 32  # DefaultMQPushConsumer.pullBatchSize


@dataclass(slots=True)
class PullResult:
    """A pull's answer: its status, where to pull next, the queue's bounds, the messages
    (tag-checked, with retry-topic messages shown under their original topic)."""

    status: PullStatus
    next_offset: int
    min_offset: int
    max_offset: int
    messages: list[Message]
    suggest_broker: int = 0
    filtered: int = 0  # messages the client's tag check dropped
    error: MalformedResponseError | None = None  # what stopped decoding the rest


def pull_request(group: str, queue: MessageQueue, offset: int, subscription: Subscription, *,
                 max_messages: int = PULL_BATCH, suspend: float | None = SUSPEND,
                 commit_offset: int | None = None, lite: bool = False) -> RemotingCommand:
    """Return a PULL_MESSAGE request for ``queue`` from ``offset``.

    ``suspend`` None asks for an answer at once; ``commit_offset`` (> 0) has the broker store
    the group's offset too.
    """
    flags = PULL_SUBSCRIPTION
    if suspend is not None:
        flags |= PULL_SUSPEND
    if commit_offset is not None and commit_offset > 0:
        flags |= PULL_COMMIT_OFFSET
    if lite:
        flags |= PULL_LITE
    cmd = RemotingCommand.create_request(Code.PULL_MESSAGE)
    cmd.ext_fields = {
        "consumerGroup": group, "topic": queue.topic, "queueId": str(queue.queue_id),
        "queueOffset": str(offset), "maxMsgNums": str(max_messages), "sysFlag": str(flags),
        "commitOffset": str(commit_offset if commit_offset and commit_offset > 0 else 0),
        "suspendTimeoutMillis": str(int((suspend or 0) * 1000)),
        "subscription": subscription.expression, "subVersion": str(subscription.version),
        "expressionType": "TAG"}
    cmd.version = CLIENT_VERSION
    cmd.serialize_type = SERIALIZE_TYPE
    return cmd


_STATUS: Final[dict[int, PullStatus]] = {int(s.value): s for s in PullStatus}


def pull_result(response: RemotingCommand, queue: MessageQueue, subscription: Subscription,
                addr: str) -> PullResult:
    """Return what a PULL_MESSAGE answer says.

    Raises:
        MQBrokerError: a code other than the four of a pull (FLOW_CONTROL,
            SUBSCRIPTION_NOT_EXIST...).
        MalformedResponseError: the answer lacks its offsets.
    """
    status = _STATUS.get(response.code)
    if status is None:
        raise MQBrokerError(response.code, response.remark, addr)
    fields = response.ext_fields or {}
    try:
        next_offset = json_int("nextBeginOffset", fields["nextBeginOffset"])
        min_offset = json_int("minOffset", fields["minOffset"])
        max_offset = json_int("maxOffset", fields["maxOffset"])
        suggest = json_int("suggestWhichBrokerId", fields.get("suggestWhichBrokerId") or "0",
                           0, 2**31 - 1)
    except (KeyError, TypeError, ValueError):
        raise MalformedResponseError(
            f"a pull's answer (code {response.code}) lacks its offsets", addr) from None
    result = PullResult(status, next_offset, min_offset, max_offset, [], suggest)
    if status != PullStatus.FOUND or not response.body:
        return result
    messages, error = decode_messages(response.body, queue.broker_name)
    result.error = error
    keep: list[Message] = []
    tags = subscription.tags
    min_text, max_text = str(min_offset), str(max_offset)
    for message in messages:
        props = message.properties
        if tags and props.get("TAGS") not in tags:
            result.filtered += 1
            continue
        retry = props.get(RETRY_TOPIC)
        if retry is not None and message.topic != retry:
            message.topic = retry  # resetRetryAndNamespace: the original topic
        props[MIN_OFFSET] = min_text  # as PullAPIWrapper.processPullResult
        props[MAX_OFFSET] = max_text
        keep.append(message)
    result.messages = keep
    return result

