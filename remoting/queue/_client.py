"""`QueueClient`: the queue service's calls over a remoting client, written once for both
faces.

``QueueClient(client)`` is a `BlockingQueueClient` for a `RemotingClient` (plain methods,
``for msg in sub``) and a `TrioQueueClient` for a `TrioRemotingClient` (the same names,
awaited; ``async for msg in sub``). Each call is one generator of steps in `QueueClient`
(remoting/_steps.py: ``yield Call(...)`` where it waits for the service), and each face
method drives it: ``drive(...)`` in the calling thread, ``await drive_async(...)`` in the
calling task. Requests are built and answers read by `remoting.queue._requests`; a reply
other than SUCCESS raises `QueueError` (`QueueFullError` for a full topic). Subscriptions
are `remoting.queue._subscription`'s.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, overload

from .._checks import blocking_call, seconds
from .._errors import RemotingStreamError
from .._faces._blocking import RemotingClient
from .._faces._trio import TrioRemotingClient
from .._messaging._credits import credits_of
from .._steps import Call, drive, drive_async
from ._errors import malformed_records
from ._messages import Message, PulledRecords, messages_of
from ._requests import (
    DEFAULT_ACK_WINDOW,
    DEFAULT_TIMEOUT,
    checked,
    commit_request,
    create_topic_request,
    offsets_of,
    offsets_request,
    publish_request,
    published,
    pull_request,
    pull_timeout,
    statistics_of,
    stats_request,
    stream_refusal,
    subscribe_request,
)
from ._stream_steps import OpenStream
from ._subscription import TRIO_QUEUE, BlockingSubscription, Subscription, TrioSubscription

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Mapping

    from .._steps import Steps
    from ._requests import Body
    from ._stats import QueueStatistics, TopicOffsets

__all__ = ["BlockingQueueClient", "QueueClient", "TrioQueueClient"]


class QueueClient:
    """The queue service's calls over ``client``: a `BlockingQueueClient` for a
    `RemotingClient`, a `TrioQueueClient` for a `TrioRemotingClient`.

    Raises:
        TypeError: ``client`` is neither.
    """

    client: Any  # the face's transport client
    _subscription: type[Subscription[Any]]  # the face's

    @overload
    def __new__(cls, client: RemotingClient) -> BlockingQueueClient: ...

    @overload
    def __new__(cls, client: TrioRemotingClient) -> TrioQueueClient: ...

    def __new__(cls, client: RemotingClient | TrioRemotingClient) -> Any:
        if cls is QueueClient:
            if isinstance(client, RemotingClient):
                cls = BlockingQueueClient
            elif isinstance(client, TrioRemotingClient):
                cls = TrioQueueClient
            else:
                raise TypeError(f"QueueClient needs a RemotingClient or a TrioRemotingClient, "
                                f"got {type(client).__name__}")
        face = object.__new__(cls)
        face.client = client
        return face

    # every call, once: the faces drive these

    def _publish(self, addr: str | None, topic: str, bodies: Iterable[Body], defer: float,
                 key: str | None, timeout: float) -> Steps[list[int]]:
        request, _ = publish_request(topic, bodies, defer, key)
        return published(addr, (yield Call(self.client, addr, request, timeout))).offsets

    def _subscribe(self, addr: str | None, topic: str, channel: str, credits: int,
                   ack_window: float, timeout: float) -> Steps[Any]:
        credits = credits_of(credits)
        window = seconds("ack_window", ack_window)
        try:
            opened = yield OpenStream(self.client, addr, subscribe_request(topic, channel),
                                      credits, timeout)
        except RemotingStreamError as exc:
            raise stream_refusal(exc) from exc
        return self._subscription(self.client, opened, topic, channel, credits, window,
                                  timeout, addr)

    def _pull(self, addr: str | None, topic: str, group: str | None, max_messages: int,
              max_wait: float, offset: int | None, incarnation: str | None,
              timeout: float | None) -> Steps[PulledRecords]:
        request = pull_request(topic, group, offset, max_messages, max_wait, incarnation)
        reply = yield Call(self.client, addr, request, pull_timeout(max_wait, timeout))
        return PulledRecords(topic, checked(addr, reply).body or b"")

    def _pull_messages(self, addr: str | None, topic: str, group: str | None,
                       max_messages: int, max_wait: float, offset: int | None,
                       incarnation: str | None, timeout: float | None
                       ) -> Steps[list[Message]]:
        pulled = yield from self._pull(addr, topic, group, max_messages, max_wait, offset,
                                       incarnation, timeout)
        try:
            return messages_of(topic, pulled.data)
        except ValueError as exc:
            raise malformed_records(addr, exc) from None

    def _commit(self, addr: str | None, topic: str, group: str, offset: int,
                timeout: float) -> Steps[None]:
        checked(addr, (yield Call(self.client, addr, commit_request(topic, group, offset),
                                  timeout)))

    def _offsets(self, addr: str | None, topic: str, offset: int | None, timeout: float
                 ) -> Steps[TopicOffsets]:
        return offsets_of(addr, (yield Call(self.client, addr, offsets_request(topic, offset),
                                            timeout)))

    def _create_topic(self, addr: str | None, topic: str, timeout: float) -> Steps[None]:
        checked(addr, (yield Call(self.client, addr, create_topic_request(topic), timeout)))

    def _statistics(self, addr: str | None, topic: str | None, after: str | None,
                    limit: int | None, timeout: float) -> Steps[QueueStatistics]:
        request = stats_request(topic, after, limit)
        return statistics_of(addr, (yield Call(self.client, addr, request, timeout)))


class BlockingQueueClient(QueueClient):
    """The queue service's calls for a blocking `RemotingClient` (any thread but its loop's).

    Every call raises `QueueError` when the service refuses it (the message says why) and the
    transport's errors (`RemotingConnectError`, `RemotingTimeoutError`...) as `invoke_sync`.
    """

    client: RemotingClient
    _subscription = BlockingSubscription

    @blocking_call("QueueClient.publish", TRIO_QUEUE)
    def publish(self, addr: str | None, topic: str, body: bytes,
                headers: Mapping[str, str] | None = None, defer: float = 0.0, *,
                key: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> int:
        """Append one message to ``topic`` (made if new); return its offset once the service
        has it (see docs/queue.md for when it is on disk).

        Args:
            defer: seconds before it may be delivered (NSQ's DPUB).
            key: an idempotence key: a publish repeated with it within the service's
                ``dedup_window`` appends nothing and returns the first one's offset.

        Raises:
            QueueFullError: the topic is full (no data directory); nothing was appended.
            QueueError: a bad topic name or message.
        """
        return drive(self._publish(addr, topic, [(body, headers or {})], defer, key,
                                   timeout))[0]

    @blocking_call("QueueClient.publish_many", TRIO_QUEUE)
    def publish_many(self, addr: str | None, topic: str, bodies: Iterable[Body], *,
                     defer: float = 0.0, key: str | None = None,
                     timeout: float = DEFAULT_TIMEOUT) -> list[int]:
        """Append messages (``bytes``, or ``(bytes, headers)``) in one request: all or none;
        return their offsets (consecutive). ``defer`` and ``key`` as `publish`.

        Raises:
            ValueError: no message, or more than 16,384 (`MAX_PUBLISH`): nothing is sent.
            QueueFullError, QueueError: as `publish`.
        """
        return drive(self._publish(addr, topic, bodies, defer, key, timeout))

    @blocking_call("QueueClient.subscribe", TRIO_QUEUE)
    def subscribe(self, addr: str | None, topic: str, channel: str, credits: int = 64, *,
                  ack_window: float = DEFAULT_ACK_WINDOW, timeout: float = DEFAULT_TIMEOUT
                  ) -> BlockingSubscription:
        """Subscribe to ``channel`` of ``topic`` (the channel is made if new, starting at the
        earliest message held): ``with q.subscribe(...) as sub: for msg in sub``.

        Args:
            credits: deliveries held at most before acknowledging (1 to 65,536).
            ack_window: seconds an acknowledgement waits at most to travel with others.

        Raises:
            QueueError: the topic does not exist (``TOPIC_NOT_EXIST``) or a name is bad.
            TypeError, ValueError: ``credits`` or ``ack_window`` out of range.
        """
        return drive(self._subscribe(addr, topic, channel, credits, ack_window,  # type: ignore[no-any-return]
                                     timeout))

    @blocking_call("QueueClient.pull", TRIO_QUEUE)
    def pull(self, addr: str | None, topic: str, group: str | None = None,
             max_messages: int = 32, max_wait: float = 15.0, *, offset: int | None = None,
             incarnation: str | None = None, timeout: float | None = None) -> list[Message]:
        """Return up to ``max_messages`` messages from ``offset``, or from ``group``'s
        committed offset (the earliest held if it never committed), waiting up to
        ``max_wait`` seconds for one if there are none (the service holds the request).
        The group's offset does not move: `commit` it. With ``incarnation`` (from
        `offsets`), only from that log of the topic.

        Raises:
            QueueError: the topic does not exist, the offset is past its end, or the topic
                is another log than ``incarnation`` (``PULL_OFFSET_MOVED``: the service
                started it afresh; read its offsets again).
        """
        return drive(self._pull_messages(addr, topic, group, max_messages, max_wait, offset,
                                         incarnation, timeout))

    @blocking_call("QueueClient.pull_records", TRIO_QUEUE)
    def pull_records(self, addr: str | None, topic: str, group: str | None = None,
                     max_messages: int = 32, max_wait: float = 15.0, *,
                     offset: int | None = None, incarnation: str | None = None,
                     timeout: float | None = None) -> PulledRecords:
        """`pull`, answered as the service sent it: the records in one bytes object, for
        reading in bulk without a `Message` per record (`PulledRecords`).

        Raises:
            QueueError: as `pull`.
        """
        return drive(self._pull(addr, topic, group, max_messages, max_wait, offset,
                                incarnation, timeout))

    @blocking_call("QueueClient.commit", TRIO_QUEUE)
    def commit(self, addr: str | None, topic: str, group: str, offset: int, *,
               timeout: float = DEFAULT_TIMEOUT) -> None:
        """Set ``group``'s offset: the next message it reads (the last it processed + 1)."""
        drive(self._commit(addr, topic, group, offset, timeout))

    @blocking_call("QueueClient.offsets", TRIO_QUEUE)
    def offsets(self, addr: str | None, topic: str, *, offset: int | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> TopicOffsets:
        """Return ``topic``'s earliest and end offsets, its groups' offsets, how far a pull
        from ``offset`` (default: the earliest) reads now (``readable``), and the id of its
        log (``incarnation``: another one after a service without a data directory
        restarted)."""
        return drive(self._offsets(addr, topic, offset, timeout))

    @blocking_call("QueueClient.create_topic", TRIO_QUEUE)
    def create_topic(self, addr: str | None, topic: str, *,
                     timeout: float = DEFAULT_TIMEOUT) -> None:
        """Make ``topic`` if it does not exist (subscriptions and pulls need it)."""
        drive(self._create_topic(addr, topic, timeout))

    @blocking_call("QueueClient.statistics", TRIO_QUEUE)
    def statistics(self, addr: str | None, topic: str | None = None, *,
                   after: str | None = None, limit: int | None = None,
                   timeout: float = DEFAULT_TIMEOUT) -> QueueStatistics:
        """Return the service's statistics: its totals (topics, channels, groups, memory,
        held pulls, problems); with ``topic``, that topic with its channels and groups;
        with ``limit`` (1 to 1,000), a page of topics in name order after ``after``, each
        with its counts (``next_after``: where the next page starts). An answer is
        bounded whatever the service holds.

        Raises:
            TypeError, ValueError: a bad ``limit`` (nothing is sent).
        """
        return drive(self._statistics(addr, topic, after, limit, timeout))


class TrioQueueClient(QueueClient):
    """The queue service's calls for a `TrioRemotingClient`: `BlockingQueueClient`'s, awaited
    (``subscribe`` is an async context manager)."""

    client: TrioRemotingClient
    _subscription = TrioSubscription

    async def publish(self, addr: str | None, topic: str, body: bytes,
                      headers: Mapping[str, str] | None = None, defer: float = 0.0, *,
                      key: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> int:
        """See `BlockingQueueClient.publish`."""
        return (await drive_async(self._publish(addr, topic, [(body, headers or {})], defer,
                                                key, timeout)))[0]

    async def publish_many(self, addr: str | None, topic: str, bodies: Iterable[Body], *,
                           defer: float = 0.0, key: str | None = None,
                           timeout: float = DEFAULT_TIMEOUT) -> list[int]:
        """See `BlockingQueueClient.publish_many`."""
        return await drive_async(self._publish(addr, topic, bodies, defer, key, timeout))

    @asynccontextmanager
    async def subscribe(self, addr: str | None, topic: str, channel: str, credits: int = 64,
                        *, ack_window: float = DEFAULT_ACK_WINDOW,
                        timeout: float = DEFAULT_TIMEOUT) -> AsyncIterator[TrioSubscription]:
        """``async with q.subscribe(...) as sub: async for msg in sub: await msg.ack()``
        (see `BlockingQueueClient.subscribe`)."""
        async with await drive_async(self._subscribe(addr, topic, channel, credits,
                                                     ack_window, timeout)) as sub:
            yield sub

    async def pull(self, addr: str | None, topic: str, group: str | None = None,
                   max_messages: int = 32, max_wait: float = 15.0, *,
                   offset: int | None = None, incarnation: str | None = None,
                   timeout: float | None = None) -> list[Message]:
        """See `BlockingQueueClient.pull`."""
        return await drive_async(self._pull_messages(addr, topic, group, max_messages,
                                                     max_wait, offset, incarnation, timeout))

    async def pull_records(self, addr: str | None, topic: str, group: str | None = None,
                           max_messages: int = 32, max_wait: float = 15.0, *,
                           offset: int | None = None, incarnation: str | None = None,
                           timeout: float | None = None) -> PulledRecords:
        """See `BlockingQueueClient.pull_records`."""
        return await drive_async(self._pull(addr, topic, group, max_messages, max_wait,
                                            offset, incarnation, timeout))

    async def commit(self, addr: str | None, topic: str, group: str, offset: int, *,
                     timeout: float = DEFAULT_TIMEOUT) -> None:
        """See `BlockingQueueClient.commit`."""
        await drive_async(self._commit(addr, topic, group, offset, timeout))

    async def offsets(self, addr: str | None, topic: str, *, offset: int | None = None,
                      timeout: float = DEFAULT_TIMEOUT) -> TopicOffsets:
        """See `BlockingQueueClient.offsets`."""
        return await drive_async(self._offsets(addr, topic, offset, timeout))

    async def create_topic(self, addr: str | None, topic: str, *,
                           timeout: float = DEFAULT_TIMEOUT) -> None:
        """See `BlockingQueueClient.create_topic`."""
        await drive_async(self._create_topic(addr, topic, timeout))

    async def statistics(self, addr: str | None, topic: str | None = None, *,
                         after: str | None = None, limit: int | None = None,
                         timeout: float = DEFAULT_TIMEOUT) -> QueueStatistics:
        """See `BlockingQueueClient.statistics`."""
        return await drive_async(self._statistics(addr, topic, after, limit, timeout))
