"""The event bus's rates against the plain calls it is built on, in one run.

    .venv/bin/python bench/bus.py               # median of 3 runs
    .venv/bin/python bench/bus.py --quick       # small counts, 1 run: checks that it runs
    .venv/bin/python bench/bus.py --runs 5 --json bench/results/bus.json
    .venv/bin/python bench/bus.py --only "pipelined send"   # that case and invoke_many

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

Each line gives messages per second and the CPU time each process spent per message
(getrusage: all its threads); each pipelined line also its rate as a ratio of
``invoke_many``'s in the same run (the median of the per-run ratios). The machine's other
load skews rates more than CPU times. Each line also gives the socket writes per message of
the server and of the consumer (their endpoints' `statistics().writes`).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# Python put this script's directory first on sys.path, where bench/codec.py would shadow the
# real `codec` package: move it to the end. Spawned children inherit this order.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]

ECHO_CODE = 100
BODY = b"x" * 128
ANSWER_SECONDS = 300.0  # a child that says nothing for this long has failed
FULL = {"sequential": 3000, "pipelined": 30000}
QUICK = {"sequential": 200, "pipelined": 2000}
BASELINE = "pipelined invoke_many"  # what the pipelined rates are measured against
CASES = [("sequential", "invoke_sync"), ("sequential", "send"), ("sequential", "request"),
         ("pipelined", "invoke_many"), ("pipelined", "invoke_sync"), ("pipelined", "send"),
         ("pipelined", "request")]


def _cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _serve_cpu(conn: Any, endpoint: Any) -> None:
    while conn.recv() == "cpu":  # asked at the start and the end of each window
        stats = endpoint.statistics()
        conn.send((_cpu(), stats.writes))


def server_main(conn: Any) -> None:
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
        bus.consumer("echo", lambda message: message.reply(message.body))
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
                bus.send("echo", BODY)
            else:
                bus.request("echo", BODY)

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
                                          for _ in range(count)], 30, limit=64)

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
                        await bus.send("echo", BODY)
                    else:
                        await bus.request("echo", BODY)

            async def tasks(total: int) -> None:
                async with trio.open_nursery() as nursery:
                    for _ in range(64):
                        nursery.start_soon(worker, max(1, total // 64))

            await tasks(warm)
            await trio.to_thread.run_sync(_window, conn)
            cpu0, t0 = _cpu(), time.perf_counter()
            await tasks(n)
            result = {"seconds": time.perf_counter() - t0, "cpu": _cpu() - cpu0}
            await bus.aclose()
            return result

    return trio.run(run)


def _answer(conn: Any, who: str) -> Any:
    if not conn.poll(ANSWER_SECONDS):
        raise RuntimeError(f"the {who} process did not answer within {ANSWER_SECONDS} s")
    return conn.recv()


def one_run(ctx: Any, counts: dict[str, int], profile: str | None = None,
            profile_out: str = "", cases: list[tuple[str, str]] = CASES
            ) -> dict[str, dict[str, float]]:
    """Start the three processes, measure every case; return its figures by case. With
    ``profile`` (a case's name), py-spy records the three processes during it."""
    server_conn, server_end = ctx.Pipe()
    server = ctx.Process(target=server_main, args=(server_end,), daemon=True)
    server.start()
    addr = _answer(server_conn, "server")
    consumer_conn, consumer_end = ctx.Pipe()
    consumer = ctx.Process(target=consumer_main, args=(addr, consumer_end), daemon=True)
    consumer.start()
    assert _answer(consumer_conn, "consumer") == "ready"
    caller_conn, caller_end = ctx.Pipe()
    caller = ctx.Process(target=caller_main, args=(addr, counts, cases, caller_end), daemon=True)
    caller.start()
    results: dict[str, dict[str, float]] = {}
    try:
        for case, call in cases:
            assert _answer(caller_conn, "caller") == "window"
            others0 = []
            for conn, who in ((server_conn, "server"), (consumer_conn, "consumer")):
                conn.send("cpu")
                others0.append(_answer(conn, who))
            with contextlib.ExitStack() as spying:
                if profile == f"{case} {call}":
                    from _rpc_profile import recording

                    spying.enter_context(recording(
                        {"server": server.pid, "consumer": consumer.pid, "caller": caller.pid},
                        profile_out))
                caller_conn.send("go")
                result = _answer(caller_conn, "caller")
            n = counts[case]
            row = {"rate": n / result["seconds"], "caller_us": result["cpu"] / n * 1e6}
            for (conn, who), cpu0 in zip(((server_conn, "server"), (consumer_conn, "consumer")),
                                         others0, strict=True):
                conn.send("cpu")
                cpu1, writes1 = _answer(conn, who)
                row[f"{who}_us"] = (cpu1 - cpu0[0]) / n * 1e6
                row[f"{who}_writes"] = (writes1 - cpu0[1]) / n
            if "p50" in result:
                row["p50_us"] = result["p50"] * 1e6
            results[f"{case} {call}"] = row
        assert _answer(caller_conn, "caller") == "done"
    finally:
        for conn in (server_conn, consumer_conn):
            conn.send("stop")
        for process in (caller, consumer, server):
            process.join(30)
            if process.is_alive():
                process.kill()
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=None, help="runs (default 3; --quick: 1)")
    ap.add_argument("--quick", action="store_true", help="small counts: check that it runs")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--profile", choices=[f"{case} {call}" for case, call in CASES],
                    default=None, help="py-spy the server, the consumer and the caller "
                    "during this case (one run), and print where their samples went")
    ap.add_argument("--profile-out", default="/tmp/bench-bus-profile/bus",
                    help="py-spy's files: this, then -server.raw, -consumer.raw, -caller.raw")
    ap.add_argument("--only", default=None, help="only the cases whose name contains this "
                    "(the baseline is always measured)")
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
    runs_wanted = args.runs or (1 if args.quick else 3)
    runs = []
    for run in range(runs_wanted):
        runs.append(one_run(ctx, counts, cases=cases))
        print(f"run {run + 1}/{runs_wanted} done", file=sys.stderr)
    for r in runs:  # each pipelined rate against invoke_many's of the same run
        for case, row in r.items():
            if case.startswith("pipelined"):
                row["x_invoke_many"] = row["rate"] / r[BASELINE]["rate"]
    table = {name: {key: statistics.median(r[name][key] for r in runs) for key in row}
             for name, row in runs[0].items()}
    print(f"median of {runs_wanted} run(s); 128-byte bodies; CPU µs per message by process; "
          f"x invoke_many: the median of per-run ratios of the rate")
    for name, row in table.items():
        p50 = f"  p50 {row['p50_us']:7.0f} µs" if "p50_us" in row else ""
        ratio = f"  {row['x_invoke_many']:5.2f}x invoke_many" if "x_invoke_many" in row else ""
        print(f"  {name:24} {row['rate']:9,.0f} /s   caller {row['caller_us']:6.1f}  "
              f"server {row['server_us']:6.1f}  consumer {row['consumer_us']:6.1f}{p50}{ratio}"
              f"   writes/msg server {row['server_writes']:.2f} consumer "
              f"{row['consumer_writes']:.2f}")
    if args.json is not None:
        from _report import write_json

        write_json(str(args.json), {"runs": runs_wanted, "counts": counts, "table": table})
    return 0


if __name__ == "__main__":
    sys.exit(main())
