"""A topic's route, as a name server answers GET_ROUTEINFO_BY_TOPIC (Java's TopicRouteData).

The answer is fastjson's JSON, which strict parsers refuse: a broker's addresses are a map
keyed by its broker id, written bare (``"brokerAddrs":{0:"127.0.0.1:10911"}``). It is read
with the codec's lenient reader. Sans-I/O: parsing, and the queues a producer writes to
(``topicRouteData2TopicPublishInfo``: the writable queues of brokers with a master, by
broker name) and a consumer reads (``topicRouteData2TopicSubscribeInfo``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import orjson

from codec import CodecError
from codec._lenient_json import lenient_loads

from ._errors import MalformedResponseError
from ._message import MessageQueue
from ._protocol import MASTER_ID, PERM_READ, PERM_WRITE, json_int

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["MAX_QUEUES_PER_BROKER", "MAX_ROUTE_QUEUES", "QueueData", "TopicRoute",
           "loads_fastjson", "parse_route"]

# What a route may hold: a name server's answer is a few hundred bytes whatever it claims, so
# its counts are bounded before queues are made of them (a "writeQueueNums" of 1,000,000 in
# a 150-byte answer cost 100 MB and 1.6 s; of 5,000,000 a MemoryError). RocketMQ's default is
# 4 (producers) to 8 (the broker) queues a topic.
MAX_QUEUES_PER_BROKER: Final = 4096
MAX_ROUTE_QUEUES: Final = 65_536  # all the brokers' queues of one topic together
_INT32_MAX: Final = 2**31 - 1


def loads_fastjson(body: bytes | None, what: str) -> Any:
    """Return the JSON value of a body fastjson wrote (bare keys, numbers as keys).

    Raises:
        MalformedResponseError: it is not JSON even leniently read.
    """
    if not body:
        raise MalformedResponseError(f"{what}: an empty body")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:
        return lenient_loads(bytes(body))
    except CodecError as exc:
        raise MalformedResponseError(f"{what}: not JSON ({exc})") from None


@dataclass(frozen=True, slots=True)
class QueueData:
    """One broker's queues of a topic."""

    broker_name: str
    read_queues: int
    write_queues: int
    perm: int

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """A topic's brokers and queues."""

    queue_datas: tuple[QueueData, ...]
    brokers: Mapping[str, Mapping[int, str]] = field(default_factory=dict)  # name -> id -> addr
    order_topic_conf: str | None = None

    def master(self, broker_name: str) -> str | None:
        """Return the address of ``broker_name``'s master, or None."""
        addrs = self.brokers.get(broker_name)
        return addrs.get(MASTER_ID) if addrs else None

    def any_broker(self, broker_name: str) -> str | None:
        """Return the master's address, else any of the broker's
        (``findBrokerAddressInSubscribe``)."""
        addrs = self.brokers.get(broker_name)
        if not addrs:
            return None
        return addrs.get(MASTER_ID) or next(iter(addrs.values()))

    def publish_queues(self, topic: str) -> list[MessageQueue]:
        """Return the queues a producer sends ``topic`` to, in Java's order."""
        if self.order_topic_conf:  # "brokerName:queues;..." for ordered topics
            out: list[MessageQueue] = []
            for item in self.order_topic_conf.split(";"):
                name, _, count = item.partition(":")
                if name and count.isascii() and count.isdigit():
                    queues = min(int(count), MAX_QUEUES_PER_BROKER) if len(count) <= 5 \
                        else MAX_QUEUES_PER_BROKER  # capped as parse_route caps counts
                    out.extend(MessageQueue(topic, name, i) for i in range(queues))
                    if len(out) >= MAX_ROUTE_QUEUES:
                        break
            return out[:MAX_ROUTE_QUEUES]
        return [MessageQueue(topic, qd.broker_name, i)
                for qd in sorted(self.queue_datas, key=lambda q: _java_key(q.broker_name))
                if qd.writable and self.master(qd.broker_name) is not None
                for i in range(qd.write_queues)]

    def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """Return the queues a consumer reads ``topic`` from, sorted as Java sorts them."""
        queues = [MessageQueue(topic, qd.broker_name, i) for qd in self.queue_datas
                  if qd.readable for i in range(qd.read_queues)]
        return sorted(queues, key=queue_key)

    def limited(self, queues: int) -> TopicRoute:
        """Return this route with at most ``queues`` queues per broker (a new topic made
        from the auto-create topic's route: ``defaultTopicQueueNums``)."""
        return TopicRoute(tuple(QueueData(q.broker_name, min(queues, q.read_queues),
                                          min(queues, q.read_queues), q.perm)
                                for q in self.queue_datas), self.brokers, None)

    def broker_addresses(self) -> list[tuple[str, str]]:
        """Return every ``(broker_name, address)`` of the route."""
        return [(name, addr) for name, addrs in self.brokers.items() for addr in addrs.values()]


def _java_key(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def queue_key(queue: MessageQueue) -> tuple[bytes, bytes, int]:
    """Return a sort key ordering queues as Java's ``MessageQueue.compareTo`` (strings by
    UTF-16 code units)."""
    return _java_key(queue.topic), _java_key(queue.broker_name), queue.queue_id


def parse_route(body: bytes | None, topic: str) -> TopicRoute:
    """Return the route of a GET_ROUTEINFO_BY_TOPIC answer's body.

    Raises:
        MalformedResponseError: the body is not a route (not JSON, or fields of the wrong
            kind).
    """
    data = loads_fastjson(body, f"the route of {topic!r}")
    try:
        queue_datas = tuple(
            QueueData(str(q["brokerName"]),
                      json_int("readQueueNums", q.get("readQueueNums", 0), 0,
                               MAX_QUEUES_PER_BROKER),
                      json_int("writeQueueNums", q.get("writeQueueNums", 0), 0,
                               MAX_QUEUES_PER_BROKER),
                      json_int("perm", q.get("perm", 0), 0, _INT32_MAX))
            for q in data.get("queueDatas") or ())
        if sum(max(q.read_queues, q.write_queues) for q in queue_datas) > MAX_ROUTE_QUEUES:
            raise ValueError(f"more than {MAX_ROUTE_QUEUES} queues in all")
        brokers: dict[str, dict[int, str]] = {}
        for b in data.get("brokerDatas") or ():
            addrs = b.get("brokerAddrs") or {}
            brokers[str(b["brokerName"])] = {
                json_int("a broker id", k, 0, _INT32_MAX): str(v) for k, v in addrs.items()}
        order = data.get("orderTopicConf")
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise MalformedResponseError(
            f"the route of {topic!r} is not a TopicRouteData ({type(exc).__name__}: {exc})"
        ) from None
    return TopicRoute(queue_datas, brokers, str(order) if order else None)
