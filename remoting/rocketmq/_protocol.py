"""RocketMQ 4.9.8's client protocol: request codes, flags, names and the request headers.

Sans-I/O: functions here build `RemotingCommand` requests and read responses' ext fields;
they never touch a socket or a clock (a header that carries a time takes it as an argument).
Field names are Java's (``SendMessageRequestHeaderV2`` has one-letter names, as fastjson
parses them faster); the values are Java's text forms (``Long.toString``, ``"true"``).
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Final

from codec import RemotingCommand, RequestCode, ResponseCode, SerializeType
from codec._header_numbers import INT64_MAX, INT64_MIN, header_int

from ._errors import MalformedResponseError, MQBrokerError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._message import MessageQueue

__all__ = [
    "json_int",
    "CLIENT_VERSION",
    "DLQ_PREFIX",
    "MASTER_ID",
    "PULL_COMMIT_OFFSET",
    "PULL_LITE",
    "PULL_SUSPEND",
    "PULL_SUBSCRIPTION",
    "RETRY_PREFIX",
    "Code",
    "PullStatus",
    "consumer_list_request",
    "int_field",
    "lock_request",
    "request",
    "retry_topic",
    "send_back_request",
]


class Code(IntEnum):
    """The request codes this client sends or answers (RocketMQ's ``RequestCode``)."""

    SEND_MESSAGE = RequestCode.SEND_MESSAGE
    PULL_MESSAGE = RequestCode.PULL_MESSAGE
    QUERY_CONSUMER_OFFSET = RequestCode.QUERY_CONSUMER_OFFSET
    UPDATE_CONSUMER_OFFSET = RequestCode.UPDATE_CONSUMER_OFFSET
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = RequestCode.GET_MAX_OFFSET
    GET_MIN_OFFSET = RequestCode.GET_MIN_OFFSET
    HEART_BEAT = RequestCode.HEART_BEAT
    UNREGISTER_CLIENT = RequestCode.UNREGISTER_CLIENT
    CONSUMER_SEND_MSG_BACK = RequestCode.CONSUMER_SEND_MSG_BACK
    GET_CONSUMER_LIST_BY_GROUP = RequestCode.GET_CONSUMER_LIST_BY_GROUP
    NOTIFY_CONSUMER_IDS_CHANGED = RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ROUTEINFO_BY_TOPIC = RequestCode.GET_ROUTEINFO_BY_TOPIC
    GET_CONSUMER_RUNNING_INFO = RequestCode.GET_CONSUMER_RUNNING_INFO
    SEND_MESSAGE_V2 = RequestCode.SEND_MESSAGE_V2
    SEND_BATCH_MESSAGE = RequestCode.SEND_BATCH_MESSAGE
    RESET_CONSUMER_CLIENT_OFFSET = 220


# MQVersion.Version.V4_9_8.ordinal(): the broker reads some fields only from clients at least
# this new (ConsumerSendMsgBackRequestHeader.maxReconsumeTimes needs >= V3_4_9, 121)
CLIENT_VERSION: Final = 409
MASTER_ID: Final = 0  # MixAll.MASTER_ID: the broker id of a master in a route
RETRY_PREFIX: Final = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX
DLQ_PREFIX: Final = "%DLQ%"  # MixAll.DLQ_GROUP_TOPIC_PREFIX
AUTO_CREATE_TOPIC: Final = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
DEFAULT_TOPIC_QUEUES: Final = 4  # DefaultMQProducer.defaultTopicQueueNums

# Requests go out with RocketMQ's binary header (RocketMQSerializable), which 4.x brokers read
# and answer in: a message's properties hold \x01 and \x02, which JSON must escape (the
# escaping was 12% of a send's client CPU in py-spy; async sends 80-93 -> 60-81 us each)
SERIALIZE_TYPE: Final = SerializeType.ROCKETMQ

# PullSysFlag's bits
PULL_COMMIT_OFFSET: Final = 0x1
PULL_SUSPEND: Final = 0x1 << 1
PULL_SUBSCRIPTION: Final = 0x1 << 2
PULL_LITE: Final = 0x1 << 4

# PermName
PERM_WRITE: Final = 0x1 << 1
PERM_READ: Final = 0x1 << 2


def retry_topic(group: str) -> str:
    """Return the retry topic of a consumer group (MixAll.getRetryTopic)."""
    return RETRY_PREFIX + group


def request(code: int, fields: Mapping[str, object] | None = None,
            body: bytes | None = None) -> RemotingCommand:
    """Return a request of ``code`` with ``fields`` as Java writes them (None left out)."""
    cmd = RemotingCommand.create_request(code, body=body)
    if fields:
        cmd.ext_fields = {k: _text(v) for k, v in fields.items() if v is not None}
    cmd.version = CLIENT_VERSION
    cmd.serialize_type = SERIALIZE_TYPE
    return cmd


def _text(value: object) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def int_field(response: RemotingCommand, name: str) -> int:
    """Return the int ext field ``name`` of ``response``.

    Raises:
        MalformedResponseError: the field is missing or not an integer.
    """
    fields = response.ext_fields or {}
    value = fields.get(name)
    try:
        return json_int(name, value)
    except ValueError:
        raise MalformedResponseError(
            f"the broker's response (code {response.code}) has no integer {name!r}") from None


def json_int(name: str, value: object, low: int = INT64_MIN, high: int = INT64_MAX) -> int:
    """Return the integer a broker or name server sent as ``value``: a JSON integer (not a
    bool, a float or 1e999) or a header's text (`codec._header_numbers.header_int`: ASCII
    digits, no ``٣`` or ``1_0``), from ``low`` to ``high``.

    Raises:
        ValueError: anything else; the message names ``name``, not the peer's text.
    """
    if isinstance(value, str):
        return header_int(name, value, low, high)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} is not an integer")
    if not low <= value <= high:
        raise ValueError(f"{name} must be from {low} to {high}, got {value}")
    return value


