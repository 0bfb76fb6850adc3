"""The event bus's rates against the plain calls it is built on and against NATS, in one run.

    .venv/bin/python bench/bus.py               # median of 3 runs
    .venv/bin/python bench/bus.py --quick       # small counts, 1 run: checks that it runs
    .venv/bin/python bench/bus.py --runs 5 --json bench/results/bus.json
    .venv/bin/python bench/bus.py --only "pipelined send"   # that case, its NATS peer, invoke_many
    .venv/bin/python bench/bus.py --no-nats     # the bus and the plain calls only

Three processes: the server (a `RemotingServer` with an `EventBus` and an echo processor),
a consumer (a `BusClient` whose consumer at ``echo`` replies with the body), and the caller,
which measures, with 128-byte bodies:

- sequential, one at a time from a blocking client: ``invoke_sync`` to the echo processor
  (one round trip to the server: the floor), bus ``send`` (returns once the consumer's bus
  has the message: two hops there, two back) and bus ``request`` (the same, plus the reply's
  hops), with the p50 latency of each;
- pipelined, 64 in flight: ``invoke_many(limit=64)`` from a blocking client and 64 trio
  tasks looping ``invoke_sync`` (the floors), 64 trio tasks looping ``send`` and ``request``
  on a `TrioBusClient`.

The peer, NATS core (subjects, publish, request/reply through a reply inbox), in the same
shape and the same run: Debian's ``nats-server`` (``apt-get install -y nats-server``, 2.9;
no JetStream), started by the benchmark on a free port of 127.0.0.1 with a temporary
directory of its own and stopped by its pid; a responder process (nats-py, asyncio)
subscribed to ``echo`` that replies with the body (the consumer's counterpart: its CPU is in
the consumer's column); a caller process on nats-py (the ``dev`` extra), one connection:

- ``nats request``: ``request("echo", body)``, a PUB with a reply inbox that the server routes
  to the responder, whose reply the server routes back (nats-py's one wildcard inbox
  subscription per connection): the counterpart of a bus ``request``, four hops;
- ``nats publish+flush``: ``publish("echo", body)`` then ``flush()``, which sends a PING and
  waits for the server's PONG: the PONG says the server has read the message (and routed
  it to the responder's connection's write buffer), nothing about the responder. It is
  NATS core's nearest to a bus ``send``, whose receipt comes from the consumer's bus once it
  holds the message (two more hops: server to consumer, and the consumer's receipt back).
  NATS core has no acknowledgement from a subscriber short of a request. nats-py 2.16 writes
  the PING at once and leaves the PUB in its write buffer for its flusher task, so the PING
  would leave first and its PONG cover nothing; the caller yields to the event loop once
  between the two (``asyncio.sleep(0)``: the flusher the publish woke writes the PUB), so the
  PONG comes after the message, as flush's documentation says;
- sequential, one at a time (with the p50), and pipelined: 64 asyncio tasks each looping
  ``request``, and 64 each looping publish+flush, as the bus's 64 trio tasks each wait for
  their own receipt (publishing many and flushing once per N would acknowledge N messages
  with one PONG: a batch, which the bus's ``send`` has no form of).

Both servers run on the first CPU (with two or more; every thread of theirs inherits it: a
Go server otherwise spreads its work over every CPU, where ours does most of it on one
thread); the other processes run anywhere. The two sides take turns going first from run to run.

Each line gives messages per second and the CPU time each process spent per message (all its
threads: getrusage in our processes and the caller, /proc/<pid>/task/*/schedstat for
``nats-server`` and the responder); each pipelined line also its rate as a ratio of
``invoke_many``'s in the same run, and each bus ``send`` and ``request`` line its rate as a
ratio of its NATS counterpart's (both: the median of the per-run ratios). The machine's
other load skews rates more than CPU times: the first line says what share of the CPUs other
processes took meanwhile. Each line of ours also gives the socket writes
per message of the server and of the consumer (their endpoints' `statistics().writes`).
Without ``nats-server`` or nats-py the NATS lines are skipped, with a line saying so.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Python put this script's directory first on sys.path, where bench/codec.py would shadow the
# real `codec` package: move it to the end. Spawned children inherit this order.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]

from _servers import cpu_seconds, cpus, server_process  # noqa: E402
from rpc import CpuWatch  # noqa: E402

ECHO_CODE = 100
SUBJECT = "echo"  # the bus address and the NATS subject
BODY = b"x" * 128
ANSWER_SECONDS = 300.0  # a child that says nothing for this long has failed
FULL = {"sequential": 3000, "pipelined": 30000}
QUICK = {"sequential": 200, "pipelined": 2000}
TASKS = 64  # pipelined: tasks each looping one call
BASELINE = "pipelined invoke_many"  # what the pipelined rates are measured against
CASES = [("sequential", "invoke_sync"), ("sequential", "send"), ("sequential", "request"),
         ("pipelined", "invoke_many"), ("pipelined", "invoke_sync"), ("pipelined", "send"),
         ("pipelined", "request")]
PEERS = {"send": "nats publish+flush", "request": "nats request"}  # a bus call's NATS peer
NATS_CASES = [(case, peer) for case in ("sequential", "pipelined") for peer in PEERS.values()]

# A process's CPU seconds so far and its socket writes (None: not counted), read between cases.
Clock = Callable[[], tuple[float, float | None]]


def _cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _serve_cpu(conn: Any, endpoint: Any) -> None:
    while conn.recv() == "cpu":  # asked at the start and the end of each window
        stats = endpoint.statistics()
        conn.send((_cpu(), stats.writes))


def server_main(cpu: int | None, conn: Any) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})  # before any thread starts: they all inherit it
    from processors import EchoProcessor
    from remoting import RemotingServer
    from remoting.bus import EventBus

    with RemotingServer() as server, EventBus() as bus:
        server.register_processor(ECHO_CODE, EchoProcessor())
        bus.attach(server)
        conn.send(server.addr)
        _serve_cpu(conn, server)


def consumer_main(addr: str, conn: Any) -> None:
    from remoting import RemotingClient
    from remoting.bus import BusClient

    with RemotingClient() as client, BusClient(client, addr) as bus:
        bus.consumer(SUBJECT, lambda message: message.reply(message.body))
        conn.send("ready")
        _serve_cpu(conn, client)


def caller_main(addr: str, counts: dict[str, int], cases: list[tuple[str, str]],
                conn: Any) -> None:
    for case, call in cases:
        n = counts[case]
        runner = _sequential if case == "sequential" else _pipelined
        conn.send(runner(call, addr, n, max(1, n // 10), conn))
    conn.send("done")


def _window(conn: Any) -> None:
    conn.send("window")
    conn.recv()  # "go": the parent has read the others' CPU clocks


def _sequential(call: str, addr: str, n: int, warm: int, conn: Any) -> dict[str, float]:
    from remoting import RemotingClient, RemotingCommand
    from remoting.bus import BusClient

    with RemotingClient() as client, BusClient(client, addr) as bus:
        def one() -> None:
            if call == "invoke_sync":
                client.invoke_sync(addr, RemotingCommand.create_request(ECHO_CODE, body=BODY))
            elif call == "send":
                bus.send(SUBJECT, BODY)
            else:
                bus.request(SUBJECT, BODY)

        for _ in range(warm):
            one()
        _window(conn)
        times = []
        cpu0, t0 = _cpu(), time.perf_counter()
        for _ in range(n):
            start = time.perf_counter()
            one()
            times.append(time.perf_counter() - start)
        seconds, cpu = time.perf_counter() - t0, _cpu() - cpu0
    return {"seconds": seconds, "cpu": cpu, "p50": statistics.median(times)}


def _pipelined(call: str, addr: str, n: int, warm: int, conn: Any) -> dict[str, float]:
    from remoting import RemotingClient, RemotingCommand

    if call == "invoke_many":
        with RemotingClient() as client:
            def batch(count: int) -> None:
                client.invoke_many(addr, [RemotingCommand.create_request(ECHO_CODE, body=BODY)
                                          for _ in range(count)], 30, limit=TASKS)

            batch(warm)
            _window(conn)
            cpu0, t0 = _cpu(), time.perf_counter()
            batch(n)
            return {"seconds": time.perf_counter() - t0, "cpu": _cpu() - cpu0}
    import trio

    from remoting import open_client
    from remoting.bus import TrioBusClient

    async def run() -> dict[str, float]:
        async with open_client() as client:
            bus = TrioBusClient(client, addr)

            async def worker(count: int) -> None:
                for _ in range(count):
                    if call == "invoke_sync":
                        await client.invoke_sync(
                            addr, RemotingCommand.create_request(ECHO_CODE, body=BODY), 30)
                    elif call == "send":
                        await bus.send(SUBJECT, BODY)
                    else:
                        await bus.request(SUBJECT, BODY)

            async def tasks(total: int) -> None:
                async with trio.open_nursery() as nursery:
                    for _ in range(TASKS):
                        nursery.start_soon(worker, max(1, total // TASKS))

            await tasks(warm)
            await trio.to_thread.run_sync(_window, conn)
            cpu0, t0 = _cpu(), time.perf_counter()
            await tasks(n)
            result = {"seconds": time.perf_counter() - t0, "cpu": _cpu() - cpu0}
            await bus.aclose()
            return result

    return trio.run(run)


# ---------------------------------------------------------------------- the NATS side


def nats_missing() -> str | None:
    """What the NATS side lacks, with how to install it; None when nothing."""
    import importlib.util

    missing = []
    if shutil.which("nats-server") is None:
        missing.append("nats-server (apt-get install -y nats-server)")
    if importlib.util.find_spec("nats") is None:
        missing.append("nats-py (.venv/bin/pip install nats-py; it is in the dev extra)")
    return " and ".join(missing) or None


def nats_server(binary: str, cpu: int | None) -> contextlib.AbstractContextManager[
        tuple[int, int]]:
    """Debian's nats-server on a free port of 127.0.0.1 (no JetStream); yield (port, pid)."""

    def command(port: int, tmp: str) -> list[str]:
        return [binary, "--addr", "127.0.0.1", "--port", str(port),
                "--log", os.path.join(tmp, "log")]

    return server_process("nats-server", command, cpu=cpu)


