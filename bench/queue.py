"""The queue service against Redis Streams, in one run: publishes, deliveries, held pulls.

    .venv/bin/python bench/queue.py                      # 3 interleaved runs, 100,000 messages
    .venv/bin/python bench/queue.py --quick              # 5,000 messages, 40 rounds, 1 run
    .venv/bin/python bench/queue.py --a ../main          # also another checkout's service (A/B)
    .venv/bin/python bench/queue.py --profile consume64  # py-spy on the server during one case
    .venv/bin/python bench/queue.py --cases pull --a ../main  # only the held pull, A/B
    .venv/bin/python bench/queue.py --json bench/results/queue.json

Needs ``redis-server`` (Debian: ``apt-get install -y redis-server``; the benchmark starts its
own, on a free port of 127.0.0.1 with a temporary directory, and stops it) and redis-py with
hiredis (the ``dev`` extra). ``--no-redis`` measures the queue service alone.

Sides, each a server of its own, pinned to the first CPU, and a client in a process of its
own, pinned to the second (with two CPUs or more); every message is 128 bytes:
- the queue service in memory, and with a data directory (``fsync="interval"``, every second);
- Redis Streams in memory (no persistence), and with AOF ``appendfsync everysec``: the
  durability that compares with the data directory's fsync every second.
Cases, on one connection (the held pull: two for Redis, whose blocked read holds its own):
- ``publish``: N messages in batches of 256, each batch acknowledged before the next (ours:
  ``publish_many``; Redis: 256 XADD pipelined);
- ``consume c=64`` and ``c=256``: N messages published beforehand (not timed), then received
  and acknowledged (ours: a subscription with c credits, each message acked, the client
  grouping its acks; Redis: XREADGROUP COUNT=c, then XACK of what it returned);
- ``lone publish``: one message published and answered at a time, 200 rounds ``--pause``
  apart: its p50 and the server's CPU per publish (ours: ``publish``; Redis: one XADD, read
  as the held pull's answers are). A held pull's round is a publish plus the held read's
  answer, so this is its floor on each side: the held pull's p50 over it says what holding
  and waking a read adds to the round trip. A third side, ``trio echo``, gives the floor of
  any trio server and client at this pace: 128 bytes echoed by a raw trio server, no protocol;
- ``held pull``: a read held on an empty stream, then a publish to it, 200 rounds: the time
  from the publish's start to the read's answer (p50), and the server's CPU per round
  (everything the server did over the rounds: the read's arrival, holding it, the publish,
  the answer; ours: ``pull`` with ``max_wait``; Redis: XREAD BLOCK from the last id). Each
  round waits ``--pause`` after sending the read so that it is held when the publish comes.
Rates come with the CPU time per message of the server and of the client
(/proc/<pid>/task/*/schedstat: it holds up when other processes compete, where rates do not).
Runs interleave the sides (the order turns from run to run); the table shows medians over
runs, and each ratio is the median of the per-run ratios against the Redis side of the same
run (memory against memory, the data directory against AOF everysec).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]

from rpc import CpuWatch  # noqa: E402

BODY = bytes(128)
BATCH = 256
PREFILL = 4096  # messages per publish while filling a stream before a consume case
CREDITS = (64, 256)
PULL_ROUNDS = 200
PAUSE = 0.002  # seconds between sending a held read and publishing: the read is held by then
PAIRS = {"ours memory": "redis memory", "ours data": "redis aof"}
CASES = ("publish",) + tuple(f"consume{c}" for c in CREDITS) + ("lone", "pull")
LATENCY_CASES = ("lone", "pull")  # p50 per round, not a rate
SIDE_TIMEOUT = 1800.0
REDIS_START_SECONDS = 20.0


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` so far (seconds)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def cpus() -> tuple[int | None, int | None]:
    """The server's CPU and the client's: the first two this process may use."""
    allowed = sorted(os.sched_getaffinity(0))
    return (allowed[0], allowed[1]) if len(allowed) >= 2 else (None, None)


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

    def row(self, count: int) -> dict[str, float]:
        return {"rate": count / self.wall, "server_us": self.server / count * 1e6,
                "client_us": self.client / count * 1e6}


class Profiler:
    """py-spy recording the server during the case named ``case`` (or nothing)."""

    def __init__(self, case: str | None, stem: str | None) -> None:
        self.case, self.stem = case, stem
        self.server_pid = 0

    @contextlib.contextmanager
    def during(self, case: str) -> Iterator[None]:
        if case != self.case:
            yield
            return
        from _rpc_profile import recording

        assert self.stem is not None
        with recording({"server": self.server_pid, "client": os.getpid()}, self.stem):
            yield


# ---------------------------------------------------------------------- the queue service


def started(parent: Any, process: Any) -> Any:
    """What a server process sends once it listens; a clear error if it died first."""
    while not parent.poll(1.0):
        if not process.is_alive():
            raise RuntimeError(f"the server process ended (exit code {process.exitcode}) "
                               "before it listened: its error is above")
    return parent.recv()


def serve_queue(cpu: int | None, data_dir: str | None, conn: Any) -> None:
    """The queue service's process: a server with a `QueueService`, until told to stop."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    from remoting import RemotingServer, ServerConfig
    from remoting.queue import QueueService

    server = RemotingServer(ServerConfig(telemetry=False))
    QueueService(data_dir, memory_messages=10_000_000, fsync="interval").attach(server)
    server.start()
    conn.send((server.addr, os.getpid()))
    conn.recv()  # until the client is done
    server.shutdown()


