"""`Cluster`: the RocketMQ cluster as the ``rocketmq`` source and sink reach it from one
process (the driver's planning worker or an executor's Python worker): the topics' routes
from the name servers, the queues' bounds, explicit offset ranges read from the brokers, and
a group's offsets committed, over the process's one client (`get_client`), through
`remoting.rocketmq`'s flows (`run_blocking`).

A `Cluster` is pickled to the executors with its options only; each process finds its own
client. Routes are looked up again on every `queues` call (each trigger: a queue added to a
topic is read from the next one) and when a read finds a broker unreachable.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from ...._errors import RemotingConnectError, RemotingError, RemotingSendRequestError
from ...._security._acl import AclClientRPCHook
from ....rocketmq._drive import run_blocking
from ....rocketmq._errors import TopicRouteError
from ....rocketmq._flows import fetch_route
from ....rocketmq._ids import client_id, local_ip
from ....rocketmq._instance import ClientState
from ....rocketmq._message import MessageQueue
from ....rocketmq._range import RangeRead, commit_offsets, queue_bounds, read_range
from ....rocketmq._subscription import Subscription
from ..._client import get_client
from ..._fleet import log

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ....blocking import RemotingClient
    from ._offsets import QueueKey, Segment
    from ._options import ClusterOptions, SourceOptions

__all__ = ["Cluster", "TopicMissingError"]

UNREACHABLE: Final = (RemotingConnectError, RemotingSendRequestError)


class TopicMissingError(TopicRouteError):
    """The name servers know no such topic (an internal signal; see `Cluster.queues`)."""


def _queue(key: QueueKey) -> MessageQueue:
    return MessageQueue(*key)


class Cluster:
    """The cluster's calls (see the module docstring); picklable."""

    def __init__(self, options: ClusterOptions) -> None:
        self.options = options
        self._state: ClientState | None = None

    def __getstate__(self) -> dict[str, object]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.options = state["options"]  # type: ignore[assignment]
        self._state = None

    @property
    def state(self) -> ClientState:
        if self._state is None:
            self._state = ClientState(list(self.options.name_servers),
                                      client_id(local_ip(), "spark"))
        return self._state

    def client(self) -> RemotingClient:
        """This process's client for the cluster's settings (and ACL signing)."""
        hooks = () if self.options.credentials is None else (
            AclClientRPCHook(*self.options.credentials),)
        return get_client(self.options.config, log_level=logging.WARNING, hooks=hooks)

    def queues(self, topics: Sequence[str]) -> dict[QueueKey, str]:
        """Return every readable queue of ``topics`` with its broker's address (the master's,
        else another), from routes looked up now.

        Raises:
            TopicRouteError: no name server answered; `TopicMissingError`: they know no such
                topic (``topic`` names it).
        """
        client = self.client()
        out: dict[QueueKey, str] = {}
        for topic in topics:
            route = run_blocking(fetch_route(self.state, topic, self.options.timeout), client)
            if route is None:
                raise TopicMissingError(f"the name servers know no topic {topic!r}: create "
                                        "it (mqadmin updateTopic) or send to it first", topic)
            self.state.set_route(topic, route, None)
            for q in route.subscribe_queues(topic):
                addr = route.any_broker(q.broker_name)
                if addr is not None:
                    out[(q.topic, q.broker_name, q.queue_id)] = addr
        return out

    def bounds(self, queues: Mapping[QueueKey, str], *, earliest: bool = False,
               strict: bool = False) -> dict[QueueKey, int]:
        """Return each queue's end (or first offset, ``earliest``), one round trip per
        broker; a queue whose broker did not answer is left out (logged), or with ``strict``
        its error raised.

        Raises:
            MQBrokerError, MalformedResponseError, RemotingError: with ``strict``.
        """
        by_addr: dict[str, list[QueueKey]] = {}
        for key, addr in queues.items():
            by_addr.setdefault(addr, []).append(key)
        client = self.client()
        out: dict[QueueKey, int] = {}
        for addr, keys in by_addr.items():
            found = run_blocking(queue_bounds(addr, [_queue(k) for k in keys],
                                              earliest=earliest, timeout=self.options.timeout),
                                 client)
            failed = [(k, r) for k, r in zip(keys, found, strict=True)
                      if isinstance(r, Exception)]
            if failed and strict:
                raise failed[0][1]
            if failed:
                log.warning("rocketmq.offsets_failed", addr=addr, queues=len(failed),
                            error=str(failed[0][1])[:200])
            out.update((k, r) for k, r in zip(keys, found, strict=True)
                       if not isinstance(r, Exception))
        return out

    def read(self, segment: Segment, addr: str, options: SourceOptions, *,
             window: int | None = None) -> RangeRead:
        """Read the offsets of ``segment`` from the broker at ``addr`` (looked up again, and
        the read made again once, if that broker cannot be reached).

        Raises:
            MQBrokerError, MalformedResponseError, RemotingError: as `read_range`.
        """
        queue = MessageQueue(segment.topic, segment.broker, segment.queue_id)
        subscription = Subscription.parse(segment.topic, options.expression, 0)

        def flow(at: str) -> RangeRead:
            return run_blocking(read_range(
                at, options.reader_group, queue, segment.start, segment.end, subscription,
                window=window or options.pull_batch, in_flight=options.pulls_in_flight,
                timeout=self.options.timeout), self.client())
        try:
            return flow(addr)
        except UNREACHABLE as exc:
            found = self.queues([segment.topic]).get(segment.key)
            log.warning("rocketmq.read_retried", broker=segment.broker, addr=addr,
                        now=found, error=type(exc).__name__)
            if found is None:
                raise
            return flow(found)

    def commit(self, group: str, offsets: Mapping[QueueKey, int],
               queues: Mapping[QueueKey, str]) -> None:
        """Commit ``group``'s ``offsets`` (of queues whose address ``queues`` knows), one round
        trip per broker; failures are logged (the next commit makes them good)."""
        by_addr: dict[str, list[tuple[MessageQueue, int]]] = {}
        for key, offset in offsets.items():
            addr = queues.get(key)
            if addr is not None:
                by_addr.setdefault(addr, []).append((_queue(key), offset))
        client = self.client()
        for addr, items in by_addr.items():
            try:
                errors = run_blocking(commit_offsets(addr, group, items,
                                                     timeout=self.options.timeout), client)
            except RemotingError as exc:
                errors = [exc]
            failed = [e for e in errors if e is not None]
            if failed:
                log.warning("rocketmq.commit_failed", group=group, addr=addr,
                            queues=len(failed), error=str(failed[0])[:200])
