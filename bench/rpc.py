"""End-to-end RPC benchmark: trio-remoting against a raw trio echo and grpcio, in one run.

    .venv/bin/python bench/rpc.py              # full run, median of 3
    .venv/bin/python bench/rpc.py --quick      # fewer iterations, 1 run unless --runs is given
    .venv/bin/python bench/rpc.py --runs 5
    .venv/bin/python bench/rpc.py --profile pool --profile-seconds 8   # needs py-spy

Method (docs/performance.md, "How to measure your own"): every server and every client runs in a
process of its own (multiprocessing "spawn"); with 2+ CPUs servers are pinned to the first CPU
and clients to the second (os.sched_setaffinity, before any thread starts). Within each run
the baselines are measured next to our figures; the table shows medians over runs, and ratios
are the median of the per-run ratios (ours / raw trio echo, from the same run).

Cases (128-byte bodies unless stated):
- sequential invoke_sync latency p50/p99: trio-native client and blocking RemotingClient,
  against AsyncEchoProcessor (event loop) and EchoProcessor (sync pool, 4 threads);
- pipelined throughput, 64 in flight on one connection: trio-native client as 64 tasks looping
  invoke_sync, as a sliding window of invoke_async futures, and invoke_many; blocking client
  invoke_many(limit=64), 64 threads looping invoke_sync, and a window of 64 invoke_async calls
  whose callbacks let the next one go;
- 1 MiB bodies, sequential: MiB/s of body echoed.
Baselines: a raw trio echo with the same framing (4-byte big-endian length + 4-byte header
word + bytes; the server echoes each frame; the client pipelines 64 frames for throughput) and
grpcio generic unary echo on bytes (sync server, 64-thread pool; client: sequential blocking
calls, and for throughput the faster of 64 threads or futures with 64 in flight).

The machine may be shared: each run reports how much CPU other processes took meanwhile, and a
second table gives CPU time per request of each process (/proc/<pid>/task/*/schedstat), which
holds up far better than wall-clock rates when others compete, with the ceiling it implies.
``--profile pool|async`` instead records one pipelined case with py-spy (server and client) and
prints where the samples went (bench/_rpc_profile.py).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

# Python put this script's directory first on sys.path, where bench/codec.py would shadow the
# real `codec` package: move it to the end (it is only needed for the _rpc_* helpers). Spawned
# children inherit this order.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]

from _rpc_workers import client_main, server_main  # noqa: E402

SERVER_START_TIMEOUT = 60.0
CLIENT_TIMEOUT = 900.0
STOP_TIMEOUT = 15.0
PROFILE_RATE = 200  # py-spy samples per second
OTHERS_WARN = 0.05  # warn when others used more than this share of the CPUs

FULL = {"body": 128, "big": 1 << 20, "warm_lat": 500, "n_lat": 3000,
        "warm_tput": 2000, "n_tput": 20000, "warm_mib": 5, "n_mib": 100}
QUICK = {"body": 128, "big": 1 << 20, "warm_lat": 200, "n_lat": 1000,
         "warm_tput": 500, "n_tput": 4000, "warm_mib": 3, "n_mib": 20}

OURS_TRIO_MODES = ["latency", "tasks64", "window64", "many64", "mib"]
OURS_BLOCKING_MODES = ["latency", "many64", "threads64", "window64", "mib"]

# (server kind, [(client kind, modes)]) in the order measured within each run.
PLAN: list[tuple[str, list[tuple[str, list[str]]]]] = [
    ("raw", [("raw", ["latency", "pipe64", "mib"])]),
    ("ours-async", [("trio", OURS_TRIO_MODES), ("blocking", OURS_BLOCKING_MODES)]),
    ("ours-pool", [("trio", OURS_TRIO_MODES), ("blocking", OURS_BLOCKING_MODES)]),
    ("grpc", [("grpc", ["latency", "threads64", "futures64", "mib"])]),
]

TARGET_PIPE = {"ours-pool": 45_000.0, "ours-async": 90_000.0}
TARGET_LAT = {"trio": 1.9, "blocking": 2.4}
TARGET_MIB = 0.8

PROC_NAME = {"ours-async": "async processor", "ours-pool": "pool processor"}
CLIENT_NAME = {"trio": "trio client", "blocking": "blocking client"}
PIPE_NAME = {
    ("trio", "tasks64"): "trio client, 64 tasks x invoke_sync",
    ("trio", "window64"): "trio client, invoke_async window",
    ("trio", "many64"): "trio client, invoke_many",
    ("blocking", "many64"): "blocking client, invoke_many",
    ("blocking", "threads64"): "blocking client, 64 threads x invoke_sync",
    ("blocking", "window64"): "blocking client, invoke_async window, callbacks",
}


# ---------------------------------------------------------------------- processes


def cpu_layout() -> tuple[int | None, int | None]:
    """Return (server CPU, client CPU), or (None, None) when there are fewer than 2 CPUs."""
    if not hasattr(os, "sched_getaffinity"):
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    return cpus[0], cpus[1]


def _stop(proc: Any) -> None:
    """Make sure ``proc`` is gone: wait a little, then terminate, then kill."""
    proc.join(STOP_TIMEOUT)
    if proc.is_alive():
        proc.terminate()
        proc.join(5)
    if proc.is_alive():
        proc.kill()
        proc.join()


class Server:
    """A server subprocess; use as a context manager (always stopped on exit)."""

    def __init__(self, ctx: Any, kind: str, cpu: int | None,
                 target: Callable[..., None] = server_main) -> None:
        self.ctx = ctx
        self.kind = kind
        self.cpu = cpu
        self._target = target  # the worker's entry point (bench/_floor_workers has its own)
        self.port = 0
        self.pid = 0
        self._conn: Any = None
        self._proc: Any = None

    def __enter__(self) -> Server:
        parent, child = self.ctx.Pipe()
        self._conn = parent
        self._proc = self.ctx.Process(target=self._target, args=(self.kind, self.cpu, child),
                                      name=f"bench-server-{self.kind}", daemon=True)
        try:
            self._proc.start()
            child.close()
            if not parent.poll(SERVER_START_TIMEOUT):
                raise RuntimeError(f"{self.kind} server did not start")
            _, self.port, self.pid = parent.recv()
        except BaseException:
            self.__exit__()
            raise
        return self

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        try:
            self._conn.send("stop")
        except (OSError, ValueError):
            pass
        try:
            _stop(self._proc)
        finally:
            self._conn.close()


class Client:
    """A client subprocess running some modes; `result` waits for its answer."""

    def __init__(self, ctx: Any, kind: str, addr: str, modes: list[str],
                 params: dict[str, Any], cpu: int | None,
                 target: Callable[..., None] = client_main) -> None:
        parent, child = ctx.Pipe()
        self._conn = parent
        self.kind = kind
        self._proc = ctx.Process(target=target,
                                 args=(kind, addr, modes, params, cpu, child),
                                 name=f"bench-client-{kind}", daemon=True)
        self._proc.start()
        child.close()
        self.pid = self._proc.pid

    def result(self) -> dict[str, Any]:
        try:
            if not self._conn.poll(CLIENT_TIMEOUT):
                raise RuntimeError(f"{self.kind} client did not finish")
            status, payload = self._conn.recv()
            if status != "ok":
                raise RuntimeError(f"{self.kind} client failed:\n{payload}")
            return payload  # type: ignore[no-any-return]
        finally:
            self.close()

    def close(self) -> None:
        try:
            _stop(self._proc)
        finally:
            self._conn.close()


def run_client(ctx: Any, kind: str, addr: str, modes: list[str], params: dict[str, Any],
               cpu: int | None, target: Callable[..., None] = client_main) -> dict[str, Any]:
    client = Client(ctx, kind, addr, modes, params, cpu, target)
    try:
        return client.result()
    finally:
        client.close()


# ---------------------------------------------------------------------- contention check


class CpuWatch:
    """How much CPU did processes other than ours use meanwhile (the machine may be shared)?

    /proc/stat busy time of all CPUs minus what this process and its (joined) children used,
    as a share of the CPUs' capacity (all CPUs, wall time). None where /proc is missing.
    """

    def __init__(self) -> None:
        self._start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        hz = os.sysconf("SC_CLK_TCK")
        busy = (sum(fields[:8]) - fields[3] - fields[4]) / hz  # minus idle and iowait
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        ours = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
        return busy, ours, time.monotonic()

    def others_share(self) -> float | None:
        end = self._sample()
        if self._start is None or end is None:
            return None
        busy = end[0] - self._start[0]
        ours = end[1] - self._start[1]
        wall = end[2] - self._start[2]
        ncpu = os.cpu_count() or 1
        return max(0.0, busy - ours) / (wall * ncpu) if wall > 0 else None


# ---------------------------------------------------------------------- measuring


def one_run(ctx: Any, params: dict[str, Any], cpus: tuple[int | None, int | None],
            log: Any) -> dict[tuple[str, str, str], Any]:
    """Measure everything once; return {(server, client, mode): result}."""
    scpu, ccpu = cpus
    results: dict[tuple[str, str, str], Any] = {}
    for server_kind, clients in PLAN:
        with Server(ctx, server_kind, scpu) as server:
            for client_kind, modes in clients:
                t0 = time.perf_counter()
                out = run_client(ctx, client_kind, server.addr, modes,
                                 dict(params, server_pid=server.pid), ccpu)
                log(f"  {server_kind:<10} {client_kind:<8} {time.perf_counter() - t0:5.1f}s "
                    + "  ".join(f"{m}={_short(v)}" for m, v in out.items()))
                for mode, value in out.items():
                    results[(server_kind, client_kind, mode)] = value
    return results


def _short(v: dict[str, float]) -> str:
    if "p50" in v:
        return f"{v['p50']:.0f}/{v['p99']:.0f}us"
    if "rps" in v:
        return f"{v['rps']:,.0f}/s"
    return f"{v['mibs']:,.0f}MiB/s"


# ---------------------------------------------------------------------- reporting


def _med(values: list[float]) -> float:
    return statistics.median(values)


def build_rows(runs: list[dict[tuple[str, str, str], Any]]) -> tuple[list[list[str]], list[str]]:
    """Return the table rows and the notes (which grpc variant won, per-run spread)."""

    def series(key: tuple[str, str, str], field: str) -> list[float]:
        return [r[key][field] for r in runs]

    def ratio(num: list[float], den: list[float]) -> float:
        return _med([a / b for a, b in zip(num, den, strict=True)])

    rows: list[list[str]] = []
    notes: list[str] = []
    raw_lat = ("raw", "raw", "latency")
    grpc_lat = ("grpc", "grpc", "latency")

    for field in ("p50", "p99"):
        for client_kind in ("trio", "blocking"):
            for proc in ("ours-async", "ours-pool"):
                ours = series((proc, client_kind, "latency"), field)
                raw = series(raw_lat, field)
                r = ratio(ours, raw)
                if field == "p50":
                    limit = TARGET_LAT[client_kind]
                    target, met = f"<= {limit}x raw", "yes" if r <= limit else "NO"
                else:
                    target, met = "-", ""
                rows.append([
                    f"seq {field} us, {CLIENT_NAME[client_kind]}, {PROC_NAME[proc]}",
                    f"{_med(ours):.0f}", f"{_med(raw):.0f}",
                    f"{_med(series(grpc_lat, field)):.0f}", f"{r:.2f}x", target, met,
                ])

    threads = _med(series(("grpc", "grpc", "threads64"), "rps"))
    futures = _med(series(("grpc", "grpc", "futures64"), "rps"))
    grpc_best, grpc_how = (threads, "threads") if threads >= futures else (futures, "futures")
    notes.append(f"grpcio pipelined: 64 threads {threads:,.0f} req/s, futures with 64 in flight "
                 f"{futures:,.0f} req/s; the table shows the faster ({grpc_how}).")
    raw_pipe = series(("raw", "raw", "pipe64"), "rps")
    for proc in ("ours-pool", "ours-async"):
        for (client_kind, mode), name in PIPE_NAME.items():
            ours = series((proc, client_kind, mode), "rps")
            limit = TARGET_PIPE[proc]
            rows.append([
                f"pipelined req/s, {PROC_NAME[proc]}, {name}",
                f"{_med(ours):,.0f}", f"{_med(raw_pipe):,.0f}",
                f"{grpc_best:,.0f} ({grpc_how})", f"{ratio(ours, raw_pipe):.2f}x",
                f">= {limit:,.0f} req/s", "yes" if _med(ours) >= limit else "NO",
            ])

    raw_mib = series(("raw", "raw", "mib"), "mibs")
    grpc_mib = _med(series(("grpc", "grpc", "mib"), "mibs"))
    for client_kind in ("trio", "blocking"):
        for proc in ("ours-async", "ours-pool"):
            ours = series((proc, client_kind, "mib"), "mibs")
            r = ratio(ours, raw_mib)
            rows.append([
                f"1 MiB seq MiB/s, {CLIENT_NAME[client_kind]}, {PROC_NAME[proc]}",
                f"{_med(ours):.0f}", f"{_med(raw_mib):.0f}", f"{grpc_mib:.0f}",
                f"{r:.2f}x", f">= {TARGET_MIB}x raw", "yes" if r >= TARGET_MIB else "NO",
            ])
    return rows, notes


CPU_CASES: list[tuple[str, tuple[str, str, str]]] = [
    ("raw trio echo, pipelined 64", ("raw", "raw", "pipe64")),
    *[(f"ours, {PROC_NAME[proc]}, {name}", (proc, client_kind, mode))
      for proc in ("ours-pool", "ours-async") for (client_kind, mode), name in PIPE_NAME.items()],
    ("grpcio, 64 threads", ("grpc", "grpc", "threads64")),
    ("grpcio, futures 64 in flight", ("grpc", "grpc", "futures64")),
    ("raw trio echo, sequential", ("raw", "raw", "latency")),
    *[(f"ours, {PROC_NAME[proc]}, {CLIENT_NAME[client_kind]}, sequential",
       (proc, client_kind, "latency"))
      for client_kind in ("trio", "blocking") for proc in ("ours-async", "ours-pool")],
    ("grpcio, sequential", ("grpc", "grpc", "latency")),
    ("raw trio echo, 1 MiB sequential", ("raw", "raw", "mib")),
    *[(f"ours, {PROC_NAME[proc]}, {CLIENT_NAME[client_kind]}, 1 MiB sequential",
       (proc, client_kind, "mib"))
      for client_kind in ("trio", "blocking") for proc in ("ours-async", "ours-pool")],
    ("grpcio, 1 MiB sequential", ("grpc", "grpc", "mib")),
]


def build_cpu_rows(runs: list[dict[tuple[str, str, str], Any]]) -> list[list[str]]:
    """CPU time per request in each process (robust to other load) and the ceiling it implies.

    With the client and the server on a CPU each, a pipelined case cannot beat
    1e6 / max(client us, server us) req/s: the "CPU-bound ceiling".
    """
    rows = []
    for name, key in CPU_CASES:
        if any("cli_us" not in r[key] or "srv_us" not in r[key] for r in runs):
            continue
        cli = _med([r[key]["cli_us"] for r in runs])
        srv = _med([r[key]["srv_us"] for r in runs])
        wait_c = _med([r[key]["cli_wait_us"] for r in runs])
        wait_s = _med([r[key]["srv_wait_us"] for r in runs])
        gc_c = _med([r[key]["cli_gc_us"] for r in runs])
        if "rps" in runs[0][key]:
            ceiling = f"{1e6 / max(cli, srv):,.0f}"
            measured = f"{_med([r[key]['rps'] for r in runs]):,.0f}"
        elif "mibs" in runs[0][key]:
            ceiling, measured = "-", f"{_med([r[key]['mibs'] for r in runs]):,.0f} MiB/s"
        else:
            ceiling, measured = "-", f"p50 {_med([r[key]['p50'] for r in runs]):,.0f} us"
        rows.append([name, f"{cli:.1f}", f"{gc_c:.1f}", f"{srv:.1f}", ceiling, measured,
                     f"{wait_c:.1f} / {wait_s:.1f}"])
    return rows


def print_table(rows: list[list[str]], header: list[str]) -> None:
    """Print a GitHub-style table, the first column left-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(
                cells, widths, strict=True))) + " |"

    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))