async def measure_queue(addr: str, server_pid: int, messages: int, rounds: int, pause: float,
                        profiler: Profiler, cases: tuple[str, ...]) -> dict[str, Any]:
    import trio

    from remoting import ClientConfig, TrioRemotingClient
    from remoting.queue import QueueClient

    out: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        client = TrioRemotingClient(ClientConfig(telemetry=False))
        await nursery.start(client.serve)
        q = QueueClient(client)
        await q.create_topic(addr, "warm")
        await q.publish_many(addr, "warm", [BODY] * BATCH)

        if "publish" in cases:
            with profiler.during("publish"), Meter(server_pid) as meter:
                for first in range(0, messages, BATCH):
                    await q.publish_many(addr, "published",
                                         [BODY] * min(BATCH, messages - first))
            out["publish"] = meter.row(messages)

        for credits in CREDITS:
            if f"consume{credits}" not in cases:
                continue
            topic = f"consumed{credits}"
            for first in range(0, messages, PREFILL):
                await q.publish_many(addr, topic, [BODY] * min(PREFILL, messages - first))
            with profiler.during(f"consume{credits}"), Meter(server_pid) as meter:
                async with q.subscribe(addr, topic, "bench", credits=credits) as sub:
                    async for msg in sub:
                        await msg.ack()
                        if sub.acked == messages:
                            break
            out[f"consume{credits}"] = meter.row(messages)

        if "lone" in cases:
            await q.create_topic(addr, "lone")
            latencies = []
            with profiler.during("lone"), Meter(server_pid) as meter:
                for _ in range(rounds):
                    await trio.sleep(pause)  # idle between rounds, as the held pull's
                    started = time.perf_counter()
                    await q.publish(addr, "lone", BODY)
                    latencies.append(time.perf_counter() - started)
            out["lone"] = pull_row(latencies, meter)

        if "pull" not in cases:
            nursery.cancel_scope.cancel()
            return out
        await q.create_topic(addr, "pulled")
        latencies = []
        with profiler.during("pull"), Meter(server_pid) as meter:
            for offset in range(rounds):
                answered = trio.Event()
                stamp: list[float] = []

                async def pull(offset: int = offset, answered: trio.Event = answered,
                               stamp: list[float] = stamp) -> None:
                    await q.pull(addr, "pulled", offset=offset, max_wait=10.0)
                    stamp.append(time.perf_counter())
                    answered.set()

                nursery.start_soon(pull)
                await trio.sleep(pause)  # the pull is sent and held meanwhile
                started = time.perf_counter()
                await q.publish(addr, "pulled", BODY)
                await answered.wait()
                latencies.append(stamp[0] - started)
        out["pull"] = pull_row(latencies, meter)
        nursery.cancel_scope.cancel()
    return out


