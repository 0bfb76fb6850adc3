"""What OpenTelemetry costs per request: CPU µs of the client and the server processes.

    .venv/bin/python bench/otel.py             # median of 3 runs
    .venv/bin/python bench/otel.py --runs 5 --json bench/results/otel.json

Modes, alternated within each run (so drift hits them all alike):
- ``off``: the ``otel`` extra installed, no SDK configured (what a user without telemetry
  pays; the same code path as the extra not installed: nothing is registered);
- ``unsampled``: the calls belong to a trace that was not sampled (the client makes them
  inside an unsampled span; the SDK's default ``ParentBased`` sampler), no metrics: how the
  calls of the traces a ratio sampler dropped cost;
- ``dropped``: a sampler that drops every span (``ALWAYS_OFF``) and calls made outside any
  trace, no metrics: each call is a root, whose span is made (unrecorded) to carry a
  context that says "not sampled";
- ``metrics``: the SDK's meter provider only (a reader that never exports during the run);
- ``traces``: every span sampled and handed to a batch span processor whose exporter discards
  them (the SDK's cost, without a network);
- ``both``: traces and metrics.

Cases: ``sequential``, blocking ``RemotingClient.invoke_sync`` to a sync (pool) processor,
one at a time (the p50 latency too); ``pipelined``, 64 trio tasks looping ``invoke_sync``
against an async processor (requests per second too). Server and client are processes of
their own, pinned to two CPUs; CPU time is each process's own (all threads, getrusage).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# Python put this script's directory first on sys.path, where bench/codec.py would shadow the
# real `codec` package: move it to the end. Spawned children inherit this order.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]

MODES = ["off", "unsampled", "dropped", "metrics", "traces", "both"]
ANSWER_SECONDS = 300.0  # a child that says nothing for this long has failed
CASES = {"sequential": 4000, "pipelined": 40000}  # requests measured per case
WARMUP = 0.25  # share of requests sent first, not measured
CODE_POOL, CODE_ASYNC = 100, 101


def _configure(mode: str) -> None:
    """Configure the global SDK of this process for ``mode``."""
    if mode == "off":
        return
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    if mode in ("traces", "both"):
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Discard()))
        trace.set_tracer_provider(provider)
    if mode in ("dropped", "unsampled"):
        trace.set_tracer_provider(TracerProvider(sampler=ParentBased(ALWAYS_OFF)))
    if mode in ("metrics", "both"):
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def _cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def server_main(mode: str, cpu: int | None, conn: Any) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    _configure(mode)
    from processors import AsyncEchoProcessor, EchoProcessor
    from remoting import RemotingServer

    with RemotingServer() as server:
        server.register_processor(CODE_POOL, EchoProcessor())
        server.register_processor(CODE_ASYNC, AsyncEchoProcessor())
        conn.send(server.addr)
        while conn.recv() == "cpu":  # the client asks at the start and the end of a window
            conn.send(_cpu())


def client_main(mode: str, case: str, addr: str, cpu: int | None, conn: Any) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    _configure(mode)
    if mode == "unsampled":  # every call below belongs to this unsampled trace
        from opentelemetry import context, trace

        context.attach(trace.set_span_in_context(trace.get_tracer("bench").start_span("job")))
    n = CASES[case]
    warm = int(n * WARMUP)
    body = b"x" * 128
    if case == "sequential":
        from remoting import RemotingClient, RemotingCommand

        with RemotingClient() as client:
            def call() -> None:
                client.invoke_sync(addr, RemotingCommand.create_request(CODE_POOL, body=body))

            for _ in range(warm):
                call()
            conn.send("window")
            conn.recv()
            times = []
            cpu0, t0 = _cpu(), time.perf_counter()
            for _ in range(n):
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
            elapsed, used = time.perf_counter() - t0, _cpu() - cpu0
        conn.send({"cpu": used, "seconds": elapsed, "p50": statistics.median(times)})
        return
    import trio

    from remoting import RemotingCommand, open_client

    async def run() -> dict[str, float]:
        async with open_client() as client:
            async def worker(count: int) -> None:
                for _ in range(count):
                    await client.invoke_sync(
                        addr, RemotingCommand.create_request(CODE_ASYNC, body=body), 30)

            async with trio.open_nursery() as nursery:
                for _ in range(64):
                    nursery.start_soon(worker, warm // 64)
            conn.send("window")
            await trio.to_thread.run_sync(conn.recv)
            cpu0, t0 = _cpu(), time.perf_counter()
            async with trio.open_nursery() as nursery:
                for _ in range(64):
                    nursery.start_soon(worker, n // 64)
            return {"cpu": _cpu() - cpu0, "seconds": time.perf_counter() - t0}

    conn.send(trio.run(run))


def _answer(conn: Any, who: str) -> Any:
    if not conn.poll(ANSWER_SECONDS):
        raise RuntimeError(f"the {who} process did not answer within {ANSWER_SECONDS} s")
    return conn.recv()


def measure(ctx: Any, mode: str, case: str, cpus: tuple[int | None, int | None]
            ) -> dict[str, float]:
    server_conn, server_end = ctx.Pipe()
    server = ctx.Process(target=server_main, args=(mode, cpus[0], server_end), daemon=True)
    server.start()
    addr = _answer(server_conn, "server")
    client_conn, client_end = ctx.Pipe()
    client = ctx.Process(target=client_main, args=(mode, case, addr, cpus[1], client_end),
                         daemon=True)
    client.start()
    assert _answer(client_conn, "client") == "window"
    server_conn.send("cpu")
    server_cpu0 = _answer(server_conn, "server")
    client_conn.send("go")
    result = _answer(client_conn, "client")
    server_conn.send("cpu")
    result["server_cpu"] = _answer(server_conn, "server") - server_cpu0
    server_conn.send("stop")
    client.join(30)
    server.join(30)
    n = CASES[case]
    return {"client_us": result["cpu"] / n * 1e6, "server_us": result["server_cpu"] / n * 1e6,
            "rate": n / result["seconds"], **({"p50_us": result["p50"] * 1e6}
                                               if "p50" in result else {})}


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()
    ctx = multiprocessing.get_context("spawn")
    cpus_seen = sorted(os.sched_getaffinity(0))
    cpus = (cpus_seen[0], cpus_seen[1]) if len(cpus_seen) >= 2 else (None, None)
    runs: list[dict[str, dict[str, dict[str, float]]]] = []
    for run in range(args.runs):
        results: dict[str, dict[str, dict[str, float]]] = {}
        for case in CASES:
            for mode in MODES if run % 2 == 0 else MODES[::-1]:
                results.setdefault(case, {})[mode] = measure(ctx, mode, case, cpus)
        runs.append(results)
        print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
    table: dict[str, dict[str, dict[str, float]]] = {}
    for case in CASES:
        for mode in MODES:
            keys = runs[0][case][mode]
            table.setdefault(case, {})[mode] = {
                k: statistics.median(r[case][mode][k] for r in runs) for k in keys}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent).stdout.strip()
    print(f"commit {commit}, {time.strftime('%Y-%m-%d')}, {_cpu_model()}, median of "
          f"{args.runs} runs; CPU µs per request (client + server), and extra over 'off'")
    for case, by_mode in table.items():
        base = by_mode["off"]["client_us"] + by_mode["off"]["server_us"]
        print(f"\n{case}:")
        for mode, row in by_mode.items():
            total = row["client_us"] + row["server_us"]
            extra = f"+{total - base:.1f}" if mode != "off" else "-"
            speed = (f"p50 {row['p50_us']:.0f} µs" if "p50_us" in row
                     else f"{row['rate']:,.0f} req/s")
            print(f"  {mode:9} client {row['client_us']:6.1f}  server {row['server_us']:6.1f}"
                  f"  total {total:6.1f}  extra {extra:>6}  {speed}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"commit": commit, "date": time.strftime("%Y-%m-%d"),
                                         "cpu": _cpu_model(), "runs": args.runs,
                                         "table": table}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
