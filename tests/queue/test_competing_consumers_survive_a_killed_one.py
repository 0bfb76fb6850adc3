"""Competing consumers in processes (NSQ's channel): 10,000 messages, three consumers, one
SIGKILLed mid-stream; every message is acknowledged, the dead one's unacknowledged deliveries
(those it printed and those still in its buffers) are redelivered to the others with
attempts 2, and none is lost."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from remoting import RemotingClient, RemotingServer, ServerConfig
from remoting.queue import QueueClient, QueueService

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = 10_000


class Consumer:
    """``tests/queue/consumer.py`` in a child process; its lines read with deadlines."""

    def __init__(self, addr: str, credits: int) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "tests.queue.consumer", addr, "work", "workers",
             str(credits)], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.got: list[tuple[int, int]] = []
        self._pumping = threading.Thread(target=self._pump, daemon=True)
        self._pumping.start()
        assert self.lines.get(timeout=30).strip() == "subscribed"

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line)

    def read(self, until: int | None = None, timeout: float = 30.0) -> None:
        """Take the lines printed so far (at least ``until`` in all, waiting for them)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                wait = 0 if until is None or len(self.got) >= until else max(
                    0.0, deadline - time.monotonic())
                line = self.lines.get(timeout=wait) if wait else self.lines.get_nowait()
            except queue.Empty:
                assert until is None or len(self.got) >= until, "the consumer fell silent"
                return
            _, offset, attempts = line.split()
            self.got.append((int(offset), int(attempts)))

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """End the process; every line it printed is in ``lines`` then (its pipe was read
        to its end)."""
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        self.popen.wait(20)
        self._pumping.join(20)
        assert self.popen.stdout is not None
        self.popen.stdout.close()


@pytest.fixture
def work_queue() -> Iterator[tuple[QueueService, RemotingServer]]:
    service = QueueService(msg_timeout=60.0)
    server = RemotingServer(ServerConfig())
    service.attach(server)
    server.start()
    try:
        yield service, server
    finally:
        server.shutdown()


def test_a_killed_consumers_deliveries_go_to_the_others_with_attempt_two(
        work_queue: tuple[QueueService, RemotingServer]) -> None:
    service, server = work_queue
    client = RemotingClient().start()
    q = QueueClient(client)
    q.create_topic(server.addr, "work")
    consumers = [Consumer(server.addr, credits=64) for _ in range(3)]  # all subscribed first
    survivors, doomed = consumers[:2], consumers[2]
    try:
        for first in range(0, MESSAGES, 500):
            q.publish_many(server.addr, "work", [b"%d" % i for i in range(first, first + 500)])
        client.shutdown()
        doomed.read(until=300)  # mid-stream
        doomed.stop(signal.SIGKILL)
        doomed.read()
        deadline = time.monotonic() + 90
        while True:  # bounded: the acknowledgements come from other processes
            channel = service.statistics("work").topics["work"].channels["workers"]
            if channel.finished == MESSAGES:
                break
            assert time.monotonic() < deadline, f"stuck at {channel}"
            time.sleep(0.05)  # polling other processes' progress
        for survivor in survivors:  # what they printed, to the last line
            survivor.stop()
            survivor.read()
    finally:
        client.shutdown()
        for consumer in consumers:
            consumer.stop()
    assert (channel.depth, channel.in_flight, channel.dead_lettered) == (0, 0, 0)
    assert channel.finished == MESSAGES  # every message acknowledged, none lost
    doomed_got = {offset for offset, _ in doomed.got}
    firsts = {o for s in survivors for o, a in s.got if a == 1}
    redelivered = {(o, a) for s in survivors for o, a in s.got if a > 1}
    assert redelivered, "the killed consumer held nothing unacknowledged"
    assert {a for _, a in redelivered} == {2}  # one failed delivery each: the killed one's
    assert not {o for o, _ in redelivered} & firsts  # first delivered to the killed one
    assert firsts | doomed_got | {o for o, _ in redelivered} == set(range(MESSAGES))
    assert channel.delivered == MESSAGES + len(redelivered)