def pull_row(latencies: list[float], meter: Meter) -> dict[str, float]:
    """A latency case's figures: p50 and p99 (µs), CPU per round of each side (µs)."""
    latencies.sort()
    rounds = len(latencies)
    return {"p50_us": statistics.median(latencies) * 1e6,
            "p99_us": latencies[max(0, int(rounds * 0.99) - 1)] * 1e6,
            "server_us": meter.server / rounds * 1e6, "client_us": meter.client / rounds * 1e6}


def run_queue(store: str, messages: int, rounds: int, pause: float, profiler: Profiler,
              cases: tuple[str, ...]) -> dict[str, Any]:
    import trio

    server_cpu, client_cpu = cpus()
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    with tempfile.TemporaryDirectory(prefix="bench-queue-") as tmp:
        data_dir = tmp if store == "data" else None
        process = ctx.Process(target=serve_queue, args=(server_cpu, data_dir, child),
                              daemon=True)
        process.start()
        try:
            addr, server_pid = started(parent, process)
            profiler.server_pid = server_pid
            if client_cpu is not None:
                os.sched_setaffinity(0, {client_cpu})
            return trio.run(measure_queue, addr, server_pid, messages, rounds, pause, profiler,
                            cases)
        finally:
            parent.send("done")
            process.join(30)
            if process.is_alive():
                process.kill()


# ---------------------------------------------------------------------- the floor: a raw echo


