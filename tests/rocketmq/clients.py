"""Helpers of the live RocketMQ tests: a handler that collects what it gets."""

from __future__ import annotations

import threading

from remoting.rocketmq import Message

WAIT = 60.0  # seconds: generous, the machine is shared


class Collector:
    """A handler that keeps what it gets and says when it has ``n``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.messages: list[Message] = []
        self._lock = threading.Lock()
        self.done = threading.Event()

    def __call__(self, message: Message) -> None:
        with self._lock:
            self.messages.append(message)
            if len(self.messages) >= self.n:
                self.done.set()

    def wait(self, timeout: float = WAIT) -> list[Message]:
        """Return the messages once there are ``n``; fail the test after ``timeout``."""
        assert self.done.wait(timeout), f"got {len(self.messages)} of {self.n}"
        return self.messages
