"""The blocking consumers' common part: `BlockingConsumer`, their engine on a thread of its
own.

`EngineThread` runs one trio loop (``trio.run``) in a daemon thread named for the
consumer; the engine and its `TrioRemotingClient` live there. The face's methods reach it
through ``trio.from_thread`` with the loop's token (a few calls per consumer: start,
``commit``, ``seek``, ``assign``, statistics), and `shutdown` asks the engine to shut down
gracefully and joins the thread, for as long as the engine's own bounds allow
(`exit_seconds`): a loop still running then is left behind (a daemon thread), logged with
its stack (``rocketmq.consumer_still_running``), so that a shutdown never hangs its caller.
Messages reach the user's threads without a hop per message: handlers run on the engine's
worker threads, and a lite pull consumer's ``poll`` reads a thread-safe buffer.
"""

from __future__ import annotations

import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar

import trio

from .._checks import outside_trio
from .._log import log
from ._engine import SHUTDOWN_CALLS_SECONDS, statistics_of
from ._errors import RocketMQError
from ._setup import running_engine

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType

    from ._engine import ConsumerStatistics, Engine, Handler, PollBuffer
    from ._message import MessageQueue
    from ._setup import ConsumerSetup

__all__ = ["EXIT_MARGIN_SECONDS", "TRIO_CONSUMERS", "BlockingConsumer", "EngineThread",
           "exit_seconds"]

T = TypeVar("T")

# What an engine's exit may take past its handlers' ``shutdown_timeout`` and its shutdown calls
# (`SHUTDOWN_CALLS_SECONDS`): closing its client, whose endpoint joins its threads (processor
# pools, event and callback threads: 5 s each at most), and a margin for a loaded machine.
EXIT_MARGIN_SECONDS: Final = 20.0
_STACK_FRAMES: Final = 12  # of a loop thread still running, logged (the innermost)


def exit_seconds(shutdown_timeout: float) -> float:
    """How long `BlockingConsumer.shutdown` waits for the engine's loop thread to end: the
    sum of the engine's own bounds (handlers, shutdown calls, client close)."""
    return shutdown_timeout + SHUTDOWN_CALLS_SECONDS + EXIT_MARGIN_SECONDS

# what a blocking consumer's methods are in trio code (`blocking_call`)
TRIO_CONSUMERS = ("remoting.rocketmq.open_push_consumer() or open_lite_pull_consumer() and "
                  "their methods, awaited")


class EngineThread:
    """One trio loop in a thread, running ``main(started)`` until it returns."""

    def __init__(self, name: str,
                 main: Callable[[Callable[[trio.lowlevel.TrioToken], None]], Awaitable[None]]
                 ) -> None:
        self._name = name
        self._main = main
        self._token: trio.lowlevel.TrioToken | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread; return once ``main`` reported it started.

        Raises:
            whatever ``main`` raised before it started.
        """
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error

    def _started(self, token: trio.lowlevel.TrioToken) -> None:
        self._token = token
        self._ready.set()

    def _run(self) -> None:
        try:
            trio.run(self._main, self._started)
        except BaseException as exc:  # reported to start(), or logged here once it started
            self._error = exc
            if self._ready.is_set():
                log.error("rocketmq.consumer_failed", thread=self._name, error=repr(exc)[:300],
                          exc_info=exc)
        finally:
            self._ready.set()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def error(self) -> BaseException | None:
        """What ended the loop, if it failed."""
        return self._error

    def _check(self) -> trio.lowlevel.TrioToken:
        if self._token is None or not self.alive:
            raise RocketMQError("the consumer is not running: call start() or use it in a "
                                "with block")
        if threading.current_thread() is self._thread:
            raise RuntimeError("this blocking call was made from the consumer's own loop "
                               "thread; call it from another thread")
        return self._token

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await fn(*args)`` on the loop; return its result (from another thread)."""
        return trio.from_thread.run(fn, *args, trio_token=self._check())

    def call_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the loop; return its result (from another thread)."""
        return trio.from_thread.run_sync(fn, *args, trio_token=self._check())

    def soon(self, fn: Callable[[], object]) -> None:
        """Run ``fn()`` on the loop soon, without waiting (any thread; no-op once ended)."""
        token = self._token
        if token is None:
            return
        try:
            token.run_sync_soon(fn)
        except trio.RunFinishedError:
            pass

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the loop to end, up to ``timeout`` seconds (None: as long as it takes);
        return True if it has ended (or is this thread)."""
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def stack(self) -> str:
        """The loop thread's innermost frames now, formatted ("" if it is not running)."""
        thread = self._thread
        frame = None if thread is None else sys._current_frames().get(thread.ident or -1)
        if frame is None:
            return ""
        return "".join(traceback.format_stack(frame)[-_STACK_FRAMES:])