def serve_echo(cpu: int | None, conn: Any) -> None:
    """A raw trio echo server's process (no protocol at all), until told to stop."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    import trio

    async def echo(stream: Any) -> None:
        while data := await stream.receive_some(65536):
            await stream.send_all(data)

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            nursery.start_soon(trio.serve_listeners, echo, listeners)
            conn.send((listeners[0].socket.getsockname()[1], os.getpid()))
            await trio.to_thread.run_sync(conn.recv)  # until the client is done
            nursery.cancel_scope.cancel()

    trio.run(serve)


async def measure_echo(port: int, server_pid: int, rounds: int, pause: float
                       ) -> dict[str, Any]:
    """The lone round trip of 128 bytes through a raw trio echo, paced as ours: its floor."""
    import trio

    stream = await trio.open_tcp_stream("127.0.0.1", port)
    latencies = []
    with Meter(server_pid) as meter:
        for _ in range(rounds):
            await trio.sleep(pause)
            started = time.perf_counter()
            await stream.send_all(BODY)
            got = 0
            while got < len(BODY):
                got += len(await stream.receive_some(65536))
            latencies.append(time.perf_counter() - started)
    await stream.aclose()
    return {"lone": pull_row(latencies, meter)}


def run_echo(rounds: int, pause: float) -> dict[str, Any]:
    import trio

    server_cpu, client_cpu = cpus()
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=serve_echo, args=(server_cpu, child), daemon=True)
    process.start()
    try:
        port, server_pid = started(parent, process)
        if client_cpu is not None:
            os.sched_setaffinity(0, {client_cpu})
        return trio.run(measure_echo, port, server_pid, rounds, pause)
    finally:
        parent.send("done")
        process.join(30)
        if process.is_alive():
            process.kill()


# ---------------------------------------------------------------------- Redis Streams


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def redis_server(store: str, cpu: int | None) -> Iterator[tuple[int, int]]:
    """Start Debian's redis-server on a free port of 127.0.0.1; yield (port, pid)."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found: apt-get install -y redis-server "
                         "(or --no-redis)")
    persistence = (["--appendonly", "yes", "--appendfsync", "everysec"] if store == "aof"
                   else ["--appendonly", "no"])
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as tmp:
        for _attempt in range(5):
            port = free_port()
            process = subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp,
                 "--save", "", "--daemonize", "no", "--logfile", os.path.join(tmp, "log"),
                 *persistence],
                # every thread Redis starts inherits the CPU
                preexec_fn=None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu})),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + REDIS_START_SECONDS
            while process.poll() is None and time.monotonic() < deadline:
                try:
                    redis.Redis(port=port).ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            if process.poll() is None:
                break
        else:
            raise SystemExit(f"redis-server did not start: see {tmp}/log")
        try:
            yield port, process.pid
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run_redis(store: str, messages: int, rounds: int, pause: float, cases: tuple[str, ...]
              ) -> dict[str, Any]:
    import redis

    server_cpu, client_cpu = cpus()
    if client_cpu is not None:
        os.sched_setaffinity(0, {client_cpu})
    out: dict[str, Any] = {}
    fields = {"b": BODY}
    with redis_server(store, server_cpu) as (port, pid):
        r = redis.Redis(port=port)
        r.xadd("warm", fields)

        if "publish" in cases:
            with Meter(pid) as meter:
                for first in range(0, messages, BATCH):
                    pipe = r.pipeline(transaction=False)
                    for _ in range(min(BATCH, messages - first)):
                        pipe.xadd("published", fields)
                    pipe.execute()
            out["publish"] = meter.row(messages)

        for credits in CREDITS:
            if f"consume{credits}" not in cases:
                continue
            stream = f"consumed{credits}"
            for first in range(0, messages, PREFILL):
                pipe = r.pipeline(transaction=False)
                for _ in range(min(PREFILL, messages - first)):
                    pipe.xadd(stream, fields)
                pipe.execute()
            r.xgroup_create(stream, "bench", id="0")
            with Meter(pid) as meter:
                done = 0
                while done < messages:
                    got = r.xreadgroup("bench", "c", {stream: ">"}, count=credits)
                    ids = [entry_id for entry_id, _ in got[0][1]]
                    r.xack(stream, "bench", *ids)
                    done += len(ids)
            out[f"consume{credits}"] = meter.row(messages)

        if "lone" in cases:  # on a connection of its own, read as the held pull's are
            writer = r.connection_pool.get_connection()
            latencies = []
            with Meter(pid) as meter:
                for _ in range(rounds):
                    time.sleep(pause)  # idle between rounds, as the held pull's
                    started = time.perf_counter()
                    writer.send_command("XADD", "lone", "*", "b", BODY)
                    writer.read_response()
                    latencies.append(time.perf_counter() - started)
            out["lone"] = pull_row(latencies, meter)
            r.connection_pool.release(writer)

        if "pull" not in cases:
            r.close()
            return out
        # the blocked read holds a connection of its own; both are read in this thread (RESP3,
        # redis-py's default: XREAD answers a map)
        reader = r.connection_pool.get_connection()
        writer = r.connection_pool.get_connection()
        last = b"0-0"
        latencies = []
        with Meter(pid) as meter:
            for _ in range(rounds):
                reader.send_command("XREAD", "BLOCK", 10_000, "STREAMS", "pulled", last)
                time.sleep(pause)  # the read is sent and blocked meanwhile
                started = time.perf_counter()
                writer.send_command("XADD", "pulled", "*", "b", BODY)
                answer = reader.read_response()
                latencies.append(time.perf_counter() - started)
                last = writer.read_response()
                entries = answer[b"pulled"] if isinstance(answer, dict) else answer[0][1]
                assert entries[0][0] == last, "the held read saw another entry"
        out["pull"] = pull_row(latencies, meter)
        r.connection_pool.release(reader)
        r.connection_pool.release(writer)
        r.close()
    return out


