"""`QueueCalls`: the queue service's calls the Spark source and sink make, from the driver
or an executor, over the process's one client (`get_client`).

Every call here may be repeated safely: reading offsets, a pull from an explicit offset, a
commit of a group's offset, and a publish tagged with an idempotence key (the service answers
a repeat with the first one's offsets). So when the service cannot be reached (refused, a
connection lost, no answer in time, or draining), the call tries the next address, and once
every address failed it waits (a backoff of 0.1 s doubling to 2 s) and goes round again,
for at most ``reconnect_timeout`` seconds: a queue service restarted on its data directory
costs the query a pause, not a failure. A refusal by the service (`QueueError`) is an answer
and is never retried.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Final, TypeVar

from codec import ResponseCode

from ..._errors import RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError
from ...queue._client import BlockingQueueClient
from ...queue._errors import QueueError
from ...queue._requests import Published, publish_request, published
from .._client import get_client
from .._fleet import log

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...queue._messages import PulledRecords
    from ...queue._stats import TopicOffsets
    from ._options import QueueOptions

__all__ = ["QueueCalls"]

T = TypeVar("T")

UNREACHABLE: Final = (RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError)
FIRST_BACKOFF: Final = 0.1
MAX_BACKOFF: Final = 2.0


class QueueCalls:
    """The queue service's calls for one topic, retried while the service is unreachable
    (see the module docstring). Picklable: the client is this process's, found on first use.
    """

    def __init__(self, options: QueueOptions) -> None:
        self.options = options
        self._current = 0  # the address that answered last

    def __getstate__(self) -> dict[str, object]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.options = state["options"]  # type: ignore[assignment]
        self._current = 0

    @property
    def topic(self) -> str:
        return self.options.topic

    def offsets(self, offset: int | None = None, *, missing_ok: bool = True
                ) -> TopicOffsets | None:
        """Return the topic's offsets, ``readable`` counted from ``offset`` (None: the topic
        does not exist yet, with ``missing_ok``).

        Raises:
            QueueError: the topic does not exist (without ``missing_ok``).
        """
        def call(q: BlockingQueueClient, addr: str) -> TopicOffsets | None:
            try:
                return q.offsets(addr, self.topic, offset=offset, timeout=self.options.timeout)
            except QueueError as exc:
                if missing_ok and exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    return None
                raise
        return self._retried("offsets", call)

    def pull(self, offset: int, max_messages: int, max_wait: float = 0.0,
             incarnation: str | None = None) -> PulledRecords:
        """Return the records from ``offset`` on (up to ``max_messages``; held up to
        ``max_wait`` seconds while there are none), as the service sent them; with
        ``incarnation``, only from that log.

        Raises:
            TypeError, ValueError: a bad argument (nothing is sent).
            QueueError: the topic does not exist, ``offset`` is past its end, or the topic
                is another log than ``incarnation`` (PULL_OFFSET_MOVED).
        """
        def call(q: BlockingQueueClient, addr: str) -> PulledRecords:
            return q.pull_records(addr, self.topic, offset=offset, max_messages=max_messages,
                                  max_wait=max_wait, incarnation=incarnation,
                                  timeout=max_wait + self.options.timeout)
        return self._retried("pull", call)

    def commit(self, group: str, offset: int) -> None:
        """Set ``group``'s offset to ``offset``, once (no retry: the next commit moves it)."""
        q = BlockingQueueClient(get_client(log_level=logging.WARNING))
        q.commit(self.options.addresses[self._current], self.topic, group, offset,
                 timeout=self.options.timeout)

    def publish(self, contents: list[tuple[bytes, dict[str, str]]], key: str) -> Published:
        """Append ``contents`` (bodies and headers) in one publish tagged with ``key``.

        Raises:
            QueueError: the service refused it (a full topic without a data directory:
                `QueueFullError`).
        """
        request, _ = publish_request(self.topic, contents, 0.0, key)

        def call(q: BlockingQueueClient, addr: str) -> Published:
            return published(addr, q.client.invoke_sync(addr, request, self.options.timeout))
        return self._retried("publish", call)

    def _retried(self, what: str, call: Callable[[BlockingQueueClient, str], T]) -> T:
        q = BlockingQueueClient(get_client(log_level=logging.WARNING))
        addresses = self.options.addresses
        deadline = time.monotonic() + self.options.reconnect_timeout
        backoff = FIRST_BACKOFF
        failures = 0
        while True:
            for step in range(len(addresses)):
                index = (self._current + step) % len(addresses)
                try:
                    result = call(q, addresses[index])
                except UNREACHABLE as exc:
                    failures += 1
                    if failures == 1:
                        log.warning("queue.call_retried", call=what, addr=addresses[index],
                                    error=type(exc).__name__,
                                    retrying_for=self.options.reconnect_timeout)
                    last = exc
                    continue
                self._current = index
                if failures:
                    log.info("queue.call_recovered", call=what, addr=addresses[index],
                             failures=failures)
                return result
            left = deadline - time.monotonic()
            if left <= 0:
                raise last
            threading.Event().wait(min(backoff, left))  # a backoff, not a synchronisation
            backoff = min(MAX_BACKOFF, backoff * 2)
