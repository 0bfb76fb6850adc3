"""64 blocking threads calling one server: per-call latency tail, alone or beside a busy thread.

    .venv/bin/python bench/threads_tail.py                      # this checkout, 3 rounds
    .venv/bin/python bench/threads_tail.py --a ../other-checkout # alternated with another

64 threads share one `RemotingClient` connection, each looping ``invoke_sync`` (128-byte
echo, an async processor's server in a process of its own on the first CPU, the client on the
second), 40,000 calls a run; "busy" adds one more thread in the client process spinning in
Python, which holds the interpreter lock but for its switch interval. Each line gives the
rate and the calls' p50, p99, p99.9 and longest latency: how the threads' wake-ups share the
interpreter lock with other Python work. Rounds alternate the sides (``--a``: another
checkout's library first on the path).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# Python put bench/ first on sys.path, where bench/codec.py would shadow the `codec` package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

CALLS = 40_000
THREADS = 64
WARM = 500
ECHO = 100


def serve(conn: Any) -> None:
    """The server's process: an async echo processor, until told to stop."""
    if len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {0})
    from processors import AsyncEchoProcessor
    from remoting import RemotingServer, ServerConfig

    with RemotingServer(ServerConfig()) as server:
        server.register_processor(ECHO, AsyncEchoProcessor())
        conn.send(server.addr)
        conn.recv()


def measure(busy: bool) -> dict[str, float]:
    """One run in this process: the server started, 64 threads calling, figures returned."""
    from codec import RemotingCommand
    from remoting import RemotingClient

    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=serve, args=(child,), daemon=True)
    process.start()
    try:
        if not parent.poll(30):
            raise RuntimeError("the server did not start")
        addr = parent.recv()
        if len(os.sched_getaffinity(0)) > 1:
            os.sched_setaffinity(0, {1})
        stop = threading.Event()

        def spin() -> None:
            total = 0
            while not stop.is_set():
                for i in range(1000):
                    total += i

        body = bytes(128)
        latencies: list[float] = []
        lock = threading.Lock()
        left = [CALLS]
        with RemotingClient() as client:
            for _ in range(WARM):
                client.invoke_sync(addr, RemotingCommand.create_request(ECHO, body=body), 5)
            if busy:
                threading.Thread(target=spin, daemon=True).start()

            def worker() -> None:
                mine = []
                while True:
                    with lock:
                        if left[0] <= 0:
                            break
                        left[0] -= 1
                    started = time.perf_counter()
                    client.invoke_sync(addr, RemotingCommand.create_request(ECHO, body=body), 5)
                    mine.append(time.perf_counter() - started)
                with lock:
                    latencies.extend(mine)

            began = time.perf_counter()
            threads = [threading.Thread(target=worker) for _ in range(THREADS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.perf_counter() - began
            stop.set()
    finally:
        parent.send("stop")
        process.join(10)
        if process.is_alive():
            process.kill()
    latencies.sort()

    def at(share: float) -> float:
        return latencies[min(len(latencies) - 1, int(len(latencies) * share))] * 1e6

    return {"rate": CALLS / wall, "p50": at(0.5), "p99": at(0.99), "p999": at(0.999),
            "max": latencies[-1] * 1e6}


def run_side(tree: Path | None, busy: bool) -> dict[str, float]:
    """One run in a child process (``tree``'s library first on its path)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                           "busy" if busy else "alone"], env=env, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"a run failed:\n{proc.stderr[-3000:]}")
    return {k: float(v) for k, v in (item.split("=") for item in proc.stdout.split())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--a", type=Path, default=None, help="another checkout, alternated")
    ap.add_argument("--child", choices=["alone", "busy"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        figures = measure(args.child == "busy")
        print(" ".join(f"{k}={v}" for k, v in figures.items()))
        return 0
    sides: list[tuple[str, Path | None]] = [("this", None)]
    if args.a is not None:
        sides.insert(0, ("A", args.a))
    results: dict[tuple[str, bool], list[dict[str, float]]] = {}
    for round_ in range(args.rounds):
        order = sides if round_ % 2 == 0 else sides[::-1]
        for busy in (False, True):
            for label, tree in order:
                results.setdefault((label, busy), []).append(run_side(tree, busy))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    print(f"64 threads x invoke_sync, {CALLS:,} calls a run; medians of {args.rounds} runs; µs")
    print("| side | beside | req/s | p50 | p99 | p99.9 | max |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (label, busy), runs in results.items():
        med = {k: statistics.median(run[k] for run in runs) for k in runs[0]}
        print(f"| {label} | {'a busy thread' if busy else 'nothing'} | {med['rate']:,.0f} | "
              f"{med['p50']:,.0f} | {med['p99']:,.0f} | {med['p999']:,.0f} | {med['max']:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
