"""The lite pull consumer, both faces: `LitePullConsumer` (blocking) and
`TrioLitePullConsumer` (``async with open_lite_pull_consumer(...)``), over one `Engine`
whose pulled messages wait in a `PollBuffer` for ``poll``."""

from __future__ import annotations

import math
import time
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from .._checks import blocking_call
from ._blocking_consumer import TRIO_CONSUMERS, BlockingConsumer
from ._drive import run_trio
from ._engine import ConsumerStatistics, Engine, PollBuffer, statistics_of
from ._flows import query_offset
from ._setup import ConsumerSetup, consumer_setup, running_engine

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from .. import ClientConfig
    from ._message import Message, MessageQueue

__all__ = ["LitePullConsumer", "TrioLitePullConsumer", "open_lite_pull_consumer"]

MAX_POLL_MESSAGES = 32


def _setup(name_servers: str | list[str], group: str, topic: str | None, expression: str,
           options: dict[str, Any]) -> ConsumerSetup:
    subscriptions = {topic: expression} if topic is not None else {}
    return consumer_setup(name_servers, group, subscriptions, push=False, **options)


def _timeout(timeout: float) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(
            timeout) or timeout < 0:
        raise ValueError(f"timeout is seconds >= 0, got {timeout!r}")
    return float(timeout)


def _check_queues(queues: object) -> list[MessageQueue]:
    from ._message import MessageQueue

    if not isinstance(queues, (list, tuple, set, frozenset)) or not all(
            isinstance(q, MessageQueue) for q in queues):
        raise TypeError("assign() takes a list of MessageQueue (see fetch_message_queues)")
    return list(queues)


async def _committed(engine: Engine, queue: MessageQueue) -> int:
    return await run_trio(query_offset(engine._broker(queue), engine.group, queue),
                          engine.client)


class LitePullConsumer(BlockingConsumer):
    _THREAD = "rocketmq-lite-pull"

    """A RocketMQ lite pull consumer, blocking face (Java's ``DefaultLitePullConsumer``).

    ``LitePullConsumer(["127.0.0.1:9876"], "reports", "orders")`` shares topic ``orders``'s
    queues with the group's other members (subscribe mode); ``topic=None`` and `assign`
    read chosen queues instead. `poll` returns the messages pulled so far (waiting up to its
    timeout for one); `commit` stores, synchronously, the offsets past every message `poll`
    returned; with ``auto_commit`` (the default) that also happens every 5 s and at
    shutdown. Call `poll` from one thread at a time; the other methods from any thread.
    Arguments as `PushConsumer`'s, plus ``max_poll_messages`` (the most one `poll` returns).
    """

    def __init__(self, name_servers: str | list[str], group: str, topic: str | None = None,
                 expression: str = "*", *, consume_from: str | float = "last",
                 auto_commit: bool = True, pull_batch: int = 32,
                 max_poll_messages: int = MAX_POLL_MESSAGES, max_cached_messages: int = 1000,
                 suspend: float = 15.0, access_key: str | None = None,
                 secret_key: str | None = None, client_config: ClientConfig | None = None,
                 instance_name: str | None = None) -> None:
        buffer = PollBuffer()
        super().__init__(_setup(name_servers, group, topic, expression, dict(
            consume_from=consume_from, auto_commit=auto_commit, pull_batch=pull_batch,
            max_cached_messages=max_cached_messages, suspend=suspend, access_key=access_key,
            secret_key=secret_key, client_config=client_config, instance_name=instance_name)),
            buffer=buffer)
        self._poll_buffer = buffer
        if not isinstance(max_poll_messages, int) or max_poll_messages < 1:
            raise ValueError(f"max_poll_messages is an int >= 1, got {max_poll_messages!r}")
        self._max_poll = max_poll_messages

    @blocking_call("LitePullConsumer.poll", TRIO_CONSUMERS)
    def poll(self, timeout: float = 5.0) -> list[Message]:
        """Return the messages pulled and not yet polled (at most ``max_poll_messages``),
        waiting up to ``timeout`` seconds for one; an empty list if none came.

        Raises:
            RocketMQError: the consumer is not running.
        """
        deadline = time.monotonic() + _timeout(timeout)
        thread, engine = self._running()
        while True:
            taken = self._poll_buffer.take(self._max_poll)
            if taken:
                thread.soon(partial(engine.polled, taken))
                return [m for _, part in taken for m in part]
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not thread.alive:
                return []
            self._poll_buffer.wait_blocking(min(remaining, 1.0))

    @blocking_call("LitePullConsumer.commit", TRIO_CONSUMERS)
    def commit(self) -> None:
        """Store, now, the offsets past every message `poll` returned (on the brokers).

        Raises:
            RemotingError, MQBrokerError: a broker could not be reached or refused; the
                offsets stay in memory and are stored again by the next commit.
        """
        thread, engine = self._running()
        thread.call(engine.store_offsets)

    @blocking_call("LitePullConsumer.assign", TRIO_CONSUMERS)
    def assign(self, queues: list[MessageQueue]) -> None:
        """Read exactly ``queues`` from now on, from the group's committed offsets (or
        ``consume_from``); no rebalancing with other members."""
        chosen = _check_queues(queues)
        thread, engine = self._running()
        thread.call(engine.assign, chosen)

    @blocking_call("LitePullConsumer.seek", TRIO_CONSUMERS)
    def seek(self, queue: MessageQueue, offset: int) -> None:
        """Read ``queue`` from ``offset`` next; messages pulled before and not polled are
        dropped.

        Raises:
            ValueError: ``queue`` is not one this consumer reads now.
        """
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset is an int >= 0, got {offset!r}")
        thread, engine = self._running()
        thread.call(engine.seek, queue, offset)

    @blocking_call("LitePullConsumer.fetch_message_queues", TRIO_CONSUMERS)
    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """Return ``topic``'s readable queues (for `assign`)."""
        thread, engine = self._running()
        return thread.call(engine.fetch_queues, topic)

    @blocking_call("LitePullConsumer.committed", TRIO_CONSUMERS)
    def committed(self, queue: MessageQueue) -> int:
        """Return the group's offset of ``queue`` stored on its broker (-1: none)."""
        thread, engine = self._running()
        return thread.call(_committed, engine, queue)