def responder_main(url: str, conn: Any) -> None:
    """NATS's counterpart of the consumer: replies to each request on ``echo`` with its body."""
    import asyncio

    import nats

    async def run() -> None:
        nc = await nats.connect(url, allow_reconnect=False)

        async def reply(msg: Any) -> None:
            if msg.reply:  # a published message (no inbox) is taken and dropped
                await msg.respond(msg.data)

        await nc.subscribe(SUBJECT, cb=reply)
        await nc.flush()  # the server has the subscription
        conn.send("ready")
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until "stop"
        await nc.close()

    asyncio.run(run())


def nats_caller_main(url: str, counts: dict[str, int], cases: list[tuple[str, str]],
                     conn: Any) -> None:
    import asyncio

    for case, call in cases:
        n = counts[case]
        conn.send(asyncio.run(_nats_case(case, call, url, n, max(1, n // 10), conn)))
    conn.send("done")


async def _nats_case(case: str, call: str, url: str, n: int, warm: int, conn: Any
                     ) -> dict[str, float]:
    import asyncio

    import nats

    nc = await nats.connect(url, allow_reconnect=False)

    async def one() -> None:
        if call == "nats request":
            await nc.request(SUBJECT, BODY, timeout=30)
        else:
            await nc.publish(SUBJECT, BODY)
            # nats-py's flush writes its PING at once, the PUB waits for the flusher task the
            # publish woke: let it run first, so the PONG comes after the server read the PUB
            await asyncio.sleep(0)
            await nc.flush(30)

    if case == "sequential":
        for _ in range(warm):
            await one()
        _window(conn)  # blocks the loop: nothing is in flight
        times = []
        cpu0, t0 = _cpu(), time.perf_counter()
        for _ in range(n):
            start = time.perf_counter()
            await one()
            times.append(time.perf_counter() - start)
        result = {"seconds": time.perf_counter() - t0, "cpu": _cpu() - cpu0,
                  "p50": statistics.median(times)}
    else:
        async def worker(count: int) -> None:
            for _ in range(count):
                await one()

        async def tasks(total: int) -> None:
            async with asyncio.TaskGroup() as group:
                for _ in range(TASKS):
                    group.create_task(worker(max(1, total // TASKS)))

        await tasks(warm)
        _window(conn)
        cpu0, t0 = _cpu(), time.perf_counter()
        await tasks(n)
        result = {"seconds": time.perf_counter() - t0, "cpu": _cpu() - cpu0}
    await nc.close()
    return result


# ---------------------------------------------------------------------- runs


def _answer(conn: Any, who: str) -> Any:
    if not conn.poll(ANSWER_SECONDS):
        raise RuntimeError(f"the {who} process did not answer within {ANSWER_SECONDS} s")
    return conn.recv()


def _asking(conn: Any, who: str) -> Clock:
    """The clock of one of our processes: it answers with its CPU time and socket writes."""
    def clock() -> tuple[float, float | None]:
        conn.send("cpu")
        cpu, writes = _answer(conn, who)
        return cpu, writes

    return clock


def _reading(pid: int) -> Clock:
    """The clock of a process that is not ours to ask: its CPU time from /proc."""
    return lambda: (cpu_seconds(pid), None)


def _measure(cases: list[tuple[str, str]], counts: dict[str, int], caller_conn: Any,
             clocks: dict[str, Clock],
             spying: Callable[[str], contextlib.AbstractContextManager[Any]]
             ) -> dict[str, dict[str, float]]:
    """Let the caller measure each case in turn; each case's figures, with every other
    process's CPU (and writes) per message over the caller's window."""
    results: dict[str, dict[str, float]] = {}
    for case, call in cases:
        assert _answer(caller_conn, "caller") == "window"
        before = {who: clock() for who, clock in clocks.items()}
        with spying(f"{case} {call}"):
            caller_conn.send("go")
            result = _answer(caller_conn, "caller")
        n = counts[case]
        row = {"rate": n / result["seconds"], "caller_us": result["cpu"] / n * 1e6}
        for who, clock in clocks.items():
            (cpu0, writes0), (cpu, writes) = before[who], clock()
            row[f"{who}_us"] = (cpu - cpu0) / n * 1e6
            if writes is not None and writes0 is not None:
                row[f"{who}_writes"] = (writes - writes0) / n
        if "p50" in result:
            row["p50_us"] = result["p50"] * 1e6
        results[f"{case} {call}"] = row
    assert _answer(caller_conn, "caller") == "done"
    return results


def _stopped(processes: list[Any]) -> None:
    for process in processes:
        process.join(30)
        if process.is_alive():
            process.kill()


def one_run(ctx: Any, counts: dict[str, int], profile: str | None = None,
            profile_out: str = "", cases: list[tuple[str, str]] = CASES
            ) -> dict[str, dict[str, float]]:
    """Start the three processes, measure every case; return its figures by case. With
    ``profile`` (a case's name), py-spy records the three processes during it."""
    server_conn, server_end = ctx.Pipe()
    server = ctx.Process(target=server_main, args=(cpus()[0], server_end), daemon=True)
    server.start()
    addr = _answer(server_conn, "server")
    consumer_conn, consumer_end = ctx.Pipe()
    consumer = ctx.Process(target=consumer_main, args=(addr, consumer_end), daemon=True)
    consumer.start()
    assert _answer(consumer_conn, "consumer") == "ready"
    caller_conn, caller_end = ctx.Pipe()
    caller = ctx.Process(target=caller_main, args=(addr, counts, cases, caller_end), daemon=True)
    caller.start()

    @contextlib.contextmanager
    def spying(name: str) -> Iterator[None]:
        if name != profile:
            yield
            return
        from _rpc_profile import recording

        with recording({"server": server.pid, "consumer": consumer.pid, "caller": caller.pid},
                       profile_out):
            yield

    try:
        return _measure(cases, counts, caller_conn,
                        {"server": _asking(server_conn, "server"),
                         "consumer": _asking(consumer_conn, "consumer")}, spying)
    finally:
        consumer_conn.send("stop")  # before the server, which it would try to reach again
        _stopped([caller, consumer])
        server_conn.send("stop")
        _stopped([server])


def nats_run(ctx: Any, binary: str, counts: dict[str, int], cases: list[tuple[str, str]]
             ) -> dict[str, dict[str, float]]:
    """The NATS side: nats-server, the responder and the caller; the figures by case."""
    with nats_server(binary, cpus()[0]) as (port, server_pid):
        url = f"nats://127.0.0.1:{port}"
        responder_conn, responder_end = ctx.Pipe()
        responder = ctx.Process(target=responder_main, args=(url, responder_end), daemon=True)
        responder.start()
        caller: Any = None
        try:
            assert _answer(responder_conn, "responder") == "ready"
            caller_conn, caller_end = ctx.Pipe()
            caller = ctx.Process(target=nats_caller_main, args=(url, counts, cases, caller_end),
                                 daemon=True)
            caller.start()
            return _measure(cases, counts, caller_conn,
                            {"server": _reading(server_pid),
                             "consumer": _reading(responder.pid)},
                            lambda _name: contextlib.nullcontext())
        finally:
            responder_conn.send("stop")
            _stopped([p for p in (caller, responder) if p is not None])


def _ratios(runs: list[dict[str, dict[str, float]]]) -> None:
    """Add each run's ratios to its rows: pipelined rates over invoke_many's, bus rates over
    their NATS peers'."""
    for r in runs:
        for name, row in r.items():
            case, call = name.split(" ", 1)
            if case == "pipelined":
                row["x_invoke_many"] = row["rate"] / r[BASELINE]["rate"]
            peer = f"{case} {PEERS[call]}" if call in PEERS else None
            if peer in r:
                row["x_nats"] = row["rate"] / r[peer]["rate"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=None, help="runs (default 3; --quick: 1)")
    ap.add_argument("--quick", action="store_true", help="small counts: check that it runs")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--no-nats", dest="nats", action="store_false",
                    help="skip the NATS side (nats-server and nats-py)")
    ap.add_argument("--profile", choices=[f"{case} {call}" for case, call in CASES],
                    default=None, help="py-spy the server, the consumer and the caller "
                    "during this case (one run), and print where their samples went")
    ap.add_argument("--profile-out", default="/tmp/bench-bus-profile/bus",
                    help="py-spy's files: this, then -server.raw, -consumer.raw, -caller.raw")
    ap.add_argument("--only", default=None, help="only the cases whose name contains this "
                    "(the baseline, and a bus case's NATS peer, are always measured)")
    args = ap.parse_args()
    counts = QUICK if args.quick else FULL
    cases = [(case, call) for case, call in CASES if f"{case} {call}" == BASELINE
             or args.only is None or args.only in f"{case} {call}"]
    ctx = multiprocessing.get_context("spawn")
    if args.profile is not None:
        from _rpc_profile import summarize

        row = one_run(ctx, counts, args.profile, args.profile_out)[args.profile]
        print(f"{args.profile} under py-spy: {row}")
        for role in ("server", "consumer", "caller"):
            path = f"{args.profile_out}-{role}.raw"
            print(f"\n=== {role} ({path}: collapsed stacks, speedscope.app opens them) ===")
            summarize(path, top=30)
        return 0
    nats_cases = [(case, call) for case, call in NATS_CASES
                  if args.only is None or args.only in f"{case} {call}"
                  or any((case, bus) in cases for bus, peer in PEERS.items() if peer == call)]
    missing = nats_missing() if args.nats else None
    if missing is not None:
        print(f"the NATS lines are skipped: no {missing}", file=sys.stderr)
    binary = shutil.which("nats-server") if args.nats and missing is None else None
    runs_wanted = args.runs or (1 if args.quick else 3)
    runs = []
    watch = CpuWatch()
    for run in range(runs_wanted):
        sides: list[Callable[[], dict[str, dict[str, float]]]] = [
            lambda: one_run(ctx, counts, cases=cases)]
        if binary is not None and nats_cases:
            sides.append(lambda: nats_run(ctx, binary, counts, nats_cases))
        turn = run % len(sides)  # the sides take turns going first
        results: dict[str, dict[str, float]] = {}
        for side in sides[turn:] + sides[:turn]:
            results.update(side())
        runs.append({name: results[name] for name in sorted(results, key=_order)})
        print(f"run {run + 1}/{runs_wanted} done", file=sys.stderr)
    others = watch.others_share()
    _ratios(runs)
    table = {name: {key: statistics.median(r[name][key] for r in runs) for key in row}
             for name, row in runs[0].items()}
    print(f"median of {runs_wanted} run(s); 128-byte bodies; CPU µs per message by process; "
          f"x invoke_many, x NATS: the median of per-run ratios of the rate"
          + ("" if others is None else f"; other processes took {others:.0%} of the CPUs"))
    for name, row in table.items():
        nats_row = " nats " in f" {name} "
        p50 = f"  p50 {row['p50_us']:7.0f} µs" if "p50_us" in row else ""
        ratio = f"  {row['x_invoke_many']:5.2f}x invoke_many" if "x_invoke_many" in row else ""
        ratio += f"  {row['x_nats']:5.2f}x NATS" if "x_nats" in row else ""
        writes = (f"   writes/msg server {row['server_writes']:.2f} consumer "
                  f"{row['consumer_writes']:.2f}" if "server_writes" in row else "")
        print(f"  {name:29} {row['rate']:9,.0f} /s   caller {row['caller_us']:6.1f}  "
              f"server {row['server_us']:6.1f}  "
              f"{'responder' if nats_row else 'consumer'} {row['consumer_us']:6.1f}"
              f"{p50}{ratio}{writes}")
    if args.json is not None:
        from _report import write_json

        write_json(str(args.json), {"runs": runs_wanted, "counts": counts,
                                    "nats": binary is not None, "others_share": others,
                                    "table": table})
    return 0


def _order(name: str) -> int:
    """Print order: ours as in CASES, each bus call's NATS peer just after it."""
    case, call = name.split(" ", 1)
    bus = next((bus for bus, peer in PEERS.items() if peer == call), None)
    return CASES.index((case, bus or call)) * 2 + (bus is not None)


if __name__ == "__main__":
    sys.exit(main())