# ---------------------------------------------------------------------- runs and the table


def one_side(args: argparse.Namespace) -> None:
    """Measure one side in this process (a child of the driver); print its figures as JSON."""
    kind, store = args.side.split()
    if kind == "echo":
        result = run_echo(args.rounds, args.pause)
    elif kind == "redis":
        result = run_redis(store, args.messages, args.rounds, args.pause, tuple(args.cases))
    else:
        profiler = Profiler(args.profile, args.profile_out)
        cases = tuple(args.cases)
        if args.profile is not None and args.profile not in cases:
            cases += (args.profile,)
        result = run_queue(store, args.messages, args.rounds, args.pause, profiler, cases)
    print(json.dumps(result))


def run_side(side: str, tree: Path | None, args: argparse.Namespace,
             profile: str | None = None) -> dict[str, Any]:
    """Run one side in a process of its own (``tree``'s library first on its path)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    command = [sys.executable, os.path.abspath(__file__), "--side", side,
               "--messages", str(args.messages), "--rounds", str(args.rounds),
               "--pause", str(args.pause), "--cases", *args.cases]
    if profile is not None:
        command += ["--profile", profile, "--profile-out", args.profile_out]
    proc = subprocess.run(command, env=env, capture_output=True, text=True,
                          timeout=SIDE_TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"side {side!r} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def side_names(args: argparse.Namespace) -> list[tuple[str, str, Path | None]]:
    """(label, side, tree) of every side to measure: B (this checkout), A, Redis."""
    names: list[tuple[str, str, Path | None]] = []
    for store in args.stores:
        if args.a is not None:
            names.append((f"A ours {store}", f"ours {store}", args.a))
        names.append((f"ours {store}", f"ours {store}", None))
    if args.redis:
        names += [(PAIRS[f"ours {store}"], PAIRS[f"ours {store}"], None)
                  for store in args.stores]
    if "lone" in args.cases:
        names.append(("trio echo", "echo raw", None))
    return names


def rate_or_latency(case: str) -> str:
    return "p50_us" if case in LATENCY_CASES else "rate"


def per_run_ratio(runs: list[dict[str, dict[str, Any]]], label: str, other: str, case: str,
                  key: str) -> float:
    """The median over runs of ``label``'s figure over ``other``'s, each from one run."""
    return statistics.median(run[label][case][key] / run[other][case][key] for run in runs)


def report(runs: list[dict[str, dict[str, Any]]], args: argparse.Namespace,
           others: float | None) -> dict[str, Any]:
    """Print the table of medians and ratios; return it as a dict for the JSON."""
    labels = list(runs[0])
    table = {label: {case: {key: statistics.median(run[label][case][key] for run in runs)
                            for key in runs[0][label][case]}
                     for case in args.cases if case in runs[0][label]}
             for label in labels}
    ratios: dict[str, dict[str, dict[str, float]]] = {}
    for label in labels:
        if not label.startswith(("ours", "A ")):
            continue
        store = label.rsplit(" ", 1)[1]
        versus = {"redis": PAIRS[f"ours {store}"]} if args.redis else {}
        if args.a is not None and not label.startswith("A "):
            versus["A"] = f"A ours {store}"
        ratios[label] = {case: {f"{name} {key}": per_run_ratio(runs, label, other, case, key)
                                for name, other in versus.items()
                                for key in (rate_or_latency(case), "server_us")}
                         for case in args.cases}
    print(f"median of {len(runs)} run(s); {args.messages:,} messages of 128 bytes a case, "
          f"{args.rounds} held-pull rounds" + ("" if others is None else
                                               f"; other processes took {others:.0%} of the "
                                               "CPUs"))
    print("rates in messages/s, the lone publish's and the held pull's p50 in µs; CPU µs per "
          "message (per round for those two); ratios: medians of per-run ratios, ours / theirs")
    print("| case | side | rate or p50 | server CPU | client CPU | x Redis | server CPU x Redis "
          "| x A | server CPU x A |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for case in args.cases:
        key = rate_or_latency(case)
        for label in labels:
            if case not in table[label]:
                continue
            row = table[label][case]
            mine = ratios.get(label, {}).get(case, {})
            cells = [f"{mine[k]:.2f}x" if k in mine else "" for k in
                     (f"redis {key}", "redis server_us", f"A {key}", "A server_us")]
            main = f"{row[key]:,.0f}" + (" µs" if key == "p50_us" else "")
            print(f"| {case} | {label} | {main} | {row['server_us']:.2f} | "
                  f"{row['client_us']:.2f} | " + " | ".join(cells) + " |")
    return {"table": table, "ratios": ratios, "others_share": others}


def profile(args: argparse.Namespace) -> None:
    from _rpc_profile import RATE, summarize

    side = f"ours {args.stores[0]}"
    result = run_side(side, args.a, args, profile=args.profile)
    print(f"{side}, {args.profile} under py-spy ({RATE} samples/s): "
          f"{json.dumps(result[args.profile])}")
    for role in ("server", "client"):
        path = f"{args.profile_out}-{role}.raw"
        print(f"\n=== {role} ({path}: collapsed stacks, speedscope.app opens them) ===")
        summarize(path, top=args.profile_top)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--messages", type=int, default=None, help="a case's (default 100,000)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds of the lone publish and of the held pull (default 200)")
    ap.add_argument("--runs", type=int, default=None, help="interleaved runs (default 3)")
    ap.add_argument("--quick", action="store_true", help="small counts, 1 run: that it runs")
    ap.add_argument("--pause", type=float, default=PAUSE, help="seconds a read is held first")
    ap.add_argument("--stores", nargs="+", default=["memory", "data"],
                    choices=["memory", "data"], help="the queue service's stores to measure")
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES,
                    help="the cases to measure (default all; pull: the held pull alone)")
    ap.add_argument("--no-redis", dest="redis", action="store_false",
                    help="measure the queue service alone")
    ap.add_argument("--a", type=Path, default=None,
                    help="another checkout (holding codec, processors, remoting): its queue "
                         "service measured beside this one's, in the same runs")
    ap.add_argument("--profile", choices=CASES, default=None,
                    help="py-spy the server and the client during this case (the first store "
                         "given), once")
    ap.add_argument("--profile-out", default="/tmp/bench-queue-profile/queue",
                    help="py-spy's files: this, then -server.raw and -client.raw")
    ap.add_argument("--profile-top", type=int, default=30)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--side", default=None, help=argparse.SUPPRESS)  # a child: one side
    args = ap.parse_args()
    args.messages = args.messages or (5_000 if args.quick else 100_000)
    args.rounds = args.rounds or (40 if args.quick else PULL_ROUNDS)
    if args.side is not None:
        one_side(args)
        return 0
    if args.profile is not None:
        profile(args)
        return 0
    runs_wanted = args.runs or (1 if args.quick else 3)
    names = side_names(args)
    runs: list[dict[str, dict[str, Any]]] = []
    watch = CpuWatch()
    for run in range(runs_wanted):
        turn = run % len(names)
        results = {}
        for label, side, tree in names[turn:] + names[:turn]:
            results[label] = run_side(side, tree, args)
        runs.append({label: results[label] for label, _, _ in names})
        print(f"run {run + 1}/{runs_wanted} done", file=sys.stderr)
    summary = report(runs, args, watch.others_share())
    if args.json is not None:
        from _report import write_json

        write_json(str(args.json), {"messages": args.messages, "rounds": args.rounds,
                                    "runs": runs_wanted, "pause": args.pause, **summary,
                                    "per_run": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
