"""The push consumer, both faces: `PushConsumer` (blocking) and `TrioPushConsumer`
(``async with open_push_consumer(...)``), over one `Engine` (`_engine`)."""

from __future__ import annotations

import inspect
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ._blocking_consumer import BlockingConsumer
from ._engine import ConsumerStatistics, statistics_of
from ._setup import ConsumerSetup, consumer_setup, running_engine

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from .. import ClientConfig
    from ._engine import Engine
    from ._message import Message, MessageQueue

__all__ = ["ConsumerStatistics", "PushConsumer", "TrioPushConsumer", "open_push_consumer"]


def _arguments(name_servers: str | list[str], group: str, topic: str, expression: str,
               handler: object, options: dict[str, Any]) -> ConsumerSetup:
    if not callable(handler):
        raise TypeError(f"handler is a function taking a Message, got {handler!r}")
    return consumer_setup(name_servers, group, {topic: expression}, push=True, **options)


class PushConsumer(BlockingConsumer):
    """A RocketMQ push consumer, blocking face (Java's ``DefaultMQPushConsumer``).

    ``PushConsumer(["127.0.0.1:9876"], "billing", "orders", "paid || refunded",
    handler=fn)`` calls ``fn(message)`` for each message of topic ``orders`` with tag
    ``paid`` or ``refunded``, on the consumer's worker threads (up to ``consume_threads`` at
    once). A handler that returns has consumed the message; one that raises has it
    delivered again later from the group's retry topic (``reconsume_times`` 1, 2, ...),
    and after ``max_reconsume_times`` failures it goes to the dead-letter topic
    ``%DLQ%group``. Use it in a ``with`` block, or `start` and `shutdown`: leaving stops
    pulling, lets running handlers finish, stores the offsets and unregisters.

    Args:
        consume_from: where a group that never committed starts: ``"last"`` (new messages;
            but a queue whose messages are all still in the broker's memory is read from
            its start, as with Java), ``"first"``, or a timestamp (seconds since the epoch).
        broadcasting: every member gets every message (offsets kept in a local file under
            ``offsets_dir``, default ``~/.rocketmq_offsets``); failures are not retried.
        orderly: one queue's messages are handled one at a time in order, holding the
            broker's lock of the queue; a failure is retried in place every second.
        max_reconsume_times: failures before a message goes to the dead-letter topic
            (default 16; orderly: no limit).
        retry_delay_level: the broker's delay level for a failed message's next delivery
            (0: the broker's choice, 10 s for the first retry, then 30 s, 1 min...; 1: 1 s).
        consume_threads, pull_batch, max_cached_messages, suspend: as Java's
            ``consumeThreadMax``, ``pullBatchSize``, ``pullThresholdForQueue`` and the
            broker's long-polling hold (seconds).
        shutdown_timeout: seconds leaving waits for running handlers.
        access_key, secret_key, client_config, instance_name: as `Producer`'s.
    """

    def __init__(self, name_servers: str | list[str], group: str, topic: str,
                 expression: str = "*", *, handler: Callable[[Message], object],
                 consume_from: str | float = "last", broadcasting: bool = False,
                 orderly: bool = False, max_reconsume_times: int | None = None,
                 retry_delay_level: int = 0, consume_threads: int = 20, pull_batch: int = 32,
                 max_cached_messages: int = 1000, suspend: float = 15.0,
                 offsets_dir: str | None = None, shutdown_timeout: float = 10.0,
                 access_key: str | None = None, secret_key: str | None = None,
                 client_config: ClientConfig | None = None,
                 instance_name: str | None = None) -> None:
        if inspect.iscoroutinefunction(handler):
            raise TypeError("a blocking PushConsumer's handler is a plain function; an async "
                            "one needs open_push_consumer")
        super().__init__(_arguments(name_servers, group, topic, expression, handler, dict(
            consume_from=consume_from, broadcasting=broadcasting, orderly=orderly,
            max_reconsume_times=max_reconsume_times, retry_delay_level=retry_delay_level,
            consume_threads=consume_threads, pull_batch=pull_batch,
            max_cached_messages=max_cached_messages, suspend=suspend,
            offsets_dir=offsets_dir, shutdown_timeout=shutdown_timeout,
            access_key=access_key, secret_key=secret_key, client_config=client_config,
            instance_name=instance_name)), handler=handler)


class TrioPushConsumer:
    """A RocketMQ push consumer, trio face (made by `open_push_consumer`)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def group(self) -> str:
        return self._engine.group

    @property
    def client_id(self) -> str:
        return self._engine.state.client_id

    def assignment(self) -> list[MessageQueue]:
        """Return the queues this member reads now."""
        return sorted(self._engine.assigned)

    def statistics(self) -> ConsumerStatistics:
        """Return the consumer's counters and queues."""
        return statistics_of(self._engine)


@asynccontextmanager
async def open_push_consumer(name_servers: str | list[str], group: str, topic: str,
                             expression: str = "*", *, handler: Callable[[Message], object],
                             consume_from: str | float = "last", broadcasting: bool = False,
                             orderly: bool = False, max_reconsume_times: int | None = None,
                             retry_delay_level: int = 0, consume_threads: int = 20,
                             pull_batch: int = 32, max_cached_messages: int = 1000,
                             suspend: float = 15.0, offsets_dir: str | None = None,
                             shutdown_timeout: float = 10.0, access_key: str | None = None,
                             secret_key: str | None = None,
                             client_config: ClientConfig | None = None,
                             instance_name: str | None = None
                             ) -> AsyncIterator[TrioPushConsumer]:
    """Consume for the block (arguments as `PushConsumer`'s). ``handler`` may be an async
    function (awaited in the loop, one message at a time per pull) or a plain one (on worker
    threads). Leaving the block shuts the consumer down as `PushConsumer.shutdown`."""
    setup = _arguments(name_servers, group, topic, expression, handler, dict(
        consume_from=consume_from, broadcasting=broadcasting, orderly=orderly,
        max_reconsume_times=max_reconsume_times, retry_delay_level=retry_delay_level,
        consume_threads=consume_threads, pull_batch=pull_batch,
        max_cached_messages=max_cached_messages, suspend=suspend, offsets_dir=offsets_dir,
        shutdown_timeout=shutdown_timeout, access_key=access_key, secret_key=secret_key,
        client_config=client_config, instance_name=instance_name))
    async with running_engine(setup, handler=handler) as engine:
        yield TrioPushConsumer(engine)