def checked(response: RemotingCommand, addr: str, *ok: int) -> RemotingCommand:
    """Return ``response`` if its code is SUCCESS or one of ``ok``.

    Raises:
        MQBrokerError: any other code (its code and remark).
    """
    if response.code == ResponseCode.SUCCESS or response.code in ok:
        return response
    raise MQBrokerError(response.code, response.remark, addr)


class PullStatus(IntEnum):
    """What a PULL_MESSAGE answered (PullStatus)."""

    FOUND = ResponseCode.SUCCESS
    NO_NEW_MSG = ResponseCode.PULL_NOT_FOUND
    NO_MATCHED_MSG = ResponseCode.PULL_RETRY_IMMEDIATELY
    OFFSET_ILLEGAL = ResponseCode.PULL_OFFSET_MOVED


def queue_json(queue: MessageQueue) -> dict[str, object]:
    """Return ``queue`` as Java's MessageQueue serializes in a request body."""
    return {"topic": queue.topic, "brokerName": queue.broker_name, "queueId": queue.queue_id}


def consumer_list_request(group: str) -> RemotingCommand:
    """Return a GET_CONSUMER_LIST_BY_GROUP request."""
    return request(Code.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})


def lock_request(code: int, group: str, client_id: str, queues: list[MessageQueue]
                 ) -> RemotingCommand:
    """Return a LOCK_BATCH_MQ or UNLOCK_BATCH_MQ request (LockBatchRequestBody)."""
    import orjson

    body = orjson.dumps({"consumerGroup": group, "clientId": client_id,
                         "mqSet": [queue_json(q) for q in queues]})
    return request(code, None, body)


def send_back_request(*, group: str, commit_log_offset: int, delay_level: int,
                      origin_msg_id: str, origin_topic: str, max_reconsume_times: int
                      ) -> RemotingCommand:
    """Return a CONSUMER_SEND_MSG_BACK request (ConsumerSendMsgBackRequestHeader)."""
    return request(Code.CONSUMER_SEND_MSG_BACK, {
        "offset": commit_log_offset, "group": group, "delayLevel": delay_level,
        "originMsgId": origin_msg_id, "originTopic": origin_topic, "unitMode": False,
        "maxReconsumeTimes": max_reconsume_times})
