"""The hand-off floor: how close our sequential round trip is to what its design allows.

    .venv/bin/python bench/floor.py            # median of 5 runs, ~3 min
    .venv/bin/python bench/floor.py --runs 3

Each run measures, in this order and with the CPUs pinned as bench/rpc.py pins them: the raw
trio echo (the caller reads its own answer); the same echo with the hand-offs of our design and
no protocol work (bench/_floor_workers.py: a reader task waking the caller, a blocking thread
woken by the loop, a server thread answering through the loop); and our sequential
``invoke_sync`` in the four client/processor pairs of bench/rpc.py, and 64 trio tasks calling
in a loop. The tables give medians over runs; ratios are medians of per-run ratios. "protocol"
is our p50 minus its floor: what encoding, decoding, id matching, dispatch and the processor
call cost on both sides.
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

from _floor_workers import client_main, server_main  # noqa: E402
from rpc import FULL, CpuWatch, Server, cpu_layout, print_table, run_client  # noqa: E402

# (server kind, client kind, modes) in the order measured within each run
HANDOFF_MODES = ["latency_reader", "latency_thread", "tasks64"]
PLAN: list[tuple[str, str, list[str]]] = [
    ("raw", "raw", ["latency"]),
    ("raw", "raw-handoff", HANDOFF_MODES),
    ("raw-pool", "raw-handoff", HANDOFF_MODES),
    ("ours-async", "trio", ["latency", "tasks64"]),
    ("ours-async", "blocking", ["latency"]),
    ("ours-pool", "trio", ["latency", "tasks64"]),
    ("ours-pool", "blocking", ["latency"]),
]

Key = tuple[str, str, str]  # (server kind, client kind, mode)
RAW: Key = ("raw", "raw", "latency")

# (name, our case, its floor)
SEQUENTIAL: list[tuple[str, Key, Key]] = [
    ("trio client, async processor", ("ours-async", "trio", "latency"),
     ("raw", "raw-handoff", "latency_reader")),
    ("blocking client, async processor", ("ours-async", "blocking", "latency"),
     ("raw", "raw-handoff", "latency_thread")),
    ("trio client, pool processor", ("ours-pool", "trio", "latency"),
     ("raw-pool", "raw-handoff", "latency_reader")),
    ("blocking client, pool processor", ("ours-pool", "blocking", "latency"),
     ("raw-pool", "raw-handoff", "latency_thread")),
]
PIPELINED: list[tuple[str, Key, Key]] = [
    ("async processor, 64 tasks x invoke_sync", ("ours-async", "trio", "tasks64"),
     ("raw", "raw-handoff", "tasks64")),
    ("pool processor, 64 tasks x invoke_sync", ("ours-pool", "trio", "tasks64"),
     ("raw-pool", "raw-handoff", "tasks64")),
]


def one_run(ctx: Any, cpus: tuple[int | None, int | None]) -> dict[Key, dict[str, float]]:
    """Return {(server kind, client kind, mode): figures} for one pass over PLAN."""
    params = dict(FULL)
    out: dict[Key, dict[str, float]] = {}
    for server_kind, client_kind, modes in PLAN:
        with Server(ctx, server_kind, cpus[0], server_main) as server:
            got = run_client(ctx, client_kind, server.addr, modes,
                             dict(params, server_pid=server.pid), cpus[1], client_main)
        for mode, value in got.items():
            out[(server_kind, client_kind, mode)] = value
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

    def seq_row(name: str, ours: Key, floor: Key) -> list[str]:
        return [
            name,
            f"{med(lambda r: r[ours]['p50']):.0f}",
            f"{med(lambda r: r[floor]['p50']):.0f}",
            f"{med(lambda r: r[ours]['p50'] - r[floor]['p50']):.0f}",
            f"{med(lambda r: r[ours]['p50'] / r[RAW]['p50']):.2f}x",
            f"{med(lambda r: r[floor]['p50'] / r[RAW]['p50']):.2f}x",
        ]

    def pipe_row(name: str, ours: Key, floor: Key) -> list[str]:
        cells = [name]
        for key in (ours, floor):
            cells += [f"{med(lambda r: r[key]['rps']):,.0f}",  # noqa: B023 - used at once
                      f"{med(lambda r: r[key].get('cli_us', 0.0)):.1f}",  # noqa: B023
                      f"{med(lambda r: r[key].get('srv_us', 0.0)):.1f}"]  # noqa: B023
        cells.append(f"{med(lambda r: r[ours]['rps'] / r[floor]['rps']):.2f}x")
        return cells

    raw = med(lambda r: r[RAW]["p50"])
    print(f"\nsequential p50, µs; raw trio echo (the caller reads its answer): {raw:.0f} µs\n")
    print_table([seq_row(*case) for case in SEQUENTIAL],
                ["case", "ours", "floor", "protocol", "ours / raw", "floor / raw"])
    print("\npipelined, 64 in flight: req/s and CPU µs per request (client, server)\n")
    print_table([pipe_row(*case) for case in PIPELINED],
                ["case", "ours", "cli", "srv", "floor", "cli", "srv", "ours / floor"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