class BlockingConsumer:
    """What `PushConsumer` and `LitePullConsumer` share: their engine on an `EngineThread`,
    started and shut down once, and the calls that hop to its loop."""

    _THREAD: str = "rocketmq-consumer"

    def __init__(self, setup: ConsumerSetup, *, handler: Handler | None = None,
                 buffer: PollBuffer | None = None) -> None:
        self._setup = setup
        self._handler = handler
        self._buffer = buffer
        self._thread: EngineThread | None = None
        self._engine: Engine | None = None
        self._stop: trio.Event | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def group(self) -> str:
        """The consumer group."""
        return self._setup.settings.group

    @property
    def client_id(self) -> str:
        """This member's client id (``ip@pid#n``)."""
        return self._setup.state.client_id

    def start(self) -> Self:
        """Start consuming (idempotent); return once the first rebalance took queues (none
        yet if no name server answered: it keeps asking).

        Raises:
            RocketMQError: the consumer was shut down before.
        """
        outside_trio(f"{type(self).__name__}.start (or entering its with block)",
                     TRIO_CONSUMERS)
        with self._lock:
            if self._thread is not None:
                return self
            if self._closed:
                raise RocketMQError("the consumer was shut down: make a new one")
            thread = EngineThread(f"{self._THREAD}-{self.group}", self._main)
            thread.start()
            self._thread = thread
        return self

    async def _main(self, started: Callable[[trio.lowlevel.TrioToken], None]) -> None:
        async with running_engine(self._setup, handler=self._handler,
                                  buffer=self._buffer) as engine:
            self._engine = engine
            self._stop = trio.Event()
            started(trio.lowlevel.current_trio_token())
            await self._stop.wait()

    def shutdown(self) -> None:
        """Stop pulling, let running handlers finish, store the offsets and unregister
        (idempotent; any thread but the consumer's own).

        Returns within ``shutdown_timeout`` + 30 s at most (`exit_seconds`: the handlers',
        the shutdown calls' and the client's own bounds, and a margin). Should the consumer's
        loop thread still run then (a bug), it is left behind as a daemon thread, logged
        with its stack as ``rocketmq.consumer_still_running``; the consumer is shut down for
        its caller either way (it cannot be started again).
        """
        outside_trio(f"{type(self).__name__}.shutdown (or leaving its with block)",
                     TRIO_CONSUMERS)
        with self._lock:
            thread, self._thread = self._thread, None
            self._closed = True
        if thread is None:
            return
        if self._stop is not None:
            thread.soon(self._stop.set)
        seconds = exit_seconds(self._setup.settings.shutdown_timeout)
        if not thread.join(seconds):
            log.warning("rocketmq.consumer_still_running", group=self.group,
                        client_id=self.client_id, seconds=seconds, stack=thread.stack())

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.shutdown()

    def _running(self) -> tuple[EngineThread, Engine]:
        outside_trio(f"{type(self).__name__}'s methods", TRIO_CONSUMERS)
        thread, engine = self._thread, self._engine
        if thread is None or engine is None:
            raise RocketMQError("the consumer is not running: call start() or use it in a "
                                "with block")
        return thread, engine

    def assignment(self) -> list[MessageQueue]:
        """Return the queues this member reads now (its share of the group's)."""
        thread, engine = self._running()
        return thread.call_sync(lambda: sorted(engine.assigned))

    def statistics(self) -> ConsumerStatistics:
        """Return the consumer's counters, queues and offsets."""
        thread, engine = self._running()
        return thread.call_sync(statistics_of, engine)
