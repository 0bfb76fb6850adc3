"""Point-to-point sends rotate over the consumers of an address round-robin, wherever they
live: 1,000 sends over consumers in three processes reach them 334/333/333, and a publish
after them reaches each process once, after what it was sent."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from remoting import RemotingServer
from remoting.bus import BusClient, EventBus
from tests.processes import Proc


@pytest.fixture
def three_consumer_processes(blocking_server: RemotingServer, bus: EventBus
                             ) -> Iterator[list[Proc]]:
    procs: list[Proc] = []
    try:
        for name in ("p0", "p1", "p2"):
            procs.append(Proc(blocking_server.addr, "work", name,
                              module="tests.remoting.bus.consumer_process"))
        for proc, name in zip(procs, ("p0", "p1", "p2"), strict=True):
            proc.expect(f"ready {name}", timeout=60)
        yield procs
    finally:
        for proc in procs:
            proc.stop()


def test_a_thousand_sends_reach_three_processes_334_333_333(
        three_consumer_processes: list[Proc], bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    sender = bus_clients()
    assert bus.statistics().remote_consumers == 3
    for i in range(1000):
        sender.send("work", str(i).encode())
    sender.publish("work", b"count?")
    counts = sorted(int(proc.expect(r"count p\d (\d+)", timeout=60).group(1))
                    for proc in three_consumer_processes)
    assert counts == [333, 333, 334]
    assert bus.statistics().delivered == 0  # all went to the clients, none to the server
