"""A blocking consumer's `shutdown` returns once the engine's own bounds have passed, even if
its loop thread does not end (a bug): that thread is left behind, logged with its stack, and
the caller goes on. The loop here is a real trio loop in a real thread whose main task waits,
after reporting started, on a thread that cancellation cannot stop."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import trio

from remoting.rocketmq import _blocking_consumer
from remoting.rocketmq._blocking_consumer import BlockingConsumer, EngineThread
from remoting.rocketmq._setup import consumer_setup
from tests.hangs import HANG_SECONDS, returns_within
from tests.logs import capture_logs

if TYPE_CHECKING:
    from collections.abc import Callable

    import pytest


class _StuckConsumer(BlockingConsumer):
    """A consumer whose loop, once started, ignores `shutdown` until ``release`` is set."""

    def __init__(self, release: threading.Event) -> None:
        # a name server nobody listens on: this loop never calls it
        super().__init__(consumer_setup("127.0.0.1:1", "stuck", {"t": "*"}, push=True,
                                        consume_from="last", shutdown_timeout=0.0))
        self.release = release

    async def _main(self, started: Callable[[trio.lowlevel.TrioToken], None]) -> None:
        self._stop = trio.Event()
        started(trio.lowlevel.current_trio_token())
        await trio.to_thread.run_sync(self.release.wait)  # not cancellable


def test_shutdown_returns_and_logs_the_stack_of_a_loop_that_does_not_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the engine's bounds, made short (their sum is what shutdown waits for)
    monkeypatch.setattr(_blocking_consumer, "SHUTDOWN_CALLS_SECONDS", 0.0)
    monkeypatch.setattr(_blocking_consumer, "EXIT_MARGIN_SECONDS", 0.2)
    release = threading.Event()
    consumer = _StuckConsumer(release).start()
    loop = consumer._thread
    assert isinstance(loop, EngineThread)
    try:
        with capture_logs() as events:
            returns_within(HANG_SECONDS, consumer.shutdown)
        assert loop.alive and not release.is_set()  # it returned while the loop still ran
        [event] = [e for e in events if e["event"] == "rocketmq.consumer_still_running"]
        assert event["log_level"] == "warning" and event["group"] == "stuck"
        assert event["seconds"] == 0.2
        assert "trio.run(" in event["stack"]  # where the loop thread was (its trio loop)
        consumer.shutdown()  # idempotent: returns at once
    finally:
        release.set()
    assert loop.join(HANG_SECONDS)  # released, it ends by itself
