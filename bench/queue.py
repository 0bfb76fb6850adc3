"""Queue service benchmark: deliveries, publishes and held pulls against invoke_many, one run.

    .venv/bin/python bench/queue.py                  # 100,000 messages per case
    .venv/bin/python bench/queue.py --messages 5000  # a quick check that it runs
    .venv/bin/python bench/queue.py --json bench/results/queue.json

Method: one server process (spawned; pinned to the first CPU when there are two) serves an
async echo processor and a `QueueService` (in memory) on one port; the client (this process,
pinned to the second CPU) uses one trio-native client. Every message is 128 bytes. Cases:
- ``invoke_many``: N echo requests, 64 in flight (the pipelined request rate: the baseline);
- ``publish_many``: N messages in batches of 256 (one frame per batch);
- ``subscribe credits=64`` and ``credits=256``: N messages published beforehand, consumed and
  acknowledged by one subscription (acknowledgements grouped: half the credits or 50 ms);
  ``blocking subscribe``: the same with a blocking client (its own threads) and 64 credits;
- ``pull after publish``: a pull held on an empty topic, then a publish to it: the time from
  the publish's start to the pull's answer, 200 rounds (p50, p99).
Each rate comes with the CPU time per message of the server and of the client (from
/proc/<pid>/task/*/schedstat, which holds up when other processes compete) and its ratio to
invoke_many's rate from the same run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]

import trio  # noqa: E402

BODY = bytes(128)
ECHO = 1
BATCH = 256
CHUNK = 10_000  # invoke_many requests per call
PULL_ROUNDS = 200


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` so far (seconds)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def serve(cpu: int | None, conn: Any) -> None:
    """The server process: an async echo processor and a queue service on one port."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    from processors import AsyncEchoProcessor
    from remoting import RemotingServer, ServerConfig
    from remoting.queue import QueueService

    server = RemotingServer(ServerConfig(telemetry=False))
    server.register_processor(ECHO, AsyncEchoProcessor())
    QueueService(memory_messages=10_000_000).attach(server)
    server.start()
    conn.send((server.addr, os.getpid()))
    conn.recv()  # until the client is done
    server.shutdown()


class Meter:
    """Wall time and both processes' CPU over one case."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid

    def __enter__(self) -> Meter:
        self.wall = time.perf_counter()
        self.server = cpu_seconds(self.server_pid)
        self.client = cpu_seconds(os.getpid())
        return self

    def __exit__(self, *_: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.server = cpu_seconds(self.server_pid) - self.server
        self.client = cpu_seconds(os.getpid()) - self.client

    def row(self, case: str, messages: int) -> dict[str, Any]:
        return {"case": case, "messages": messages, "rate": messages / self.wall,
                "server_us": self.server / messages * 1e6,
                "client_us": self.client / messages * 1e6}


async def measure(addr: str, server_pid: int, messages: int) -> list[dict[str, Any]]:
    from codec import RemotingCommand
    from remoting import ClientConfig, TrioRemotingClient
    from remoting.queue import QueueClient

    rows: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        client = TrioRemotingClient(ClientConfig(telemetry=False))
        await nursery.start(client.serve)
        q = QueueClient(client)
        await client.invoke_sync(addr, RemotingCommand.create_request(ECHO, body=BODY))

        with Meter(server_pid) as meter:
            for first in range(0, messages, CHUNK):
                requests = [RemotingCommand.create_request(ECHO, body=BODY)
                            for _ in range(min(CHUNK, messages - first))]
                await client.invoke_many(addr, requests, 60.0, limit=64)
        rows.append(meter.row("invoke_many (64 in flight)", messages))

        with Meter(server_pid) as meter:
            for first in range(0, messages, BATCH):
                await q.publish_many(addr, "published", [BODY] * min(BATCH, messages - first))
        rows.append(meter.row(f"publish_many (batches of {BATCH})", messages))

        for credits in (64, 256):
            topic = f"deliveries{credits}"
            for first in range(0, messages, 4096):
                await q.publish_many(addr, topic, [BODY] * min(4096, messages - first))
            with Meter(server_pid) as meter:
                async with q.subscribe(addr, topic, "bench", credits=credits) as sub:
                    async for msg in sub:
                        await msg.ack()
                        if sub.acked == messages:
                            break
            rows.append(meter.row(f"subscribe (credits={credits})", messages))

        topic = "deliveries-blocking"
        for first in range(0, messages, 4096):
            await q.publish_many(addr, topic, [BODY] * min(4096, messages - first))
        with Meter(server_pid) as meter:
            await trio.to_thread.run_sync(blocking_subscriber, addr, topic, messages)
        rows.append(meter.row("blocking subscribe (credits=64)", messages))

        await q.create_topic(addr, "pulled")
        latencies = []
        for offset in range(PULL_ROUNDS):
            answered = trio.Event()
            stamps: dict[str, float] = {}

            async def pull(offset: int = offset, answered: trio.Event = answered,
                           stamps: dict[str, float] = stamps) -> None:
                await q.pull(addr, "pulled", offset=offset, max_wait=10.0)
                stamps["answered"] = trio.current_time()
                answered.set()

            nursery.start_soon(pull)
            stats = q.statistics
            while (await stats(addr)).held_pulls < 1:  # noqa: ASYNC110 - another process
                await trio.sleep(0.001)
            started = trio.current_time()
            await q.publish(addr, "pulled", BODY)
            await answered.wait()
            latencies.append(stamps["answered"] - started)
        latencies.sort()
        rows.append({"case": "pull answered after a publish", "messages": PULL_ROUNDS,
                     "p50_ms": statistics.median(latencies) * 1000,
                     "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000})
        nursery.cancel_scope.cancel()
    return rows


def blocking_subscriber(addr: str, topic: str, messages: int) -> None:
    """Consume and acknowledge ``messages`` of ``topic`` with a blocking client (a thread)."""
    from remoting import ClientConfig, RemotingClient
    from remoting.queue import QueueClient

    with RemotingClient(ClientConfig(telemetry=False)) as client:
        q = QueueClient(client)
        with q.subscribe(addr, topic, "bench", credits=64) as sub:
            for msg in sub:
                msg.ack()
                if sub.acked == messages:
                    break


def report(rows: list[dict[str, Any]]) -> None:
    base = rows[0]["rate"]
    print(f"{'case':<34} {'msgs/s':>10} {'x invoke_many':>14} {'server us':>10} "
          f"{'client us':>10}")
    for row in rows:
        if "rate" in row:
            print(f"{row['case']:<34} {row['rate']:>10,.0f} {row['rate'] / base:>13.2f}x "
                  f"{row['server_us']:>10.1f} {row['client_us']:>10.1f}")
        else:
            print(f"{row['case']:<34} p50 {row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms "
                  f"({row['messages']} rounds)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, client_cpu = (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=serve, args=(server_cpu, child), daemon=True)
    process.start()
    try:
        addr, server_pid = parent.recv()
        if client_cpu is not None:
            os.sched_setaffinity(0, {client_cpu})
        rows = trio.run(measure, addr, server_pid, args.messages)
    finally:
        parent.send("done")
        process.join(30)
    report(rows)
    if args.json:
        from _report import write_json

        write_json(args.json, {"rows": rows})


if __name__ == "__main__":
    main()