# ---------------------------------------------------------------------- profiling


def profile(ctx: Any, args: argparse.Namespace, cpus: tuple[int | None, int | None]) -> None:
    """Run one pipelined case for a while and record the server and the client with py-spy."""
    from _rpc_profile import py_spy, summarize

    spy = py_spy()
    server_kind = f"ours-{args.profile}"
    client_kind = "blocking" if args.profile_mode.startswith("blocking-") else "trio"
    mode = args.profile_mode.removeprefix("blocking-")
    params = dict(QUICK, n_tput=5000, warm_tput=2000, duration=args.profile_seconds + 3.0)
    os.makedirs(args.profile_out, exist_ok=True)
    stem = os.path.join(args.profile_out, f"rpc-{args.profile}-{args.profile_mode}")
    watch = CpuWatch()
    with Server(ctx, server_kind, cpus[0]) as server:
        client = Client(ctx, client_kind, server.addr, [mode],
                        dict(params, server_pid=server.pid), cpus[1])
        spies: list[subprocess.Popen[bytes]] = []
        try:
            time.sleep(1.5)  # spawn + warm-up
            for role, pid in (("server", server.pid), ("client", client.pid)):
                spies.append(subprocess.Popen(
                    [spy, "record", "--pid", str(pid), "--duration", str(args.profile_seconds),
                     "--rate", str(PROFILE_RATE), "--threads", "--format", "raw",
                     *([] if args.profile_native else ["--nonblocking"]),
                     "-o", f"{stem}-{role}.raw",
                     *(["--native"] if args.profile_native else []),
                     *([] if args.profile_wall else ["--gil"])],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
            for sp in spies:
                _, err = sp.communicate(timeout=args.profile_seconds + 60)
                if sp.returncode:
                    print(f"py-spy failed: {err.decode(errors='replace')}", file=sys.stderr)
            out = client.result()
        finally:
            for sp in spies:
                if sp.poll() is None:
                    sp.terminate()
                    sp.wait()
            client.close()
    print(f"\n{server_kind} / {client_kind} {mode}: {out[mode]['rps']:,.0f} req/s under py-spy "
          f"(sampling skews this down a little)")
    share = watch.others_share()
    if share is not None:
        print(f"other processes used {share:.0%} of the machine's CPU time meanwhile "
              "(py-spy included)")
    for role in ("server", "client"):
        path = f"{stem}-{role}.raw"
        if os.path.exists(path):
            print(f"\n=== {role} ({path}: collapsed stacks, speedscope.app opens them) ===")
            summarize(path, top=args.profile_top, rate=PROFILE_RATE,
                      seconds=args.profile_seconds)


# ---------------------------------------------------------------------- main


def _git_state() -> str:
    """Return the commit measured, and whether library files differ from it."""
    root = os.path.dirname(_HERE)
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--", "codec", "processors", "remoting"],
            capture_output=True, text=True, timeout=10).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return "git state unknown"
    return f"commit {head or '?'}" + (
        f" + {len(dirty)} uncommitted change(s) in codec/processors/remoting" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer iterations (1 run by default)")
    ap.add_argument("--runs", type=int, default=None, help="median of N runs (default 3)")
    ap.add_argument("--json", metavar="PATH", help="also write every run's figures as JSON")
    ap.add_argument("--profile", choices=["pool", "async"],
                    help="instead of the table: record a pipelined case with py-spy")
    ap.add_argument("--profile-mode", default="tasks64",
                    choices=["tasks64", "window64", "many64", "blocking-many64",
                             "blocking-threads64", "blocking-window64"])
    ap.add_argument("--profile-seconds", type=int, default=8)
    ap.add_argument("--profile-out", default="/tmp/rpc-profile")
    ap.add_argument("--profile-top", type=int, default=25)
    ap.add_argument("--profile-native", action="store_true",
                    help="py-spy --native (C frames too; pauses the process at each sample)")
    ap.add_argument("--profile-wall", action="store_true",
                    help="sample every non-idle thread (default: only the GIL holder, i.e. "
                         "where the CPU goes, which stays meaningful on a busy machine)")
    args = ap.parse_args(argv)

    ctx = multiprocessing.get_context("spawn")
    cpus = cpu_layout()
    if args.profile:
        profile(ctx, args, cpus)
        return 0

    runs = args.runs if args.runs is not None else (1 if args.quick else 3)
    params = QUICK if args.quick else FULL
    import grpc
    import trio

    print(f"bench/rpc.py: python {sys.version.split()[0]}, trio {trio.__version__}, "
          f"grpcio {grpc.__version__}, {os.cpu_count()} CPUs; "
          + (f"servers pinned to CPU {cpus[0]}, clients to CPU {cpus[1]}"
             if cpus[0] is not None else "not pinned (fewer than 2 CPUs)"))
    print(f"code: {_git_state()}")
    print(f"{runs} run(s); latency {params['n_lat']} calls after {params['warm_lat']}, "
          f"pipelined {params['n_tput']} requests after {params['warm_tput']} (grpcio: a "
          f"quarter), 1 MiB {params['n_mib']} calls after {params['warm_mib']}; "
          f"{params['body']}-byte bodies\n")
    all_runs = []
    t0 = time.perf_counter()
    contended = []
    for i in range(runs):
        print(f"run {i + 1}/{runs}")
        watch = CpuWatch()
        all_runs.append(one_run(ctx, params, cpus, lambda s: print(s, flush=True)))
        share = watch.others_share()
        if share is not None:
            print(f"  other processes used {share:.0%} of the machine's CPU time during this run")
            contended.append(share)
    rows, notes = build_rows(all_runs)
    print(f"\nmedians of {runs} run(s), {time.perf_counter() - t0:.0f}s in all; ratios are "
          "medians of per-run ratios against the raw trio echo of the same run\n")
    print_table(rows, ["metric", "ours", "raw trio", "grpcio", "ours/raw", "target", "met"])
    print()
    for note in notes:
        print(note)
    if contended and max(contended) > OTHERS_WARN:
        print(f"WARNING: other processes used up to {max(contended):.0%} of the CPU time during "
              "the runs; the figures (ratios included) are unreliable: rerun on a quiet machine")
    print("targets: pipelined >= 45,000 req/s with a pool processor, >= 90,000 with an async "
          "processor; sequential p50 <= 1.9x raw (trio client), <= 2.4x raw (blocking client); "
          "1 MiB >= 0.8x raw MiB/s")
    cpu_rows = build_cpu_rows(all_runs)
    if cpu_rows:
        print("\nCPU time per request or per 1 MiB call (medians; /proc schedstat of every thread "
              "of each process). "
              "Unlike wall-clock rates this barely moves when other processes compete for the "
              "CPUs; 'ceiling' = 1e6 / max(client, server): the most a CPU each allows. "
              "'run-queue wait' = time runnable but not running (contention), per request; "
              "'of which GC' = the client's CPU time in Python's cyclic GC (gc.callbacks).\n")
        print_table(cpu_rows, ["case", "client CPU us", "of which GC", "server CPU us",
                               "ceiling req/s", "measured", "run-queue wait us (cli / srv)"])
    if args.json:
        from _report import write_json

        write_json(args.json, {
            "bench": "rpc", "params": params, "others_share": contended,
            "runs": [{"/".join(key): value for key, value in run.items()} for run in all_runs],
            "table": rows, "cpu_table": cpu_rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
