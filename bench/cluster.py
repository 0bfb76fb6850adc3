"""Spark on a standalone cluster against local[2], calling 1 or 3 server processes; and what
losing a server mid-job costs.

    .venv/bin/python bench/cluster.py                       # 200,000 rows, best of 3
    .venv/bin/python bench/cluster.py --rows 500000 --json bench/results/cluster.json

Each job upper-cases ``row-<id>`` strings through ``remoting serve`` processes (the cluster
tests' service), per row (`remote_udf`) or per Arrow batch of 2,000 rows (`remote_batch_udf`;
the handler also does 20 ms of work per batch), and checks every row; it is timed as its one
Spark action, after a warm-up job. The standalone cluster is a Master and one Worker (2 cores,
one executor) started with the installed pyspark's ``spark-class``; its executors run the
packed virtualenv of the cluster tests. ``local[2]`` runs 2 task slots in the driver's JVM.
Both have two Python workers: the difference is the executor JVM and the shipping. Then, on
the cluster with 3 servers and ``idempotent=True``, one server is killed (SIGKILL) or stopped
(SIGSTOP) mid-job: the extra seconds over the median run are the lost time. The table also
gives the connections each server saw.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
# this folder holds a codec.py script: keep it from shadowing the codec package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from remoting import RemotingClient  # noqa: E402
from tests.cluster.fleet import Fleet  # noqa: E402
from tests.cluster.fleet_job import run, session  # noqa: E402
from tests.cluster.standalone import StandaloneCluster, code_zip, packed_env  # noqa: E402

MODES = ("row", "batch")
FLEETS = (1, 3)


def measure(spark: Any, rows: int, repeats: int, label: str
            ) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """Time every (mode, fleet size) ``repeats`` times, interleaved.

    Returns the times and, for 3 servers, the connections each saw and how the rows of one
    more per-row job spread over them.
    """
    times: dict[str, list[float]] = {}
    with Fleet(max(FLEETS)) as fleet:
        for mode in MODES:  # warm-up: Python workers started, connections made
            run(spark, ",".join(fleet.addresses), mode, 20_000)
        for _ in range(repeats):
            for mode in MODES:
                for n in FLEETS:
                    result = run(spark, ",".join(fleet.addresses[:n]), mode, rows)
                    if result["right"] != rows:
                        raise SystemExit(f"{label} {mode} x{n}: wrong rows: {result}")
                    times.setdefault(f"{label}|{mode}|{n}", []).append(result["seconds"])
                    print(f"  {label:<10} {mode:<5} {n} server(s): "
                          f"{rows / result['seconds']:>9,.0f} rows/s", flush=True)
        with RemotingClient() as client:
            before = fleet.served(client)
            run(spark, ",".join(fleet.addresses), "row", rows)  # how one job spreads
            after = fleet.served(client)
            stats = fleet.stats(client)
    spread = [a - b for a, b in zip(after, before, strict=True)]
    return times, {"connections": [s["peers"] for s in stats], "rows_per_server": spread}


def lost_time(spark: Any, rows: int, mode: str, fault: int) -> dict[str, Any]:
    """Run once with ``fault`` hitting one of 3 servers mid-job (idempotent); time it."""
    with Fleet(3) as fleet:
        run(spark, ",".join(fleet.addresses), mode, 20_000, idempotent=True)  # warm-up
        done = threading.Event()
        hit: list[Any] = []
        killer = threading.Thread(target=lambda: hit.append(
            fleet.hit_mid_job(rows, fault, stop_waiting=done.is_set)))
        killer.start()
        try:
            result = run(spark, ",".join(fleet.addresses), mode, rows, idempotent=True,
                         cooldown=10.0)
        finally:
            done.set()
            killer.join()
    if result["right"] != rows or result["errors"]:
        raise SystemExit(f"fault {fault} {mode}: rows lost: {result}")
    return {"seconds": result["seconds"], "hit": hit[0]}


def one_master(master: str, rows: int, repeats: int, out: str) -> None:
    """Measure on ``master`` ("local[2]" or "standalone") and write the figures to ``out``.

    Each master gets a process of its own: ``spark.archives`` and ``spark.submit.pyFiles``
    only take effect when the driver's JVM starts.
    """
    deaths: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        if master == "local[2]":
            spark = session("local[2]", None, None)
        else:
            cluster = stack.enter_context(StandaloneCluster(cores=2, memory="2g"))
            spark = session(cluster.master_url, str(packed_env()), str(code_zip(Path(tmp))))
        try:
            times, peers = measure(spark, rows, repeats, master)
            if master == "standalone":
                for mode in MODES:
                    for name, fault in (("SIGKILL", signal.SIGKILL), ("SIGSTOP", signal.SIGSTOP)):
                        deaths[f"{mode}|{name}"] = lost_time(spark, rows, mode, fault)
                        print(f"  {mode} {name}: {deaths[f'{mode}|{name}']}", flush=True)
        finally:
            spark.stop()
    Path(out).write_text(json.dumps({"times": times, "peers": peers, "deaths": deaths}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--only", choices=["local[2]", "standalone"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        one_master(args.only, args.rows, args.repeats, args.out)
        return 0
    times: dict[str, list[float]] = {}
    peers: dict[str, dict[str, list[int]]] = {}
    deaths: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for master in ("local[2]", "standalone"):
            out = Path(tmp) / "figures.json"
            subprocess.run([sys.executable, __file__, "--only", master, "--rows", str(args.rows),
                            "--repeats", str(args.repeats), "--out", str(out)], check=True)
            figures = json.loads(out.read_text())
            times.update(figures["times"])
            peers[master] = figures["peers"]
            deaths.update(figures["deaths"])
    print(f"\n{args.rows:,} rows, best of {args.repeats} (median in brackets), rows/s")
    print(f"{'master':<12} {'mode':<6} {'1 server':>20} {'3 servers':>20}")
    for master in ("local[2]", "standalone"):
        for mode in MODES:
            cells = []
            for n in FLEETS:
                ts = times[f"{master}|{mode}|{n}"]
                best, median = args.rows / min(ts), args.rows / statistics.median(ts)
                cells.append(f"{best:,.0f} ({median:,.0f})")
            print(f"{master:<12} {mode:<6} {cells[0]:>20} {cells[1]:>20}")
    for master, seen in peers.items():
        print(f"{master}, 3 servers: connections seen per server {seen['connections']}, "
              f"rows of one per-row job per server {seen['rows_per_server']}")
    for key, death in deaths.items():
        mode, name = key.split("|")
        base = statistics.median(times[f"standalone|{mode}|3"])
        print(f"{name} of 1 of 3 servers, {mode}: {death['seconds']:.1f} s against "
              f"{base:.1f} s: {death['seconds'] - base:+.1f} s lost (hit at {death['hit']})")
    if args.json:
        sys.path.append(str(HERE))
        from _report import write_json

        write_json(args.json, {"bench": "cluster", "rows": args.rows, "times": times,
                               "peers": peers, "deaths": deaths})
    return 0


if __name__ == "__main__":
    sys.exit(main())
