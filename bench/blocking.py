"""The blocking client's styles alone, in CPU per request: a quick, load-tolerant check.

    .venv/bin/python bench/blocking.py                       # this checkout, 3 rounds
    .venv/bin/python bench/blocking.py --a /work/ab/base --rounds 5   # A/B, alternated
    .venv/bin/python bench/blocking.py --io loop --modes many64,latency

Each round starts one server process (``--server async``: `AsyncEchoProcessor`; ``pool``:
`EchoProcessor` on 4 threads) and one blocking `RemotingClient` process, pinned as
bench/rpc.py pins them, and runs the modes of bench/rpc.py's blocking client: ``latency``
(sequential ``invoke_sync``), ``many64`` (``invoke_many``, limit 64), ``threads64`` (64
threads looping ``invoke_sync``), ``window64`` (64 ``invoke_async`` in flight, each callback
lets the next go). Modes ``floor64`` and ``floorseq`` are no client of ours: the calling
thread pipelines 64 requests (``floor64``) or makes one call at a time (``floorseq``) on a
plain blocking socket with the library's codec (``create_request``, ``encode_frame``,
``FrameDecoder``), the floors a blocking ``invoke_many`` and ``invoke_sync`` can approach.

For every mode it prints the client's CPU time per request (all its threads,
/proc/<pid>/task/*/schedstat), its context switches per request (voluntary / involuntary,
/proc/<pid>/task/*/status), the server's CPU per request, and the rate (req/s, or p50 µs for
``latency``). CPU per request barely moves when other processes compete for the CPUs; rates
do. With ``--a DIR`` every round runs the modes once with DIR's library first on
``PYTHONPATH`` and once with this checkout's (the order alternating), and the last column is
the median of the per-round ratios this / A. ``--io`` is passed to ``ClientConfig`` (this
checkout only: A gets its default).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]

from _rpc_workers import (  # noqa: E402
    CODE,
    WINDOW,
    _check,
    _Runner,
    _setup,
    report,
)
from rpc import Server, cpu_layout, print_table, run_client  # noqa: E402

MODES = ["many64", "threads64", "window64", "latency"]
FLOOR_MODES = ["floor64", "floorseq"]
PARAMS = {"body": 128, "big": 1 << 20, "warm_lat": 300, "n_lat": 2000,
          "warm_tput": 2000, "n_tput": 20000, "warm_mib": 2, "n_mib": 10}
FIELDS = ("cli_us", "cli_vcs", "cli_ivcs", "srv_us")


def floor_client_main(kind: str, addr: str, modes: list[str], params: dict[str, Any],
                      cpu: int | None, conn: Any) -> None:
    """``floor64`` / ``floorseq``: the calling thread on a plain socket, the library's codec."""
    _setup(cpu)

    def run() -> dict[str, Any]:
        from codec import FrameDecoder, RemotingCommand, encode_frame

        host, port = addr.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        decoder = FrameDecoder(64 << 20)
        body = b"x" * params["body"]
        create = RemotingCommand.create_request

        def one(payload: bytes) -> None:
            sock.sendall(encode_frame(create(CODE, body=payload)))
            while (cmd := decoder.next_command()) is None:
                decoder.feed(sock.recv(256 * 1024))
            _check(cmd, len(payload))

        def many(n: int) -> None:
            sent = done = 0
            while done < n:
                burst = []
                while sent < n and sent - done < WINDOW:
                    burst.append(encode_frame(create(CODE, body=body)))
                    sent += 1
                if burst:
                    sock.sendall(b"".join(burst))
                decoder.feed(sock.recv(256 * 1024))
                while (cmd := decoder.next_command()) is not None:
                    _check(cmd, len(body))
                    done += 1

        runner = _Runner(params)
        out: dict[str, Any] = {}
        try:
            if "floor64" in modes:
                out["floor64"] = runner.pipelined(many, params["n_tput"], params["warm_tput"])
            if "floorseq" in modes:
                out["floorseq"] = runner.latency(one, body)
            return out
        finally:
            sock.close()

    report(conn, run)