class TrioLitePullConsumer:
    """A RocketMQ lite pull consumer, trio face (made by `open_lite_pull_consumer`):
    `LitePullConsumer`'s methods, awaited where they wait."""

    def __init__(self, engine: Engine, buffer: PollBuffer, max_poll: int) -> None:
        self._engine = engine
        self._buffer = buffer
        self._max_poll = max_poll

    @property
    def group(self) -> str:
        return self._engine.group

    async def poll(self, timeout: float = 5.0) -> list[Message]:
        """As `LitePullConsumer.poll`, awaited."""
        deadline = time.monotonic() + _timeout(timeout)
        while True:
            taken = self._buffer.take(self._max_poll)
            if taken:
                self._engine.polled(taken)
                return [m for _, part in taken for m in part]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                await trio.lowlevel.checkpoint()
                return []
            await self._buffer.wait_trio(remaining)

    async def commit(self) -> None:
        """As `LitePullConsumer.commit`, awaited."""
        await self._engine.store_offsets()

    async def assign(self, queues: list[MessageQueue]) -> None:
        await self._engine.assign(_check_queues(queues))

    async def seek(self, queue: MessageQueue, offset: int) -> None:
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset is an int >= 0, got {offset!r}")
        await self._engine.seek(queue, offset)

    def assignment(self) -> list[MessageQueue]:
        return sorted(self._engine.assigned)

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return await self._engine.fetch_queues(topic)

    async def committed(self, queue: MessageQueue) -> int:
        return await _committed(self._engine, queue)

    def statistics(self) -> ConsumerStatistics:
        return statistics_of(self._engine)


@asynccontextmanager
async def open_lite_pull_consumer(name_servers: str | list[str], group: str,
                                  topic: str | None = None, expression: str = "*", *,
                                  consume_from: str | float = "last", auto_commit: bool = True,
                                  pull_batch: int = 32,
                                  max_poll_messages: int = MAX_POLL_MESSAGES,
                                  max_cached_messages: int = 1000, suspend: float = 15.0,
                                  access_key: str | None = None, secret_key: str | None = None,
                                  client_config: ClientConfig | None = None,
                                  instance_name: str | None = None
                                  ) -> AsyncIterator[TrioLitePullConsumer]:
    """Pull for the block (arguments as `LitePullConsumer`'s); leaving it shuts down."""
    setup = _setup(name_servers, group, topic, expression, dict(
        consume_from=consume_from, auto_commit=auto_commit, pull_batch=pull_batch,
        max_cached_messages=max_cached_messages, suspend=suspend, access_key=access_key,
        secret_key=secret_key, client_config=client_config, instance_name=instance_name))
    if not isinstance(max_poll_messages, int) or max_poll_messages < 1:
        raise ValueError(f"max_poll_messages is an int >= 1, got {max_poll_messages!r}")
    buffer = PollBuffer()
    async with running_engine(setup, buffer=buffer) as engine:
        yield TrioLitePullConsumer(engine, buffer, max_poll_messages)
