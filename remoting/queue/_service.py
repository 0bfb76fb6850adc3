"""`QueueService`: the queue service's public face: its settings, checked where they are
given, and how it is attached to a server (its processors, its background task, its metrics).
What it holds and does is its `Broker`'s, on the server's event loop."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Self, TypeVar

from .._checks import seconds
from ._broker import (
    DEFAULT_DEDUP_WINDOW,
    DEFAULT_MAX_CHANNELS,
    DEFAULT_MAX_DEFERRED,
    DEFAULT_MAX_HELD_PULLS,
    DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION,
    DEFAULT_MAX_TOPICS,
    DEFAULT_MAX_TOTAL_CHANNELS,
    DEFAULT_MAX_TOTAL_GROUPS,
    DEFAULT_MEMORY_BYTES,
    DEFAULT_SEGMENT_BYTES,
    DEFAULT_TOTAL_MEMORY_BYTES,
    Broker,
    FsyncPolicy,
)
from ._handlers import register_handlers
from ._metrics import install_metrics
from ._stats import MAX_TOPICS_PER_PAGE

if TYPE_CHECKING:
    import os
    from collections.abc import Callable
    from types import TracebackType

    from .._core._endpoint import Endpoint
    from .._faces._blocking_server import RemotingServer
    from .._faces._trio import TrioRemotingServer
    from ._messages import Message
    from ._segments import Problem
    from ._stats import QueueStatistics

__all__ = ["QueueService"]

T = TypeVar("T")

LOOP_ANSWER_SECONDS = 10.0  # a loop that takes longer to answer for statistics is stuck


class QueueService:
    """A queue service: attach it to a server, and clients use it through `QueueClient`.

    Args:
        data_dir: where topics are kept in segment files (None: in memory only, lost when the
            process ends). Made when missing; what it holds is recovered now.
        memory_messages: messages per topic held in memory; without ``data_dir``, a publish
            that would hold more is refused (SYSTEM_BUSY).
        memory_bytes: bytes of messages per topic held in memory, likewise (with
            ``data_dir``, the newest are kept within both bounds).
        total_memory_bytes: bytes of messages all topics hold in memory together (default
            1 GiB): without ``data_dir``, a publish past it is refused (SYSTEM_BUSY,
            `QueueFullError`); with one, the topics written least recently keep fewer of
            their newest messages in memory (they are read from their segments).
        msg_timeout: seconds a subscriber has to finish, requeue or touch a delivery before
            it is delivered again.
        max_attempts: deliveries a message gets at most (0: no limit); the one after is
            dead-lettered instead.
        dead_letter: called with ``(channel, message)`` for each dead-lettered message, on the
            server's event loop (it must not block); None logs ``queue.dead_lettered``.
        fsync: when segment files are fsynced: ``"always"`` (before a publish is
            acknowledged), ``"interval"`` (every ``fsync_interval`` seconds) or ``"never"``.
        fsync_interval: seconds between fsyncs with ``fsync="interval"``.
        segment_bytes: the size at which a topic starts a new segment file.
        dedup_window: seconds a publish's idempotence key is remembered.
        retention: with ``data_dir``, delete a topic's oldest segment files once last
            written this many seconds ago, even if a channel or group still needs their
            messages (RocketMQ's ``fileReservedTime``); None: only once consumed.
        retention_bytes: with ``data_dir``, delete a topic's oldest segment files while its
            files hold more than this many bytes, whoever needs them; None: no bound.
        max_topics: topics the service holds at most: a publish or ``create_topic`` of one
            more is refused (NO_PERMISSION). Those recovered from ``data_dir`` count.
        max_channels: channels, and groups, a topic has at most (each): a subscription
            or commit that would make one more is refused (NO_PERMISSION); see
            `delete_channel`, `delete_group`.
        max_total_channels: channels of all topics at most (default 10,000, about 20 MB);
            one more is refused likewise. Those recovered from ``data_dir`` count.
        max_total_groups: groups of all topics at most (default 100,000), likewise.
        channel_idle_timeout: seconds a channel without subscribers is kept (None, the
            default: until `delete_channel`; 0: deleted when its last subscriber leaves,
            as NSQ's ephemeral channels). A channel deleted so loses its position: the
            messages it had not delivered are not delivered to that name again unless
            the topic still holds them (a new channel starts at the earliest held).
        max_held_pulls: pulls the service holds at once, all connections together
            (default 65,536, about 90 MB); one more is answered POLLING_FULL at once. Each
            connection holds at most 16,384.
        max_deferred: deferred messages not yet due, all topics together (default
            1,000,000: about 150 MB); a publish with a ``defer`` past it is refused
            (`QueueFullError`, SYSTEM_BUSY). Channels keep nothing per deferred message.
        max_in_flight_per_connection: deliveries one connection's subscriptions hold
            unacknowledged at most, together (NSQ's ``--max-rdy-count``). At it, the
            connection's subscriptions are handed nothing more until some of its deliveries
            end (finished, requeued, timed out, or returned with their subscription): their
            credits stay theirs, nothing is refused. Default 65,536: one subscription's most
            credits, and 1,024 subscriptions (a connection's most streams) at the default 64.

    Raises:
        TypeError, ValueError: a setting out of range, or a retention without
            ``data_dir``.
        OSError: ``data_dir`` cannot be made or read.
    """

    def __init__(self, data_dir: str | os.PathLike[str] | None = None,
                 memory_messages: int = 10_000, msg_timeout: float = 60.0,
                 max_attempts: int = 0, *,
                 dead_letter: Callable[[str, Message], object] | None = None,
                 fsync: FsyncPolicy = "interval", fsync_interval: float = 1.0,
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 dedup_window: float = DEFAULT_DEDUP_WINDOW, retention: float | None = None,
                 retention_bytes: int | None = None, max_topics: int = DEFAULT_MAX_TOPICS,
                 max_channels: int = DEFAULT_MAX_CHANNELS,
                 memory_bytes: int = DEFAULT_MEMORY_BYTES,
                 max_in_flight_per_connection: int = DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION,
                 max_total_channels: int = DEFAULT_MAX_TOTAL_CHANNELS,
                 max_total_groups: int = DEFAULT_MAX_TOTAL_GROUPS,
                 channel_idle_timeout: float | None = None,
                 max_held_pulls: int = DEFAULT_MAX_HELD_PULLS,
                 max_deferred: int = DEFAULT_MAX_DEFERRED,
                 total_memory_bytes: int = DEFAULT_TOTAL_MEMORY_BYTES,
                 ) -> None:
        if dead_letter is not None and not callable(dead_letter):
            raise TypeError(f"dead_letter must be a function of (channel, message), got "
                            f"{dead_letter!r}")
        if fsync not in ("always", "interval", "never"):
            raise ValueError(f"fsync must be 'always', 'interval' or 'never', got {fsync!r}")
        if data_dir is None and (retention is not None or retention_bytes is not None):
            raise ValueError("retention and retention_bytes bound a data directory's segment "
                             "files: give a data_dir (without one, memory_messages bounds "
                             "each topic)")
        self.broker = Broker(
            data_dir=None if data_dir is None else Path(data_dir),
            memory_messages=_count("memory_messages", memory_messages, 1),
            msg_timeout=seconds("msg_timeout", msg_timeout, above=True),
            max_attempts=_count("max_attempts", max_attempts, 0), dead_letter=dead_letter,
            fsync=fsync, fsync_interval=seconds("fsync_interval", fsync_interval, above=True),
            segment_bytes=_count("segment_bytes", segment_bytes, 4096),
            dedup_window=seconds("dedup_window", dedup_window),
            retention=None if retention is None else seconds("retention", retention,
                                                             above=True),
            retention_bytes=None if retention_bytes is None else _count(
                "retention_bytes", retention_bytes, 1),
            max_topics=_count("max_topics", max_topics, 1),
            max_channels=_count("max_channels", max_channels, 1),
            memory_bytes=_count("memory_bytes", memory_bytes, 1),
            max_in_flight_per_connection=_count("max_in_flight_per_connection",
                                                max_in_flight_per_connection, 1),
            max_total_channels=_count("max_total_channels", max_total_channels, 1),
            max_total_groups=_count("max_total_groups", max_total_groups, 1),
            channel_idle_timeout=None if channel_idle_timeout is None else seconds(
                "channel_idle_timeout", channel_idle_timeout),
            max_held_pulls=_count("max_held_pulls", max_held_pulls, 1),
            max_deferred=_count("max_deferred", max_deferred, 0),
            total_memory_bytes=_count("total_memory_bytes", total_memory_bytes, 1))
        self._endpoint: Endpoint | None = None

    @property
    def data_dir(self) -> Path | None:
        """Where the topics are kept (None: in memory)."""
        return self.broker.data_dir

    @property
    def problems(self) -> list[Problem]:
        """What recovering ``data_dir`` found wrong (a corrupt segment, named)."""
        return list(self.broker.problems)

    def attach(self, server: RemotingServer | TrioRemotingServer) -> None:
        """Serve the queue's request codes (`QueueCode`) on ``server`` and run the service's
        background task on its event loop while it serves. Attach before the server starts,
        or from its loop (a trio server's task).

        Raises:
            RuntimeError: the service is attached already (one server per service), or was
                closed.
        """
        if self._endpoint is not None:
            raise RuntimeError("a QueueService serves one server; it is attached already")
        if self.broker.closed:
            raise RuntimeError("the QueueService is closed: make a new one")
        endpoint = server.endpoint
        self._endpoint = endpoint
        register_handlers(self.broker, server)
        run = self.broker.run
        if endpoint.running and endpoint.loop_thread_id is not None:
            endpoint.call_on_loop(lambda: endpoint.run_in_background(run))
        else:
            endpoint.run_in_background(run)
        install_metrics(self.broker, endpoint)

    def close(self) -> None:
        """Save the offsets, fsync (unless ``fsync="never"``) and close the segment files of
        a service that is not serving: one never attached, or whose server never started or
        has stopped (a server that stops closes its service itself). Idempotent; also what
        leaving a ``with QueueService(...) as service:`` block does.

        Raises:
            RuntimeError: the service's server is running: shut the server down instead.
        """
        endpoint = self._endpoint
        if endpoint is not None and endpoint.running:
            raise RuntimeError("the QueueService serves a running server: shut the server "
                               "down, which closes the service")
        self.broker.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def statistics(self, topic: str | None = None, *, after: str | None = None,
                   limit: int | None = None) -> QueueStatistics:
        """Return a snapshot (taken on the server's loop thread while it runs): the
        service's totals; with ``topic``, that topic with its channels and groups; with
        ``limit``, a page of up to ``limit`` topics in name order after ``after``
        (``next_after`` names where the next starts), each with its counts. See
        `QueueStatistics`.

        Raises:
            TypeError, ValueError: ``limit`` is not an int from 1 to 1,000.
        """
        if limit is not None:
            _count("limit", limit, 1)
            if limit > MAX_TOPICS_PER_PAGE:
                raise ValueError(f"limit must be <= {MAX_TOPICS_PER_PAGE}, got {limit}")
        return self._on_loop(lambda: self.broker.statistics(topic, after=after, limit=limit))

    def delete_channel(self, topic: str, channel: str) -> bool:
        """Forget a channel with no subscriber: its position and the deliveries it had in
        flight (a later subscription to that name starts afresh, at the earliest message
        held); return False if there was none. From any thread, or the server's loop.

        Raises:
            RuntimeError: it has subscribers (delete it once they left).
        """
        return self._on_loop(lambda: self.broker.delete_channel(topic, channel))

    def delete_group(self, topic: str, group: str) -> bool:
        """Forget a group's committed offset (its next pull reads from the earliest held);
        return False if there was none. From any thread, or the server's loop."""
        return self._on_loop(lambda: self.broker.delete_group(topic, group))

    def _on_loop(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the server's loop thread while it runs (through its inbox), else
        here."""
        endpoint = self._endpoint
        if (endpoint is not None and endpoint.running and endpoint.loop_thread_id is not None
                and endpoint.loop_thread_id != threading.get_ident()):
            return endpoint.inbox.call(fn, LOOP_ANSWER_SECONDS)
        return fn()


def _count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value
