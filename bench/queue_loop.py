"""What a queue service's publishes, pulls and deliveries cost its event loop, one run.

    .venv/bin/python bench/queue_loop.py                 # every case, 5 rounds each
    .venv/bin/python bench/queue_loop.py --rounds 1      # a quick check that it runs
    .venv/bin/python bench/queue_loop.py --json bench/results/queue_loop.json

Every connection of a server is served by one event loop, so the longest *step* of that loop
(the time between two of its waits) is how long every other connection waits at worst. A
trio instrument on the server's loop records each step; a case reports the longest step
during its operation (the stall: its wall time, and the loop thread's CPU time in it, which
leaves out waiting for the disk or, on a busy machine, for a CPU) and the operation's
latency as the client sees it.

Method: one server process (spawned; pinned to the first CPU when there are two, so the
client's work does not share its interpreter's lock) runs a `RemotingServer` with a
`QueueService` over a data directory (``fsync="never"``, ``memory_messages=8``: older
records are read from the segment files); the client (this process, a blocking client) calls
it and tells it, through a pipe, when to start recording and to evict its files from the
page cache. Records of 1 KiB and 1 MiB. Cases, each ``--rounds`` times:
- ``publish``: one message; ``publish_many``: 1,000 of 1 KiB, or 4 of 1 MiB;
- ``pull memory``: a pull answered from the newest records, held in memory;
- ``pull page cache``: a pull of records only in the segment files, in the page cache;
- ``pull cold``: the same after the files were fsynced and evicted from the page cache
  (``posix_fadvise(DONTNEED)``): read from the disk;
- ``deliver cold``: a new subscription (64 credits) receiving 64 records evicted so.
A pull asks for as many records as make its 4 MiB answer (4,096 of 1 KiB, 4 of 1 MiB).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]

import trio  # noqa: E402


class LongestStep(trio.abc.Instrument):
    """The longest task step of the loop it is added to, since `reset`: its wall time (what
    the other connections wait), and the loop thread's CPU time in it (less: the time it
    waited for the disk, or for the CPU on a busy machine)."""

    def __init__(self) -> None:
        self.longest = (0.0, 0.0)  # (wall, cpu) seconds
        self._began = (0.0, 0.0)

    def reset(self) -> None:
        self.longest = (0.0, 0.0)

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._began = (time.perf_counter(), time.thread_time())

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        wall = time.perf_counter() - self._began[0]
        if wall > self.longest[0]:
            self.longest = (wall, time.thread_time() - self._began[1])


def evict(directory: Path) -> None:
    """fsync the segment files under ``directory`` and drop them from the page cache."""
    for path in directory.rglob("*.log"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def serve(cpu: int | None, conn: Any) -> None:
    """The server process: a queue service over a data directory; answers the pipe."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    from remoting import RemotingServer, ServerConfig
    from remoting.queue import QueueService

    with tempfile.TemporaryDirectory(prefix="queue-loop-") as data_dir:
        service = QueueService(data_dir, memory_messages=8, fsync="never")
        server = RemotingServer(ServerConfig(telemetry=False))
        service.attach(server)
        server.start()
        steps = LongestStep()
        server.endpoint.inbox.call(lambda: trio.lowlevel.add_instrument(steps), 10.0)
        conn.send(server.addr)
        try:
            while True:
                command = conn.recv()
                if command == "reset":
                    server.endpoint.inbox.call(steps.reset, 10.0)
                    conn.send(None)
                elif command == "longest":
                    conn.send(server.endpoint.inbox.call(lambda: steps.longest, 10.0))
                elif command == "evict":
                    evict(Path(data_dir))
                    conn.send(None)
                else:
                    break
        finally:
            server.shutdown()


def measure_all(addr: str, server: Any, rounds: int) -> list[dict[str, Any]]:
    from remoting import RemotingClient
    from remoting.queue import QueueClient

    def ask(command: str) -> Any:
        server.send(command)
        return server.recv()

    rows: list[dict[str, Any]] = []
    client = RemotingClient().start()
    q = QueueClient(client)
    try:
        for size, label in ((1024, "1 KiB"), (1024 * 1024, "1 MiB")):
            body = b"x" * (size - 64)  # the record's own fields make up the rest
            per_pull = max(1, (4 * 1024 * 1024) // size)
            topic = f"t{size}"
            batch = 1000 if size == 1024 else 4
            # enough records that pulls from the start never reach those in memory
            for _ in range(0, per_pull + 64, batch):
                q.publish_many(addr, topic, [body] * batch, timeout=60)

            def measure(name: str, fn: Any, evicted: bool = False,
                        _label: str = label) -> None:
                stalls, cpus, latencies = [], [], []
                for _ in range(rounds):
                    if evicted:
                        ask("evict")
                    ask("reset")
                    began = time.perf_counter()
                    fn()
                    latencies.append(time.perf_counter() - began)
                    wall, cpu = ask("longest")
                    stalls.append(wall)
                    cpus.append(cpu)
                rows.append({"case": name, "record": _label,
                             "stall_ms_p50": statistics.median(stalls) * 1000,
                             "stall_ms_max": max(stalls) * 1000,
                             "stall_cpu_ms_p50": statistics.median(cpus) * 1000,
                             "latency_ms_p50": statistics.median(latencies) * 1000})

            measure("publish", lambda b=body, t=topic: q.publish(addr, t, b))
            measure(f"publish_many ({batch})", lambda b=body, t=topic, n=batch:
                    q.publish_many(addr, t, [b] * n, timeout=60))
            end = q.offsets(addr, topic).end
            measure("pull memory", lambda t=topic, e=end: q.pull(
                addr, t, offset=e - 4, max_messages=4, max_wait=0))

            def pull(t: str = topic, n: int = per_pull) -> None:
                q.pull(addr, t, offset=0, max_messages=n, max_wait=0, timeout=60)

            pull()  # into the page cache
            measure("pull page cache", pull)
            measure("pull cold", pull, evicted=True)

            def deliver(t: str = topic) -> None:
                with q.subscribe(addr, t, f"c{time.monotonic_ns()}", credits=64) as sub:
                    for _ in range(64):
                        msg = sub.receive(60)
                        assert msg is not None
                        msg.ack()

            measure("deliver cold (64 credits)", deliver, evicted=True)
    finally:
        client.shutdown()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, client_cpu = (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=serve, args=(server_cpu, child), daemon=True)
    process.start()
    try:
        addr = parent.recv()
        if client_cpu is not None:
            os.sched_setaffinity(0, {client_cpu})
        rows = measure_all(addr, parent, args.rounds)
    finally:
        parent.send("done")
        process.join(30)
    print(f"{'case':30} {'record':7} {'stall p50 ms':>13} {'max':>8} {'its cpu':>8} "
          f"{'latency p50 ms':>15}")
    for row in rows:
        print(f"{row['case']:30} {row['record']:7} {row['stall_ms_p50']:13.2f} "
              f"{row['stall_ms_max']:8.2f} {row['stall_cpu_ms_p50']:8.2f} "
              f"{row['latency_ms_p50']:15.2f}")
    if args.json:
        from _report import write_json

        write_json(args.json, {"rounds": args.rounds, "rows": rows})


if __name__ == "__main__":
    main()
