"""The client's conversations with name servers and brokers, written once for both faces.

A flow is a generator: it yields a `Call` (an address, a request, a timeout) and is sent the
response, or has the transport's exception thrown into it; it returns its result. A flow may
also yield `Calls` (several requests to one address, sent together): it is sent one entry per
request, in order, the response or the transport's error (never thrown). The callback
driver runs only flows of single calls. It does no
I/O and never blocks: `_drive` runs it on a blocking client from the calling thread, on a
trio client from a task, or from the transport's callbacks (a send that must not wait).
So the blocking and trio faces share every line of protocol logic here and in `_send`.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson

from codec import ResponseCode

from .._errors import RemotingError
from .._log import log
from ._errors import MalformedResponseError, MQBrokerError, TopicRouteError
from ._fault import PublishQueues
from ._instance import API_TIMEOUT
from ._message import MessageQueue
from ._protocol import (
    AUTO_CREATE_TOPIC,
    DEFAULT_TOPIC_QUEUES,
    Code,
    checked,
    consumer_list_request,
    int_field,
    json_int,
    lock_request,
    queue_json,
    request,
)
from ._route import TopicRoute, loads_fastjson, parse_route
from ._subscription import heartbeat_body

if TYPE_CHECKING:
    from codec import RemotingCommand

    from ._instance import ClientState

__all__ = ["Call", "Calls", "Flow", "fetch_route", "heartbeat", "publish_queues", "query_offset",
           "unregister", "update_offset"]

T = TypeVar("T")


@dataclass(slots=True)
class Call:
    """One request a flow wants made: to ``addr``, waiting ``timeout`` seconds (or oneway)."""

    addr: str
    request: RemotingCommand
    timeout: float
    oneway: bool = False


@dataclass(slots=True)
class Calls:
    """Requests a flow wants made to ``addr`` at once, at most ``limit`` in flight, each
    waiting ``timeout`` seconds: one round trip for many (``invoke_many``)."""

    addr: str
    requests: list[RemotingCommand]
    timeout: float
    limit: int = 64


Flow = Generator[Call | Calls, Any, T]

NOT_FOUND: Final = -1  # an offset the broker has none of (QUERY_NOT_FOUND)


# ---------------------------------------------------------------------- routes


def fetch_route(state: ClientState, topic: str, timeout: float = API_TIMEOUT
                ) -> Flow[TopicRoute | None]:
    """Look ``topic``'s route up, trying each name server until one answers.

    Returns None if the name servers answer that they know no such topic.

    Raises:
        TopicRouteError: no name server answered (``__cause__``: the last one's error).
    """
    last: BaseException | None = None
    for addr in state.name_server_order():
        try:
            response = yield Call(addr, request(Code.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}),
                                  timeout)
        except RemotingError as exc:
            log.warning("rocketmq.name_server_failed", addr=addr, topic=topic,
                        error=type(exc).__name__)
            last = exc
            continue
        state.name_server_answered(addr)
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if response.code != ResponseCode.SUCCESS:
            last = MQBrokerError(response.code, response.remark, addr)
            continue
        return parse_route(response.body, topic)
    raise TopicRouteError(f"no name server answered for topic {topic!r} "
                          f"(tried {', '.join(state.name_servers)})", topic) from last


def refresh_route(state: ClientState, topic: str, *, producer: bool) -> Flow[TopicRoute | None]:
    """Look ``topic``'s route up again and keep it; return it (None: no such topic)."""
    route = yield from fetch_route(state, topic)
    if route is None:
        return None
    state.set_route(topic, route, PublishQueues(route.publish_queues(topic)) if producer else None)
    return route


def publish_queues(state: ClientState, topic: str) -> Flow[PublishQueues]:
    """Return the queues to send ``topic`` to: its route's, cached (looked up again when a
    send failure marked it stale); for a topic no name server knows yet, the auto-create
    topic's brokers with 4 queues each, which make the topic on first send (as Java's
    ``tryToFindTopicPublishInfo``).

    Raises:
        TopicRouteError: no name server answered, or no broker can take the topic.
    """
    known = state.publish.get(topic)
    if known is not None and known.queues and topic not in state.stale:
        return known
    try:
        route = yield from refresh_route(state, topic, producer=True)
    except TopicRouteError:
        if known is not None and known.queues:
            return known  # keep sending on the route we had while name servers are away
        raise
    if route is not None:
        found = state.publish[topic]
        if found.queues:
            return found
    fallback = yield from fetch_route(state, AUTO_CREATE_TOPIC)
    if fallback is None or not fallback.publish_queues(topic):
        raise TopicRouteError(
            f"no route for topic {topic!r}: create it (mqadmin updateTopic) or let the "
            "brokers create topics (autoCreateTopicEnable=true)", topic)
    limited = fallback.limited(DEFAULT_TOPIC_QUEUES)
    state.set_route(topic, limited, PublishQueues(limited.publish_queues(topic)))
    state.stale.add(topic)  # the real route appears once a broker made the topic
    return state.publish[topic]


def refresh_routes(state: ClientState, topics: list[str], *, producer: bool) -> Flow[None]:
    """Look every topic of ``topics`` up again (the 30 s timer); failures are logged."""
    for topic in topics:
        try:
            route = yield from fetch_route(state, topic)
        except TopicRouteError as exc:
            log.warning("rocketmq.route_refresh_failed", topic=topic, error=str(exc)[:200])
            continue
        except MalformedResponseError as exc:
            log.warning("rocketmq.route_refresh_failed", topic=topic, error=str(exc)[:200])
            continue
        if route is None:
            continue
        publish = PublishQueues(route.publish_queues(topic)) if producer else None
        state.set_route(topic, route, publish)


# ---------------------------------------------------------------------- heartbeats


def heartbeat(state: ClientState, timeout: float = API_TIMEOUT) -> Flow[int]:
    """Send a heartbeat to every broker of the routes in use; return how many answered.

    Producers heartbeat to masters only; a client with consumers to every broker
    (``sendHeartbeatToAllBroker``). Failures are logged, never raised.
    """
    if not state.producer_groups and not state.consumers:
        return 0
    body = heartbeat_body(state.client_id, state.producer_groups, state.consumers)
    addrs = state.broker_addresses() if state.consumers else state.masters()
    answered = 0
    for addr in addrs:
        try:
            response = yield Call(addr, request(Code.HEART_BEAT, None, body), timeout)
            checked(response, addr)
            answered += 1
        except (RemotingError, MalformedResponseError) as exc:
            log.warning("rocketmq.heartbeat_failed", addr=addr, error=str(exc)[:200])
    return answered


def unregister(state: ClientState, *, producer_group: str | None = None,
               consumer_group: str | None = None, timeout: float = API_TIMEOUT) -> Flow[None]:
    """Tell every broker of the routes in use that a group of this client is gone
    (UNREGISTER_CLIENT); failures are logged."""
    for addr in state.broker_addresses():
        try:
            response = yield Call(addr, request(Code.UNREGISTER_CLIENT, {
                "clientID": state.client_id, "producerGroup": producer_group,
                "consumerGroup": consumer_group}), timeout)
            checked(response, addr)
        except (RemotingError, MQBrokerError) as exc:
            log.info("rocketmq.unregister_failed", addr=addr, error=str(exc)[:200])


# ---------------------------------------------------------------------- consumers


def consumer_ids(state: ClientState, group: str, addr: str,
                 timeout: float = API_TIMEOUT) -> Flow[list[str]]:
    """Return the client ids of ``group``'s members a broker knows (GET_CONSUMER_LIST_BY_GROUP).

    Raises:
        MQBrokerError, MalformedResponseError, RemotingError.
    """
    response = yield Call(addr, consumer_list_request(group), timeout)
    checked(response, addr)
    data = loads_fastjson(response.body, f"the members of group {group!r}")
    ids = data.get("consumerIdList") if isinstance(data, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise MalformedResponseError(f"the members of group {group!r}: no consumerIdList", addr)
    return ids


def query_offset(addr: str, group: str, queue: MessageQueue,
                 timeout: float = API_TIMEOUT) -> Flow[int]:
    """Return ``group``'s committed offset of ``queue`` (`NOT_FOUND`: none yet).

    Raises:
        MQBrokerError, MalformedResponseError, RemotingError.
    """
    response = yield Call(addr, request(Code.QUERY_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": queue.topic, "queueId": queue.queue_id}), timeout)
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return NOT_FOUND
    checked(response, addr)
    return int_field(response, "offset")


def update_offset(addr: str, group: str, queue: MessageQueue, offset: int,
                  timeout: float = API_TIMEOUT, *, oneway: bool = False) -> Flow[None]:
    """Commit ``group``'s ``offset`` of ``queue`` (UPDATE_CONSUMER_OFFSET).

    Raises:
        MQBrokerError, RemotingError.
    """
    response = yield Call(addr, request(Code.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": queue.topic, "queueId": queue.queue_id,
        "commitOffset": offset}), timeout, oneway)
    if response is not None:
        checked(response, addr)


def queue_offset(addr: str, code: Code, queue: MessageQueue, timestamp: int | None = None,
                 timeout: float = API_TIMEOUT) -> Flow[int]:
    """Return a queue's max offset (GET_MAX_OFFSET), min offset (GET_MIN_OFFSET), or the
    offset of its first message stored at or after ``timestamp`` ms
    (SEARCH_OFFSET_BY_TIMESTAMP).

    Raises:
        MQBrokerError, MalformedResponseError, RemotingError.
    """
    fields: dict[str, object] = {"topic": queue.topic, "queueId": queue.queue_id}
    if timestamp is not None:
        fields["timestamp"] = timestamp
    response = yield Call(addr, request(code, fields), timeout)
    checked(response, addr)
    return int_field(response, "offset")


def lock_queues(addr: str, group: str, client_id: str, queues: list[MessageQueue],
                timeout: float = API_TIMEOUT) -> Flow[set[MessageQueue]]:
    """Lock ``queues`` of one broker for this client (LOCK_BATCH_MQ); return those locked.

    Raises:
        MQBrokerError, MalformedResponseError, RemotingError.
    """
    response = yield Call(addr, lock_request(Code.LOCK_BATCH_MQ, group, client_id, queues),
                          timeout)
    checked(response, addr)
    data = loads_fastjson(response.body, "a LOCK_BATCH_MQ answer")
    locked: set[MessageQueue] = set()
    try:
        for item in data.get("lockOKMQSet") or ():
            locked.add(MessageQueue(str(item["topic"]), str(item["brokerName"]),
                                    json_int("queueId", item["queueId"], 0, 2**31 - 1)))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise MalformedResponseError(f"a LOCK_BATCH_MQ answer: {exc!r}", addr) from None
    return locked


def unlock_queues(addr: str, group: str, client_id: str, queues: list[MessageQueue],
                  timeout: float = API_TIMEOUT) -> Flow[None]:
    """Release this client's lock of ``queues`` (UNLOCK_BATCH_MQ); failures are logged."""
    try:
        response = yield Call(addr, lock_request(Code.UNLOCK_BATCH_MQ, group, client_id,
                                                 queues), timeout)
        checked(response, addr)
    except (RemotingError, MQBrokerError) as exc:
        log.info("rocketmq.unlock_failed", addr=addr, error=str(exc)[:200])


def body_json(queue: MessageQueue) -> bytes:
    """Return ``queue`` as a JSON body (for tests and tools)."""
    return orjson.dumps(queue_json(queue))


def now_ms() -> int:
    """Return the wall clock in milliseconds, as Java's ``System.currentTimeMillis``."""
    return time.time_ns() // 1_000_000