def one_round(params: dict[str, Any], modes: list[str], server_kind: str) -> dict[str, Any]:
    """Run ``modes`` once against a fresh server; {mode: result}."""
    ctx = multiprocessing.get_context("spawn")
    cpus = cpu_layout()
    out: dict[str, Any] = {}
    with Server(ctx, f"ours-{server_kind}", cpus[0]) as server:
        floors = [m for m in modes if m in FLOOR_MODES]
        ours = [m for m in modes if m not in FLOOR_MODES]
        p = dict(params, server_pid=server.pid)
        if ours:
            out.update(run_client(ctx, "blocking", server.addr, ours, p, cpus[1]))
        if floors:
            out.update(run_client(ctx, "floor", server.addr, floors, p, cpus[1],
                                  target=floor_client_main))
    return out


def _rate(result: dict[str, Any]) -> float:
    return result["rps"] if "rps" in result else result["p50"]


def _child(args: argparse.Namespace, tree: str | None) -> dict[str, Any]:
    """One round in a fresh interpreter with ``tree``'s library first on the path."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one-round", "--modes",
           ",".join(args.modes), "--server", args.server, "--n", str(args.n)]
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = tree
    elif args.io:
        cmd += ["--io", args.io]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800,
                          check=False)
    if done.returncode:
        raise SystemExit(f"round failed ({tree or 'this checkout'}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", type=lambda s: s.split(","), default=MODES,
                    help=f"comma-separated, of {MODES + FLOOR_MODES}")
    ap.add_argument("--server", choices=["async", "pool"], default="async")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=PARAMS["n_tput"],
                    help="requests per pipelined mode (latency: a tenth)")
    ap.add_argument("--io", choices=["threads", "loop"], default=None)
    ap.add_argument("--a", metavar="DIR", help="a checkout to compare with (alternated)")
    ap.add_argument("--one-round", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    params = dict(PARAMS, n_tput=args.n, n_lat=max(100, args.n // 10))
    if args.io:
        params["io"] = args.io
    if args.one_round:
        print(json.dumps(one_round(params, args.modes, args.server)))
        return 0

    here = str(Path(_HERE).parent)
    sides = ["A", "B"] if args.a else ["B"]
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    for i in range(args.rounds):
        order = sides if i % 2 == 0 else sides[::-1]
        for side in order:
            res = _child(args, args.a if side == "A" else None) if args.a or args.io else \
                one_round(params, args.modes, args.server)
            runs[side].append(res)
            print(f"round {i + 1} {side}: " + "  ".join(
                f"{m}={res[m]['cli_us']:.1f}us" for m in args.modes), flush=True)

    def med(side: str, mode: str, field: str) -> float:
        return statistics.median(r[mode].get(field, float("nan")) for r in runs[side])

    rows = []
    for mode in args.modes:
        for side in sides:
            rate = statistics.median(_rate(r[mode]) for r in runs[side])
            row = [f"{mode} ({'A' if side == 'A' else here if not args.a else 'B'})",
                   *(f"{med(side, mode, f):.2f}" for f in FIELDS),
                   f"{rate:,.0f}" + (" us p50" if mode in ("latency", "floorseq") else "/s")]
            if args.a:
                ratio = statistics.median(
                    b[mode]["cli_us"] / a[mode]["cli_us"]
                    for a, b in zip(runs["A"], runs["B"], strict=True))
                row.append(f"{ratio:.2f}" if side == "B" else "")
            rows.append(row)
    header = ["mode", "client CPU us", "vol. cs", "invol. cs", "server CPU us", "rate"]
    if args.a:
        header.append("client CPU B/A")
    print()
    print_table(rows, header)
    return 0


if __name__ == "__main__":
    sys.exit(main())
