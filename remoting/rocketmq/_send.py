"""Sending: a message made ready for the wire, and the send flow with its retries
(Java's ``DefaultMQProducerImpl.sendDefaultImpl`` / ``sendKernelImpl``).

`prepare` checks a message and builds what every attempt shares: its properties (the user's,
``TAGS``, ``KEYS``, ``WAIT``, and a new ``UNIQ_KEY``), its body (zlib-compressed at or over
``compress_over`` bytes, with the sysFlag saying so) or, for a batch, the batch body. `send`
is the flow: pick a queue (round-robin avoiding slow brokers, or by sharding key), send
SEND_MESSAGE_V2 (SEND_BATCH_MESSAGE for a batch), and on a transport failure or a retryable
refusal record the fault, mark the route stale and try another broker, within the one
deadline, up to ``1 + retries`` attempts.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from codec import RemotingCommand, ResponseCode

from .._errors import RemotingError
from .._log import log
from ._errors import MalformedResponseError, MQBrokerError, SendFailedError
from ._flows import Call, Flow, publish_queues
from ._ids import new_message_id
from ._message import (
    KEY_SEPARATOR,
    KEYS,
    TAGS,
    UNIQ_KEY,
    WAIT,
    SendResult,
    SendStatus,
    property_map,
)
from ._message_codec import COMPRESSED, ZLIB_TYPE, compress, encode_batch, properties_string
from ._protocol import (
    AUTO_CREATE_TOPIC,
    CLIENT_VERSION,
    DEFAULT_TOPIC_QUEUES,
    RETRY_PREFIX,
    SERIALIZE_TYPE,
    Code,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ._instance import ClientState

__all__ = ["Outgoing", "Prepared", "SendOptions", "prepare", "prepare_batch", "send"]

# DefaultMQProducer.retryResponseCodes: refusals worth another broker
RETRY_CODES: Final = frozenset({ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE,
                                ResponseCode.SYSTEM_ERROR, ResponseCode.NO_PERMISSION,
                                ResponseCode.SYSTEM_BUSY,
                                204, 205})  # NO_BUYER_ID, NOT_IN_CURRENT_UNIT
_STATUS: Final = {ResponseCode.SUCCESS: SendStatus.SEND_OK,
                  ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
                  ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
                  ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE}
_TOPIC: Final = re.compile(r"^[%|a-zA-Z0-9_-]+$")  # Validators.PATTERN
MAX_TOPIC_LENGTH: Final = 127  # a stored message's topic length is a Java byte


@dataclass(frozen=True, slots=True, kw_only=True)
class SendOptions:
    """A producer's settings that every send uses."""

    group: str
    timeout: float = 3.0  # DefaultMQProducer.sendMsgTimeout
    retries: int = 2  # retryTimesWhenSendFailed
    compress_over: int = 4096  # compressMsgBodyOverHowmuch
    compress_level: int = 5
    max_message_bytes: int = 4 * 1024 * 1024  # maxMessageSize


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message of a batch, with its own tags, keys or properties."""

    body: bytes
    tags: str | None = None
    keys: str | list[str] | None = None
    properties: Mapping[str, str] | None = None


@dataclass(slots=True)
class Prepared:
    """A message (or batch) ready to send: what every attempt of it shares."""

    topic: str
    body: bytes
    properties: str
    sys_flag: int
    ids: tuple[str, ...]
    batch: bool = False
    sharding_key: str | None = None
    extra: dict[str, str] = field(default_factory=dict)  # a retry topic's send: reconsume times


def check_topic(topic: object) -> str:
    """Return ``topic`` if RocketMQ accepts it as a topic name (``Validators.checkTopic``).

    Raises:
        TypeError: not a str.
        ValueError: empty, over 127 characters, characters other than letters, digits,
            ``%|_-``, or the auto-create topic's name.
    """
    if not isinstance(topic, str):
        raise TypeError(f"a topic is a str, got {topic!r}")
    if not topic or len(topic) > MAX_TOPIC_LENGTH or not _TOPIC.match(topic):
        raise ValueError(f"topic {topic!r} is not 1-127 of letters, digits, '%', '|', '_', '-'")
    if topic == AUTO_CREATE_TOPIC:
        raise ValueError(f"{AUTO_CREATE_TOPIC} is the broker's own topic: send to another")
    return topic


def _keys_text(keys: str | list[str] | tuple[str, ...] | None) -> str | None:
    if keys is None:
        return None
    if isinstance(keys, str):
        return keys or None
    if isinstance(keys, (list, tuple)) and all(isinstance(k, str) for k in keys):
        return KEY_SEPARATOR.join(k for k in keys if k) or None
    raise TypeError(f"keys is a str or a list of str, got {keys!r}")


def _check_body(body: object, limit: int) -> bytes:
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise TypeError(f"a message body is bytes, got {type(body).__name__}")
    data = bytes(body)
    if not data:
        raise ValueError("a message body must not be empty (RocketMQ refuses it)")
    if len(data) > limit:
        raise ValueError(f"a message body of {len(data)} bytes is over max_message_bytes "
                         f"({limit})")
    return data


def _properties(tags: str | None, keys: str | list[str] | None,
                properties: Mapping[str, str] | None, msg_id: str) -> dict[str, str]:
    props = property_map(properties)
    if tags is not None:
        if not isinstance(tags, str):
            raise TypeError(f"tags is a str, got {tags!r}")
        if tags:
            props[TAGS] = tags
    text = _keys_text(keys)
    if text is not None:
        props[KEYS] = text
    props[WAIT] = "true"
    props[UNIQ_KEY] = msg_id
    return props


def prepare(options: SendOptions, topic: str, body: object, *, tags: str | None = None,
            keys: str | list[str] | None = None, properties: Mapping[str, str] | None = None,
            sharding_key: str | None = None) -> Prepared:
    """Return one message ready to send.

    Raises:
        TypeError, ValueError: a bad topic, body, tags, keys or properties (nothing sent).
    """
    check_topic(topic)
    data = _check_body(body, options.max_message_bytes)
    if sharding_key is not None and not isinstance(sharding_key, str):
        raise TypeError(f"sharding_key is a str, got {sharding_key!r}")
    msg_id = new_message_id()
    props = _properties(tags, keys, properties, msg_id)
    sys_flag = 0
    if len(data) >= options.compress_over:
        data = compress(data, options.compress_level)
        sys_flag = COMPRESSED | ZLIB_TYPE
    return Prepared(topic, data, properties_string(props), sys_flag, (msg_id,),
                    sharding_key=sharding_key)


def prepare_batch(options: SendOptions, topic: str, bodies: Iterable[bytes | Outgoing], *,
                  tags: str | None = None, keys: str | list[str] | None = None,
                  properties: Mapping[str, str] | None = None) -> Prepared:
    """Return a batch ready to send in one SEND_BATCH_MESSAGE frame (bodies are not
    compressed: Java's producer does not compress batches).

    Raises:
        TypeError, ValueError: a bad item, or no item, or a batch over ``max_message_bytes``.
    """
    check_topic(topic)
    if topic.startswith(RETRY_PREFIX):
        raise ValueError("a retry topic cannot be sent to in a batch")
    items: list[tuple[bytes, str, int]] = []
    ids: list[str] = []
    for item in bodies:
        msg_id = new_message_id()
        if isinstance(item, Outgoing):
            data = _check_body(item.body, options.max_message_bytes)
            props = _properties(item.tags if item.tags is not None else tags,
                                item.keys if item.keys is not None else keys,
                                {**(properties or {}), **(item.properties or {})}, msg_id)
        else:
            data = _check_body(item, options.max_message_bytes)
            props = _properties(tags, keys, properties, msg_id)
        items.append((data, properties_string(props), 0))
        ids.append(msg_id)
    if not items:
        raise ValueError("send_batch needs at least one message")
    body = encode_batch(items)
    if len(body) > options.max_message_bytes:
        raise ValueError(f"the batch is {len(body)} bytes, over max_message_bytes "
                         f"({options.max_message_bytes}): split it")
    return Prepared(topic, body, f"{WAIT}\x01true", 0, tuple(ids), batch=True)


def send_request(options: SendOptions, message: Prepared, broker_name: str, queue_id: int,
                 born_ms: int) -> RemotingCommand:
    """Return the SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) request of one attempt."""
    fields: dict[str, str | None] = {"a": options.group, "b": message.topic, "c": AUTO_CREATE_TOPIC,
              "d": _DEFAULT_QUEUES, "e": str(queue_id), "f": str(message.sys_flag),
              "g": str(born_ms), "h": "0", "i": message.properties, "j": "0", "k": "false",
              "m": "true" if message.batch else "false", "n": broker_name}
    if message.extra:
        fields.update(message.extra)
    cmd = RemotingCommand.create_request(
        Code.SEND_BATCH_MESSAGE if message.batch else Code.SEND_MESSAGE_V2, body=message.body)
    cmd.ext_fields = fields
    cmd.version = CLIENT_VERSION
    cmd.serialize_type = SERIALIZE_TYPE
    return cmd


_DEFAULT_QUEUES: Final = str(DEFAULT_TOPIC_QUEUES)


def send_result(response: RemotingCommand, message: Prepared, broker_name: str, addr: str
                ) -> SendResult:
    """Return the result of a send's answer.

    Raises:
        MQBrokerError: the broker refused it.
        MalformedResponseError: the answer lacks its fields.
    """
    status = _STATUS.get(response.code)  # type: ignore[call-overload]
    if status is None:
        raise MQBrokerError(response.code, response.remark, addr)
    fields = response.ext_fields or {}
    try:
        queue_id = int(fields["queueId"])  # type: ignore[arg-type]
        queue_offset = int(fields["queueOffset"])  # type: ignore[arg-type]
        offset_id = fields.get("msgId") or ""
    except (KeyError, TypeError, ValueError):
        raise MalformedResponseError(
            f"a send's answer has no queueId / queueOffset (got {sorted(fields)[:8]})",
            addr) from None
    return SendResult(status=status, msg_id=",".join(message.ids), offset_msg_id=offset_id,
                      broker_name=broker_name, queue_id=queue_id, queue_offset=queue_offset,
                      topic=message.topic, msg_ids=message.ids)


def _attempt_failed(last: bool, **fields: object) -> None:
    if last:
        log.warning("rocketmq.send_failed", **fields)
    else:
        log.warning("rocketmq.send_retried", **fields)


def send(state: ClientState, options: SendOptions, message: Prepared, *,
         oneway: bool = False, timeout: float | None = None) -> Flow[SendResult | None]:
    """Send ``message``; return its result (None for oneway).

    Raises:
        SendFailedError: every attempt failed (or the deadline passed between them).
        MQBrokerError: the broker refused it with a code not worth another broker
            (``MESSAGE_ILLEGAL``...).
        TopicRouteError: no route for the topic.
    """
    start = time.monotonic()
    deadline = start + (options.timeout if timeout is None else timeout)
    topic = message.topic
    attempts = 1 if oneway else 1 + options.retries
    errors: list[tuple[str, BaseException]] = []
    last_broker: str | None = None
    faults = state.faults
    for _attempt in range(attempts):
        publish = state.publish.get(topic)
        if publish is None or not publish.queues or topic in state.stale:
            publish = yield from publish_queues(state, topic)
        now = time.monotonic()
        if message.sharding_key is not None:
            queue = publish.by_key(message.sharding_key)
        else:
            queue = publish.select(faults, last_broker, now)
        broker = queue.broker_name
        addr = state.master(broker)
        if addr is None:
            errors.append((broker, MQBrokerError(ResponseCode.SYSTEM_ERROR,
                                                 f"no master address for {broker}")))
            state.stale.add(topic)
            last_broker = broker
            continue
        remaining = deadline - now
        if remaining <= 0:
            break
        request = send_request(options, message, broker, queue.queue_id,
                               time.time_ns() // 1_000_000)
        try:
            response = yield Call(addr, request, remaining, oneway)
        except RemotingError as exc:
            faults.record(broker, time.monotonic() - now, True, time.monotonic())
            errors.append((broker, exc))
            state.stale.add(topic)
            last_broker = broker
            _attempt_failed(_attempt + 1 == attempts, topic=topic, broker=broker,
                            error=type(exc).__name__)
            continue
        done = time.monotonic()
        if oneway:
            return None
        try:
            result = send_result(response, message, broker, addr)
        except MQBrokerError as exc:
            faults.record(broker, done - now, True, done)
            errors.append((broker, exc))
            if exc.code not in RETRY_CODES:
                raise
            state.stale.add(topic)
            last_broker = broker
            _attempt_failed(_attempt + 1 == attempts, topic=topic, broker=broker, code=exc.code)
            continue
        faults.record(broker, done - now, False, done)
        return result
    tried = ", ".join(b for b, _ in errors) or "none"
    timed_out = time.monotonic() >= deadline
    raise SendFailedError(
        f"send to topic {topic!r} failed after {len(errors)} attempt(s) (brokers: {tried})"
        + (" and its timeout passed" if timed_out else ""), tuple(errors)
    ) from (errors[-1][1] if errors else None)
