"""What one RocketMQ client knows of its cluster (Java's ``MQClientInstance``), sans-I/O.

Theory of operation. A `ClientState` holds the name servers, the routes of the topics in
use and the brokers they name, the producer groups and consumer data to announce in
heartbeats, and the fault record of the brokers. The flows of `_flows` read and update it;
a face's timer calls `ClientState.due` with ``now`` and runs the flows it names:

- ``routes`` every 30 s (``pollNameServerInterval``): every topic in use is looked up again;
- ``heartbeat`` every 30 s (``heartbeatBrokerInterval``): every broker of the routes hears
  the client's groups and subscriptions;
- ``offsets`` every 5 s (``persistConsumerOffsetInterval``), ``rebalance`` every 20 s, and
  ``locks`` every 20 s for orderly consumers (``REBALANCE_LOCK_INTERVAL``).

A route found stale (a send failed) is looked up again before the next attempt. Any thread
may read the state; updates replace whole values (a route, a queue list), so a reader sees
the old one or the new one, never half of either.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Final

from ._fault import FaultTolerance, PublishQueues

if TYPE_CHECKING:
    from ._route import TopicRoute
    from ._subscription import ConsumerData

__all__ = ["INTERVALS", "ClientState", "name_server_list"]

# seconds between runs of each periodic job (ClientConfig's defaults)
INTERVALS: Final = {"routes": 30.0, "heartbeat": 30.0, "offsets": 5.0, "rebalance": 20.0,
                    "locks": 20.0}
API_TIMEOUT: Final = 3.0  # ClientConfig.mqClientApiTimeout


def name_server_list(name_servers: str | list[str] | tuple[str, ...]) -> list[str]:
    """Return name server addresses from a list or a ``;``-separated string (``namesrvAddr``).

    Raises:
        TypeError: not a str or a list of str.
        ValueError: no address, or one that is not ``host:port``.
    """
    if isinstance(name_servers, str):
        items = [a.strip() for a in name_servers.split(";")]
    elif isinstance(name_servers, (list, tuple)):
        items = []
        for a in name_servers:
            if not isinstance(a, str):
                raise TypeError(f"name servers are 'host:port' strings, got {a!r}")
            items.append(a.strip())
    else:
        raise TypeError("name_servers is a list of 'host:port' strings or a ';'-separated "
                        f"string, got {type(name_servers).__name__}")
    items = [a for a in items if a]
    if not items:
        raise ValueError("name_servers names no address")
    for a in items:
        host, _, port = a.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"name server {a!r} is not 'host:port'")
    return items


class ClientState:
    """A client's view of its cluster: routes, brokers, groups, faults, timers."""

    def __init__(self, name_servers: list[str], client_id: str, *,
                 latency_fault: bool = True) -> None:
        self.name_servers = name_servers
        self.client_id = client_id
        self.current_name_server = random.randrange(len(name_servers))
        self.routes: dict[str, TopicRoute] = {}
        self._masters: dict[str, str] = {}  # broker name -> master, from the routes (a cache)
        self.publish: dict[str, PublishQueues] = {}
        self.stale: set[str] = set()  # topics whose route a failure made suspect
        self.faults = FaultTolerance(latency_fault)
        self.producer_groups: list[str] = []
        self.consumers: list[ConsumerData] = []
        self._next_run: dict[str, float] = {}

    # ------------------------------------------------------------------ routes

    def set_route(self, topic: str, route: TopicRoute, publish: PublishQueues | None) -> None:
        """Keep ``topic``'s new route (and the queues to send it to, for a producer)."""
        self.routes[topic] = route
        for name in route.brokers:
            addr = route.master(name)
            if addr is not None:
                self._masters[name] = addr
        if publish is not None:
            old = self.publish.get(topic)
            if old is None or old.queues != publish.queues:
                self.publish[topic] = publish
        self.stale.discard(topic)

    def master(self, broker_name: str) -> str | None:
        """Return the address of ``broker_name``'s master, from any route that names it."""
        found = self._masters.get(broker_name)
        if found is not None:
            return found
        for route in self.routes.values():
            addr = route.master(broker_name)
            if addr is not None:
                return addr
        return None

    def broker_address(self, broker_name: str) -> str | None:
        """Return the master's address, else any address of ``broker_name``."""
        for route in self.routes.values():
            addr = route.any_broker(broker_name)
            if addr is not None:
                return addr
        return None

    def broker_addresses(self) -> list[str]:
        """Return every broker address of the routes in use, once each."""
        seen: dict[str, None] = {}
        for route in list(self.routes.values()):
            for _, addr in route.broker_addresses():
                seen[addr] = None
        return list(seen)

    def masters(self) -> list[str]:
        """Return every master's address of the routes in use, once each."""
        seen: dict[str, None] = {}
        for route in list(self.routes.values()):
            for name in route.brokers:
                addr = route.master(name)
                if addr is not None:
                    seen[addr] = None
        return list(seen)

    def name_server_order(self) -> list[str]:
        """Return the name servers to try, the one that answered last first."""
        n = len(self.name_servers)
        start = self.current_name_server % n
        return [self.name_servers[(start + i) % n] for i in range(n)]

    def name_server_answered(self, addr: str) -> None:
        if addr in self.name_servers:
            self.current_name_server = self.name_servers.index(addr)

    # ------------------------------------------------------------------ timers

    def start_timers(self, now: float, jobs: list[str]) -> None:
        """Arm the periodic ``jobs`` (names of `INTERVALS`), first due one interval on."""
        for job in jobs:
            self._next_run[job] = now + INTERVALS[job]

    def due(self, now: float) -> list[str]:
        """Return the jobs due at ``now``, each re-armed one interval on."""
        ready = [job for job, at in self._next_run.items() if at <= now]
        for job in ready:
            self._next_run[job] = now + INTERVALS[job]
        return ready

    def run_soon(self, job: str, now: float) -> None:
        """Make ``job`` due at once (a member joined the group: rebalance now)."""
        if job in self._next_run:
            self._next_run[job] = now

    def run_soon_after(self, job: str, delay: float, now: float) -> None:
        """Make ``job`` due within ``delay`` (a topic no name server knew yet)."""
        if job in self._next_run:
            self._next_run[job] = min(self._next_run[job], now + delay)

    def next_due(self) -> float | None:
        """Return when the next job is due, or None if no timer is armed."""
        return min(self._next_run.values(), default=None)
