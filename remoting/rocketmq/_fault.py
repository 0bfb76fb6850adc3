"""Which queue a producer sends to: round-robin over a topic's writable queues, avoiding
brokers that were slow or failed (Java's ``MQFaultStrategy`` and
``LatencyFaultToleranceImpl``).

Theory of operation. Each send's latency (or failure) is recorded per broker with `record`;
a broker is *not available* for a while that grows with its latency: under 550 ms it stays
available, at 550 ms for 30 s, 1 s: 60 s, 2 s: 120 s, 3 s: 180 s, 15 s: 600 s, and a
failure counts as 30 s (``latencyMax`` / ``notAvailableDuration``). `select` goes round the
queues from the topic's counter and takes the first on an available broker; when none is,
it takes a queue of the least bad broker. A retry avoids the broker that just failed.
Sans-I/O: every call takes ``now`` (seconds, a monotonic clock); any thread may call it (the
few fields it changes are single assignments, and a lost update only shifts the rotation).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ._message import MessageQueue

__all__ = ["FaultTolerance", "PublishQueues"]

# MQFaultStrategy.latencyMax / notAvailableDuration, in seconds
_LATENCY_MAX: Final = (0.05, 0.1, 0.55, 1.0, 2.0, 3.0, 15.0)
_NOT_AVAILABLE: Final = (0.0, 0.0, 30.0, 60.0, 120.0, 180.0, 600.0)
FAILURE_LATENCY: Final = 30.0  # a failed send counts as this latency (isolation)


@dataclass(slots=True)
class _Fault:
    latency: float
    available_at: float


class FaultTolerance:
    """Brokers' recent latencies and when each is available again."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._faults: dict[str, _Fault] = {}
        self._worst = itertools.count(random.randrange(1 << 16))

    def record(self, broker_name: str, latency: float, failed: bool, now: float) -> None:
        """Record a send to ``broker_name`` that took ``latency`` seconds (or failed)."""
        if not self.enabled:
            return
        duration = _not_available_for(FAILURE_LATENCY if failed else latency)
        fault = self._faults.get(broker_name)
        if fault is None:
            self._faults[broker_name] = _Fault(latency, now + duration)
        else:  # a send per record: update in place
            fault.latency = latency
            fault.available_at = now + duration

    def available(self, broker_name: str, now: float) -> bool:
        """Return whether ``broker_name`` may be sent to now."""
        fault = self._faults.get(broker_name)
        return fault is None or now >= fault.available_at

    def least_bad(self, now: float) -> str | None:
        """Return one of the better half of the brokers with a record (``pickOneAtLeast``)."""
        if not self._faults:
            return None
        ranked = sorted(self._faults.items(), key=lambda item: (
            now < item[1].available_at, item[1].latency, item[1].available_at))
        half = len(ranked) // 2
        pick = 0 if half == 0 else next(self._worst) % half
        return ranked[pick][0]

    def forget(self, broker_name: str) -> None:
        """Forget ``broker_name`` (it left the topic's route)."""
        self._faults.pop(broker_name, None)


def _not_available_for(latency: float) -> float:
    if latency < _LATENCY_MAX[2]:  # the common case: available at once
        return 0.0
    for limit, duration in zip(reversed(_LATENCY_MAX), reversed(_NOT_AVAILABLE), strict=True):
        if latency >= limit:
            return duration
    return 0.0


class PublishQueues:
    """A topic's writable queues and its round-robin counter (``TopicPublishInfo``)."""

    def __init__(self, queues: list[MessageQueue]) -> None:
        self.queues = queues
        self._next = itertools.count(random.randrange(1 << 16))  # ThreadLocalIndex: random start

    def select(self, faults: FaultTolerance, last_broker: str | None, now: float
               ) -> MessageQueue:
        """Return the queue to send to next.

        ``last_broker`` is the broker the previous attempt of this send went to (avoided).
        """
        queues = self.queues
        n = len(queues)
        if faults.enabled:
            start = next(self._next)
            for i in range(n):
                queue = queues[(start + i) % n]
                if (faults.available(queue.broker_name, now)
                        and (last_broker is None or queue.broker_name != last_broker or n == 1)):
                    return queue
            fallback = faults.least_bad(now)
            if fallback is not None and fallback != last_broker:
                own = [q for q in queues if q.broker_name == fallback]
                if own:
                    return own[next(self._next) % len(own)]
            elif fallback is not None and not any(q.broker_name == fallback for q in queues):
                faults.forget(fallback)
            return queues[next(self._next) % n]
        if last_broker is not None:
            for _ in range(n):
                queue = queues[next(self._next) % n]
                if queue.broker_name != last_broker:
                    return queue
        return queues[next(self._next) % n]

    def by_key(self, key: str) -> MessageQueue:
        """Return the queue of a sharding key: the same key, the same queue, while the
        topic's queues stay the same (``SelectMessageQueueByHash``)."""
        return self.queues[abs(java_hash(key)) % len(self.queues)]


def java_hash(text: str) -> int:
    """Return Java's ``String.hashCode`` of ``text`` (over UTF-16 code units, as an int32)."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h
