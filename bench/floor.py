"""The hand-off floor: how close our sequential round trip is to what its design allows.

    .venv/bin/python bench/floor.py            # median of 5 runs, ~3 min
    .venv/bin/python bench/floor.py --runs 3

Each run measures, in this order and with the CPUs pinned as bench/rpc.py pins them: the raw
trio echo (the caller reads its own answer); the same echo with the hand-offs of our design and
no protocol work (bench/_floor_workers.py: a reader task waking the caller, a blocking thread
woken by the loop, a server thread answering through the loop); and our sequential
``invoke_sync`` in the four client/processor pairs of bench/rpc.py. The table gives medians
over runs; ratios are medians of per-run ratios to the raw echo of the same run. "protocol" is
our p50 minus its floor: what decoding, id matching, dispatch and the processor call cost.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]

from rpc import FULL, CpuWatch, Server, cpu_layout, print_table, run_client  # noqa: E402

# (server kind, client kind, modes) in the order measured within each run
PLAN: list[tuple[str, str, list[str]]] = [
    ("raw", "raw", ["latency"]),
    ("raw", "raw-handoff", ["latency_reader", "latency_thread"]),
    ("raw-pool", "raw-handoff", ["latency_reader", "latency_thread"]),
    ("ours-async", "trio", ["latency"]),
    ("ours-async", "blocking", ["latency"]),
    ("ours-pool", "trio", ["latency"]),
    ("ours-pool", "blocking", ["latency"]),
]

# our case -> its floor: (name, ours, floor)
CASES: list[tuple[str, tuple[str, str], tuple[str, str]]] = [
    ("trio client, async processor", ("ours-async", "trio"), ("raw", "latency_reader")),
    ("blocking client, async processor", ("ours-async", "blocking"), ("raw", "latency_thread")),
    ("trio client, pool processor", ("ours-pool", "trio"), ("raw-pool", "latency_reader")),
    ("blocking client, pool processor", ("ours-pool", "blocking"),
     ("raw-pool", "latency_thread")),
]


def one_run(ctx: Any, cpus: tuple[int | None, int | None]) -> dict[tuple[str, str], float]:
    """Return {(server kind, mode or client kind): p50 µs} for one pass over PLAN."""
    params = dict(FULL)
    out: dict[tuple[str, str], float] = {}
    for server_kind, client_kind, modes in PLAN:
        with Server(ctx, server_kind, cpus[0]) as server:
            got = run_client(ctx, client_kind, server.addr, modes,
                             dict(params, server_pid=server.pid), cpus[1])
        for mode, value in got.items():
            key = (server_kind, client_kind if mode == "latency" else mode)
            out[key] = value["p50"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="median of N runs (default 5)")
    args = ap.parse_args(argv)
    ctx = multiprocessing.get_context("spawn")
    cpus = cpu_layout()
    runs = []
    for i in range(args.runs):
        watch = CpuWatch()
        runs.append(one_run(ctx, cpus))
        others = watch.others_share()
        print(f"run {i + 1}/{args.runs}: other processes used "
              f"{'?' if others is None else f'{others:.0%}'} of the CPUs", flush=True)

    def med(f: Any) -> float:
        return float(statistics.median(f(r) for r in runs))

    def row(name: str, ours: tuple[str, str], floor: tuple[str, str]) -> list[str]:
        raw = ("raw", "raw")
        return [
            name,
            f"{med(lambda r: r[ours]):.0f}",
            f"{med(lambda r: r[floor]):.0f}",
            f"{med(lambda r: r[ours] - r[floor]):.0f}",
            f"{med(lambda r: r[ours] / r[raw]):.2f}x",
            f"{med(lambda r: r[floor] / r[raw]):.2f}x",
        ]

    raw = med(lambda r: r[("raw", "raw")])
    rows = [row(*case) for case in CASES]
    print(f"\nsequential p50, µs; raw trio echo (the caller reads its answer): {raw:.0f} µs\n")
    print_table(rows, ["case", "ours", "floor", "protocol", "ours / raw", "floor / raw"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
