"""Serving on 1 vs 2 worker processes (``remoting serve --workers N``), two client processes.

Run: ``.venv/bin/python bench/workers.py [--seconds 5] [--runs 3]``. Prints req/s for each
worker count and the ratio. Everything runs on 127.0.0.1 and stops by itself.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# this folder holds a codec.py script: keep it from shadowing the codec package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))


def client(addr: str, seconds: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    import logging

    logging.getLogger("remoting").setLevel(logging.WARNING)
    from codec import RemotingCommand, SerializeType
    from remoting import RemotingClient

    def batch() -> list[RemotingCommand]:
        cmds = []
        for _ in range(2000):
            cmd = RemotingCommand.create_request(2, body=b"x" * 128)
            cmd.serialize_type = SerializeType.ROCKETMQ
            cmds.append(cmd)
        return cmds

    with RemotingClient() as c:
        c.invoke_many(addr, batch(), timeout=10, limit=128)  # warm up
        done = 0
        errors = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            results = c.invoke_many(addr, batch(), timeout=10, limit=128)
            done += len(results)
            errors += sum(1 for r in results if not hasattr(r, "code"))
        out.put((done, errors, time.perf_counter() - start))


def measure(workers: int, seconds: float) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    server = subprocess.Popen(
        [sys.executable, "-m", "remoting", "serve", "examples.echo_service:processors",
         "--workers", str(workers)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = None
        ready = 0
        deadline = time.monotonic() + 60
        while ready < workers or port is None:
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not start within 60 s")
            line = server.stdout.readline()
            if not line:
                raise RuntimeError("the server exited")
            if m := re.search(r"on 127\.0\.0\.1:(\d+)", line):
                port = port or m.group(1)
            if "(pid" in line:
                ready += 1
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        procs = [ctx.Process(target=client, args=(f"127.0.0.1:{port}", seconds, out))
                 for _ in range(2)]
        for p in procs:
            p.start()
        try:
            results = [out.get(timeout=seconds + 60) for _ in procs]
        finally:
            for p in procs:
                p.join(30)
                if p.is_alive():
                    p.kill()
                    p.join()
        total = sum(r[0] for r in results)
        errors = sum(r[1] for r in results)
        if errors:
            print(f"  {errors} errors with {workers} workers")
        return total / max(r[2] for r in results)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; 2 client processes, invoke_many windows of 128, "
          "async echo, 128-byte bodies")
    rates: dict[int, list[float]] = {1: [], 2: []}
    for run in range(args.runs):
        for workers in (1, 2):
            rate = measure(workers, args.seconds)
            rates[workers].append(rate)
            print(f"  run {run + 1}: {workers} worker(s): {rate:,.0f} req/s", flush=True)
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    print(f"median: 1 worker {one:,.0f} req/s, 2 workers {two:,.0f} req/s, ratio {two / one:.2f}x")
    if args.json:
        sys.path.append(str(ROOT / "bench"))
        from _report import write_json

        write_json(args.json, {"bench": "workers", "seconds": args.seconds,
                               "req_per_s": {str(k): v for k, v in rates.items()}})


if __name__ == "__main__":
    main()
