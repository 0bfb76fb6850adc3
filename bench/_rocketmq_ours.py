"""Our side of bench/rocketmq.py: one function per case, measured as RmqPeer.java's bench
modes measure Java's (a warm-up of ``params.warmup`` messages first; the client process's CPU
over the timed part, all its threads: ``time.process_time``).

The blocking face throughout (Java's client is blocking and callback-based): sends on the
thread-driven client from the calling thread (``send_async``: from its callbacks), the push
consumer's engine on its loop thread with handlers on worker threads.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from remoting.rocketmq import Message, Producer, PushConsumer


class CaseParams(Protocol):
    """What bench/rocketmq.py's CaseParams gives a case (not imported: it imports us)."""

    name_servers: list[str]
    topic: str
    group: str
    messages: int
    warmup: int
    size: int
    in_flight: int
    batch: int

__all__ = ["consume", "latency", "send_async", "send_batch", "send_sync"]


def _send_some(producer: Producer, p: CaseParams, n: int, how: str) -> int:
    body = b"x" * p.size
    errors = 0
    if how == "sync":
        for _ in range(n):
            producer.send(p.topic, body, tags="bench")
    elif how == "batch":
        for i in range(0, n, p.batch):
            producer.send_batch(p.topic, [body] * min(p.batch, n - i), tags="bench")
    else:
        window = threading.Semaphore(p.in_flight)
        finished = threading.Semaphore(0)
        failed = [0]

        def done(future: Any) -> None:
            if future.exception() is not None:
                failed[0] += 1
            window.release()
            finished.release()

        for _ in range(n):
            window.acquire()
            producer.send_async(p.topic, body, tags="bench", callback=done)
        for _ in range(n):
            finished.acquire()
        errors = failed[0]
    return errors


def _send(p: CaseParams, how: str) -> dict[str, Any]:
    with Producer(p.name_servers, group=p.group) as producer:
        _send_some(producer, p, p.warmup, how)
        c0, t0 = time.process_time(), time.perf_counter()
        errors = _send_some(producer, p, p.messages, how)
        t1, c1 = time.perf_counter(), time.process_time()
    return {"messages": p.messages, "seconds": t1 - t0, "rate": p.messages / (t1 - t0),
            "cpu_seconds": c1 - c0, "errors": errors}


def send_sync(p: CaseParams) -> dict[str, Any]:
    """Sequential synchronous sends."""
    return _send(p, "sync")


def send_async(p: CaseParams) -> dict[str, Any]:
    """Asynchronous sends, ``p.in_flight`` at once."""
    return _send(p, "async")


def send_batch(p: CaseParams) -> dict[str, Any]:
    """Synchronous batches of ``p.batch``."""
    return _send(p, "batch")


def consume(p: CaseParams) -> dict[str, Any]:
    """A push consumer of a new group from the first offset of a pre-filled topic."""
    n = p.messages
    count = 0
    first = last = 0.0
    lock = threading.Lock()
    everything = threading.Event()

    def handler(message: Message) -> None:
        nonlocal count, first, last
        with lock:
            count += 1
            if count == 1:
                first = time.perf_counter()
            if count == n:
                last = time.perf_counter()
                everything.set()

    c0, t0 = time.process_time(), time.perf_counter()
    with PushConsumer(p.name_servers, p.group, p.topic, handler=handler, consume_from="first"):
        complete = everything.wait(300)
        c1 = time.process_time()
    result: dict[str, Any] = {"messages": n, "received": count, "complete": complete,
                              "cpu_seconds": c1 - c0}
    if complete:
        result.update(seconds=last - first, rate=(n - 1) / (last - first),
                      seconds_from_start=last - t0, rate_from_start=n / (last - t0))
    return result


def latency(p: CaseParams) -> dict[str, Any]:
    """One message at a time, from the start of its send to the consumer's handler."""
    arrivals: list[int] = []
    arrived = threading.Condition()

    def handler(message: Message) -> None:
        with arrived:
            arrivals.append(int(message.properties["seq"]))
            arrived.notify_all()

    def wait_for(seq: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with arrived:
            while seq not in arrivals:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                arrived.wait(remaining)
            arrivals.clear()
            return True

    body = b"x" * p.size
    lat: list[float] = []
    lost = 0
    with PushConsumer(p.name_servers, p.group, p.topic, handler=handler,
                      consume_from="last") as _, Producer(p.name_servers) as producer:
        seq = 0
        while True:  # until the consumer holds its queues
            seq += 1
            producer.send(p.topic, body, tags="bench", properties={"seq": str(seq)})
            if wait_for(seq, 1.0):
                break
        c0 = 0.0
        for i in range(-p.warmup, p.messages):
            if i == 0:
                c0 = time.process_time()
            seq += 1
            t0 = time.perf_counter()
            producer.send(p.topic, body, tags="bench", properties={"seq": str(seq)})
            ok = wait_for(seq, 10.0)
            t1 = time.perf_counter()
            if not ok:
                lost += 1
            if i >= 0:
                lat.append((t1 - t0) * 1000)
        c1 = time.process_time()
    lat.sort()
    n = len(lat)
    return {"messages": n, "p50_ms": lat[int(0.50 * (n - 1))], "p99_ms": lat[int(0.99 * (n - 1))],
            "max_ms": lat[-1], "mean_ms": sum(lat) / n, "lost": lost, "cpu_seconds": c1 - c0}
