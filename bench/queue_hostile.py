"""What hostile loads on a queue service cost the other connections (127.0.0.1, bounded).

    .venv/bin/python bench/queue_hostile.py                        # every scenario
    .venv/bin/python bench/queue_hostile.py --scenario pulls       # one of them
    .venv/bin/python bench/queue_hostile.py --root ../other-checkout   # its service's code

Every connection of a server shares its event loop, so a hostile load shows as the latency
of a *victim*: another connection (its own client, in a thread) asking the service for a
topic's offsets over and over. Each scenario reports the victim's longest wait while the
load acts, and what the load itself saw:

- ``pulls``: 98,304 pulls held behind a deferred message (six connections of 16,384, each
  under the per-connection cap), then 20 publishes to the topic: each publish's latency, and
  the victim's longest wait meanwhile (each publish used to wake and hold again every pull).
- ``channels``: 120,000 channels made by subscribing once to each (120 topics of 1,000),
  then the service idle for 6 s (the victim's longest wait: housekeeping and the timer
  walked every channel), then 5 STATS requests (their bytes, and the victim's longest wait).
- ``close``: one connection with 1,024 subscriptions of 64 credits (65,536 deliveries in
  flight on one channel) closes: the victim's longest wait while the service gives them back
  (each subscription's end walked the channel's whole in-flight table).

The service is a ``remoting queue`` process run from ``--root`` (default: this checkout),
so the same loads can be measured against another checkout's code ("before"). Settings that
code does not know are left out; settings that would refuse the load (the bounds added
against it) are raised to let it in, and said. One run each: the figures are indicative on a
busy machine (take the median of several runs on a quiet one).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]

import trio  # noqa: E402

from remoting import RemotingClient, TrioRemotingClient  # noqa: E402
from remoting.queue import BlockingQueueClient, QueueClient  # noqa: E402
from remoting.queue._requests import offsets_request, pull_request  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class Service:
    """A ``remoting queue`` process run from ``root``, with the options it knows."""

    def __init__(self, root: Path, **options: object) -> None:
        env = dict(os.environ, PYTHONPATH=str(root))
        known = subprocess.run([sys.executable, "-m", "remoting", "queue", "--help"], cwd=root,
                               env=env, capture_output=True, text=True, check=True).stdout
        args = [sys.executable, "-m", "remoting", "queue", "--port", "0"]
        self.left_out = []
        for name, value in options.items():
            flag = "--" + name.replace("_", "-")
            if flag in known:
                args += [flag, str(value)]
            else:
                self.left_out.append(flag)
        self.popen = subprocess.Popen(args, cwd=root, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True)
        assert self.popen.stdout is not None
        line = self.popen.stdout.readline()
        match = re.search(r"serving queue on (\S+) \(pid (\d+)\)", line)
        if match is None:
            self.stop()
            raise RuntimeError(f"the service did not start: {line!r}")
        self.addr = match.group(1)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


class Victim:
    """Another connection asking the service for a topic's offsets over and over."""

    def __init__(self, addr: str) -> None:
        self.addr = addr
        self.client = RemotingClient().start()
        QueueClient(self.client).create_topic(addr, "victim")
        self.samples: list[tuple[float, float]] = []  # (start, latency)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        request = offsets_request("victim", None)
        while not self._stop.is_set():
            began = time.monotonic()
            self.client.invoke_sync(self.addr, request, 60.0)
            self.samples.append((began, time.monotonic() - began))
            self._stop.wait(0.005)

    def longest(self, since: float, until: float) -> float:
        """The longest wait of a ping that overlapped ``[since, until]``."""
        waits = [lat for began, lat in list(self.samples)
                 if began <= until and began + lat >= since]
        return max(waits, default=0.0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(70)
        self.client.shutdown()


def _wait_held(q: BlockingQueueClient, addr: str, count: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    held = 0
    while time.monotonic() < deadline:
        held = q.statistics(addr).held_pulls
        if held >= count:
            break
        time.sleep(0.2)
    return held


def pulls(root: Path, connections: int = 6, per_connection: int = 16_384,
          publishes: int = 20) -> dict[str, object]:
    held_total = connections * per_connection
    service = Service(root, max_held_pulls=held_total)
    clients = [RemotingClient().start() for _ in range(connections + 1)]
    q = QueueClient(clients[-1])
    try:
        q.publish(service.addr, "t", b"later", defer=600.0)
        victim = Victim(service.addr)
        requests = [pull_request("t", None, 0, 1, 300.0) for _ in range(per_connection)]
        holders = [threading.Thread(target=c.invoke_many, args=(service.addr, requests, 400.0),
                                    kwargs={"limit": per_connection}, daemon=True)
                   for c in clients[:connections]]
        for thread in holders:
            thread.start()
        held = _wait_held(q, service.addr, held_total, 300)
        latencies = []
        began = time.monotonic()
        for i in range(publishes):
            start = time.monotonic()
            q.publish(service.addr, "t", b"now %d" % i, timeout=120.0)
            latencies.append(time.monotonic() - start)
        victim.close()
        victim_wait = victim.longest(began, time.monotonic())
        return {"held": held, "publish median ms": round(statistics.median(latencies) * 1000, 1),
                "publish max ms": round(max(latencies) * 1000, 1),
                "victim longest wait ms": round(victim_wait * 1000, 1),
                "left out": service.left_out}
    finally:
        service.stop()
        for client in clients:
            client.shutdown()


async def _make_channels(addr: str, topics: int, per_topic: int) -> float:
    client = TrioRemotingClient()
    async with trio.open_nursery() as nursery:
        await nursery.start(client.serve)
        q = QueueClient(client)
        began = time.monotonic()
        for t in range(topics):
            await q.create_topic(addr, f"t{t}")

            async def one(name: str, topic: str = f"t{t}") -> None:
                # a long timeout: a service that stalls makes this slow, not failed
                async with q.subscribe(addr, topic, name, credits=1, timeout=300.0):
                    pass

            for first in range(0, per_topic, 250):  # 250 subscriptions at once
                async with trio.open_nursery() as batch:
                    for c in range(first, min(first + 250, per_topic)):
                        batch.start_soon(one, f"c{c}")
        made = time.monotonic() - began
        nursery.cancel_scope.cancel()
    return made


def channels(root: Path, topics: int = 120, per_topic: int = 1_000) -> dict[str, object]:
    total = topics * per_topic
    service = Service(root, max_total_channels=total, max_channels=per_topic)
    try:
        made = trio.run(_make_channels, service.addr, topics, per_topic)
        with RemotingClient() as client:
            victim = Victim(service.addr)
            idle_began = time.monotonic()
            time.sleep(6.0)  # idle: what housekeeping and the timer cost the victim
            idle_ended = began = time.monotonic()
            sizes = []
            for _ in range(5):
                answer = client.invoke_sync(service.addr, _stats(), 120.0)
                sizes.append(len(answer.body or b""))
            ended = time.monotonic()
            stats_seconds = ended - began
            victim.close()  # its last ping answered: a wait still going on is counted
            idle_wait = victim.longest(idle_began, idle_ended)
            stats_wait = victim.longest(began, ended)
        return {"channels": total, "made in s": round(made, 1),
                "victim longest wait idle ms": round(idle_wait * 1000, 1),
                "STATS bytes (each)": sizes[0], "5 STATS s": round(stats_seconds, 2),
                "victim longest wait during STATS ms": round(stats_wait * 1000, 1),
                "left out": service.left_out}
    finally:
        service.stop()


def _stats():  # type: ignore[no-untyped-def]
    from codec import RemotingCommand
    from remoting.queue import QueueCode

    return RemotingCommand.create_request(QueueCode.STATS)


async def _hold(addr: str, subscriptions: int, credits: int) -> None:
    """(In a child process.) Subscribe ``subscriptions`` times on one connection, take
    ``credits`` deliveries each, say ``ready`` and wait to be killed."""
    client = TrioRemotingClient()
    async with trio.open_nursery() as nursery:
        await nursery.start(client.serve)
        q = QueueClient(client)
        left = [subscriptions]
        all_in = trio.Event()

        async def subscribe() -> None:
            async with q.subscribe(addr, "work", "c", credits=credits) as sub:
                for _ in range(credits):
                    await sub.receive()
                left[0] -= 1
                if not left[0]:
                    all_in.set()
                await trio.sleep_forever()

        for _ in range(subscriptions):
            nursery.start_soon(subscribe)
        await all_in.wait()
        print("ready", flush=True)
        await trio.sleep_forever()


def close(root: Path, subscriptions: int = 1_024, credits: int = 64) -> dict[str, object]:
    service = Service(root, memory_messages=subscriptions * credits)
    holder = None
    try:
        with RemotingClient() as client:
            q = QueueClient(client)
            for _ in range(subscriptions * credits // 16_384):
                q.publish_many(service.addr, "work", [b"x"] * 16_384, timeout=60.0)
        holder = subprocess.Popen(
            [sys.executable, __file__, "--hold", service.addr, str(subscriptions),
             str(credits)], stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "ready":
            raise RuntimeError("the subscriptions did not get their deliveries")
        victim = Victim(service.addr)
        time.sleep(0.5)
        began = time.monotonic()
        holder.kill()  # the connection breaks: every subscription ends at once
        holder.wait(30)
        time.sleep(1.0)  # the service gives the deliveries back meanwhile
        victim.close()  # its last ping answered: a wait still going on is counted
        wait = victim.longest(began, time.monotonic())
        return {"in flight": subscriptions * credits,
                "victim longest wait ms": round(wait * 1000, 1)}
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
            holder.wait()
        service.stop()


SCENARIOS = {"pulls": pulls, "channels": channels, "close": close}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the checkout whose service code to run (default: this one)")
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--hold", nargs=3, metavar=("ADDR", "SUBSCRIPTIONS", "CREDITS"),
                        help=argparse.SUPPRESS)  # the close scenario's child process
    args = parser.parse_args()
    if args.hold:
        trio.run(_hold, args.hold[0], int(args.hold[1]), int(args.hold[2]))
        return
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    commit = subprocess.run(["git", "-C", str(args.root), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"service code: {args.root} ({commit}), {time.strftime('%Y-%m-%d %H:%M')}, "
          f"load {os.getloadavg()[0]:.1f}")
    for name in names:
        result = SCENARIOS[name](args.root)
        print(f"{name}: " + ", ".join(f"{k}: {v}" for k, v in result.items()), flush=True)


if __name__ == "__main__":
    main()
