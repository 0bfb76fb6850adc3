"""RocketMQ client benchmark: a real RocketMQ 4.9.8 broker, Java's own 4.9.8 client beside ours.

    .venv/bin/python bench/rocketmq.py                 # full run, median of 3
    .venv/bin/python bench/rocketmq.py --quick         # a tenth of the messages, 1 run
    .venv/bin/python bench/rocketmq.py --cases send-async,latency --runs 5
    .venv/bin/python bench/rocketmq.py --json bench/results/rocketmq.json

Method: each run starts its own cluster (a name server and one broker, `tests.rocketmq.cluster`,
free ports, from RMQ_HOME as ``make test-rocketmq``) pinned to the first CPU, and each client
process to the second (as bench/rpc.py pins servers and clients; not pinned with fewer than two
CPUs). Every case gets a fresh topic of 4 queues (4 is Java's ``defaultTopicQueueNums``) and
128-byte messages. Cases:

- ``send-sync``: sequential synchronous sends (``DefaultMQProducer.send``);
- ``send-async``: asynchronous sends, 64 in flight;
- ``send-batch``: synchronous batches of 256 messages (one SEND_BATCH_MESSAGE each);
- ``consume``: a push consumer, a new group from the first offset, on a topic pre-filled with
  the messages beforehand (not timed): the rate from the first message to the last;
- ``latency``: one message at a time, from the start of its send to the consumer's handler
  (a held pull answers it), p50 and p99.

Java's side is tests/rocketmq/java/RmqPeer.java's ``bench-*`` modes (a JVM per case, with a
warm-up of a fifth of the messages before the timed part for sends and latency rounds). Ours
plugs in per case: a module ``bench/_rocketmq_ours.py`` with a function per case
(`OURS_FUNCTIONS`), each taking a `CaseParams` and returning the keys Java's result has
(``messages``, ``rate`` in messages per second, ``seconds``, ``cpu_seconds`` of the client
process over the timed part; for latency ``p50_ms`` and ``p99_ms``), measured as Java's are
(warm-up of ``params.warmup`` messages first; consume: from the first message to the last),
run in a process of its own pinned to the client CPU. Until that module exists the table
shows Java's figures alone. Within a run the two sides alternate which goes first; the table
shows medians over runs, and ratios are medians of per-run ratios (ours / Java). Each figure
of the rate cases comes with the client's and the broker's CPU time per message (the JVM's own
count, and /proc/<pid>/stat of the broker, which holds up when other processes compete).
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(_HERE)
# this script's folder last (bench/codec.py and bench/queue.py would shadow real modules)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE] + [_HERE]
sys.path.insert(0, ROOT)

from rpc import CpuWatch, cpu_layout, print_table  # noqa: E402

from tests.rocketmq.cluster import RocketMQCluster  # noqa: E402
from tests.rocketmq.java_peer import JavaPeer  # noqa: E402

CASES = ("send-sync", "send-async", "send-batch", "consume", "latency")
JAVA_MODE = {"send-sync": "bench-send-sync", "send-async": "bench-send-async",
             "send-batch": "bench-send-batch", "consume": "bench-consume",
             "latency": "bench-latency"}
# bench/_rocketmq_ours.py: the function of each case
OURS_FUNCTIONS = {"send-sync": "send_sync", "send-async": "send_async",
                  "send-batch": "send_batch", "consume": "consume", "latency": "latency"}
TITLE = {"send-sync": "send, sync sequential (msg/s)",
         "send-async": "send, async 64 in flight (msg/s)",
         "send-batch": "send, batches of 256 (msg/s)",
         "consume": "push consume, pre-filled (msg/s)",
         "latency": "send to consume"}
# issue 34's targets: ours / Java at least (rates) or at most (latency)
TARGET: dict[str, tuple[str, float]] = {"send-async": (">=", 1.0), "send-batch": (">=", 1.0),
                                        "consume": (">=", 1.0), "latency": ("<=", 1.2)}
FULL = {"send-sync": 20_000, "send-async": 100_000, "send-batch": 200_000,
        "consume": 100_000, "latency": 2_000}
QUICK = {case: n // 10 for case, n in FULL.items()}
SIZE = 128
IN_FLIGHT = 64
BATCH = 256
BROKER_JVM = ("-Xms1g", "-Xmx1g")
CLIENT_JVM = ("-Xms512m", "-Xmx1g")
OURS_TIMEOUT = 900.0


@dataclass(frozen=True, kw_only=True)
class CaseParams:
    """What a side needs to run one case (picklable: ours runs in a spawned process)."""

    case: str
    name_servers: list[str]
    topic: str
    group: str
    messages: int
    warmup: int
    size: int = SIZE
    in_flight: int = IN_FLIGHT
    batch: int = BATCH


def ours_module() -> Any | None:
    """Return bench/_rocketmq_ours.py imported, or None while it does not exist."""
    if importlib.util.find_spec("_rocketmq_ours") is None:
        return None
    return importlib.import_module("_rocketmq_ours")


def process_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` so far, exited threads included (/proc/<pid>/stat utime+stime)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ours_main(case: str, params: CaseParams, cpu: int | None, conn: Any) -> None:
    """The process of our side of one case: pinned, then the case's function."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    try:
        module = ours_module()
        assert module is not None
        conn.send(("ok", getattr(module, OURS_FUNCTIONS[case])(params)))
    except BaseException as e:  # reported to the parent, which fails the run
        import traceback

        conn.send(("error", "".join(traceback.format_exception(e))))


def run_ours(ctx: Any, params: CaseParams, cpu: int | None) -> dict[str, Any]:
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_ours_main, args=(params.case, params, cpu, child))
    proc.start()
    try:
        if not parent.poll(OURS_TIMEOUT):
            raise RuntimeError(f"ours: {params.case} ran past {OURS_TIMEOUT:.0f} s")
        status, value = parent.recv()
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
            proc.join()
    if status != "ok":
        raise RuntimeError(f"ours: {params.case} failed:\n{value}")
    result: dict[str, Any] = value
    return result


class Run:
    """One run: a fresh cluster, every case on both sides."""

    def __init__(self, index: int, counts: dict[str, int], cases: list[str],
                 cpus: tuple[int | None, int | None], peer: JavaPeer, ours: bool,
                 log: Callable[[str], None]) -> None:
        self.index = index
        self.counts = counts
        self.cases = cases
        self.server_cpu, self.client_cpu = cpus
        self.peer = peer
        self.ours = ours
        self.log = log
        self.ctx = multiprocessing.get_context("spawn")

    def measure(self) -> dict[str, dict[str, Any]]:
        """Return {"case/side": result} for this run."""
        results: dict[str, dict[str, Any]] = {}
        with tempfile.TemporaryDirectory(prefix="bench-rocketmq-") as tmp, RocketMQCluster(
                run_dir=Path(tmp), jvm_options=BROKER_JVM,
                cpus={self.server_cpu} if self.server_cpu is not None else None) as cluster:
            broker_pid = cluster.brokers[0].pid
            for case in self.cases:
                sides = ["java", "ours"] if self.ours else ["java"]
                if self.index % 2:
                    sides.reverse()
                prefilled = self._prefill(cluster) if case == "consume" else None
                for side in sides:
                    n = self.counts[case]
                    params = CaseParams(
                        case=case, name_servers=cluster.name_servers,
                        topic=prefilled or cluster.new_topic(f"bench-{case}"),
                        group=cluster.new_group(f"bench-{side}"), messages=n,
                        warmup=0 if case == "consume" else n // 5)
                    cpu0, t0 = process_cpu_seconds(broker_pid), time.perf_counter()
                    result = (self._java(params) if side == "java"
                              else run_ours(self.ctx, params, self.client_cpu))
                    result["broker_cpu_seconds"] = process_cpu_seconds(broker_pid) - cpu0
                    result["warmup"] = params.warmup  # the broker's CPU covers it too
                    results[f"{case}/{side}"] = result
                    self.log(f"  {case:<10} {side:<4} {time.perf_counter() - t0:5.1f}s  "
                             f"{_short(result)}")
        return results

    def _prefill(self, cluster: RocketMQCluster) -> str:
        topic = cluster.new_topic("bench-consume")
        n = self.counts["consume"]
        done = self.peer.bench("bench-send-batch", cluster.name_servers, topic, n=n, warmup=0,
                               size=SIZE, batch=BATCH, jvm_options=CLIENT_JVM)
        if done["errors"]:
            raise RuntimeError(f"pre-filling {topic}: {done['errors']} batches failed")
        return topic

    def _java(self, p: CaseParams) -> dict[str, Any]:
        result = self.peer.bench(
            JAVA_MODE[p.case], p.name_servers, p.topic, n=p.messages, warmup=p.warmup,
            size=p.size, in_flight=p.in_flight, batch=p.batch, group=p.group,
            cpus={self.client_cpu} if self.client_cpu is not None else None,
            jvm_options=CLIENT_JVM)
        if result.get("errors") or result.get("lost") or result.get("complete") is False:
            raise RuntimeError(f"java: {p.case} did not complete: {result}")
        return result


def _short(r: dict[str, Any]) -> str:
    if "p50_ms" in r:
        return f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms"
    return f"{r['rate']:,.0f} msg/s"


def _ms(v: float) -> str:
    return f"{v:.2f}"


def _rate(v: float) -> str:
    return f"{v:,.0f}"


def _med(values: list[float]) -> float:
    return statistics.median(values)


def build_rows(runs: list[dict[str, dict[str, Any]]], cases: list[str]
               ) -> tuple[list[list[str]], list[list[str]]]:
    """Return (the figures' table, the CPU table) from every run's results."""
    rows: list[list[str]] = []
    cpu_rows: list[list[str]] = []

    def series(key: str, field: str) -> list[float]:
        return [r[key][field] for r in runs if field in r.get(key, {})]

    for case in cases:
        fields = ["p50_ms", "p99_ms"] if case == "latency" else ["rate"]
        for field in fields:
            java, ours = series(f"{case}/java", field), series(f"{case}/ours", field)
            label = TITLE[case] + (f" {field[:3]} (ms)" if case == "latency" else "")
            fmt = _ms if case == "latency" else _rate
            sense, bound = TARGET.get(case, ("", 0.0))
            target = f"{sense} {bound:.1f}x" if sense and field != "p99_ms" else "-"
            if ours and len(ours) == len(java):
                ratio = _med([o / j for o, j in zip(ours, java, strict=True)])
                met = ("-" if target == "-" else
                       "yes" if (ratio >= bound if sense == ">=" else ratio <= bound) else "no")
                rows.append([label, fmt(_med(java)), fmt(_med(ours)), f"{ratio:.2f}x",
                             target, met])
            else:
                rows.append([label, fmt(_med(java)), "not yet", "-", target, "-"])
        for side in ("java", "ours"):
            key = f"{case}/{side}"
            # latency: a round is mostly waiting, and both JVMs' timers burn CPU meanwhile
            if case == "latency" or not series(key, "messages"):
                continue
            # send cases: the client's count covers the timed part only, the broker's the
            # warm-up too (it cannot tell them apart): per message of both
            n = _med(series(key, "messages"))
            with_warmup = n + _med(series(key, "warmup"))
            client = series(key, "cpu_seconds")
            cpu_rows.append([f"{case}, {side}",
                             f"{_med(client) / n * 1e6:.1f}" if client else "-",
                             f"{_med(series(key, 'broker_cpu_seconds')) / with_warmup * 1e6:.1f}"])
    return rows, cpu_rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tenth of the messages, 1 run")
    ap.add_argument("--runs", type=int, default=None, help="median of N runs (default 3)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"some of {','.join(CASES)}")
    ap.add_argument("--json", metavar="PATH", help="also write every run's figures as JSON")
    args = ap.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    if unknown := set(cases) - set(CASES):
        ap.error(f"unknown case(s) {sorted(unknown)}: choose among {', '.join(CASES)}")
    runs = args.runs if args.runs is not None else (1 if args.quick else 3)
    counts = QUICK if args.quick else FULL
    cpus = cpu_layout()
    ours = ours_module() is not None
    from _report import commit

    with tempfile.TemporaryDirectory(prefix="bench-rocketmq-peer-") as tmp:
        peer = JavaPeer(Path(tmp) / "peer")
        print(f"bench/rocketmq.py: RocketMQ 4.9.8 broker from {peer.home}, {os.cpu_count()} "
              "CPUs; " + (f"broker pinned to CPU {cpus[0]}, clients to CPU {cpus[1]}"
                          if cpus[0] is not None else "not pinned (fewer than 2 CPUs)"))
        print(f"code: commit {commit()}; ours: "
              + ("bench/_rocketmq_ours.py" if ours else "not yet (no bench/_rocketmq_ours.py): "
                 "Java's figures alone"))
        print(f"{runs} run(s); messages per case: "
              + ", ".join(f"{c} {counts[c]:,}" for c in cases) + f"; {SIZE}-byte bodies\n")
        all_runs: list[dict[str, dict[str, Any]]] = []
        contended: list[float] = []
        t0 = time.perf_counter()
        for i in range(runs):
            print(f"run {i + 1}/{runs}", flush=True)
            watch = CpuWatch()
            all_runs.append(Run(i, counts, cases, cpus, peer, ours,
                                lambda s: print(s, flush=True)).measure())
            share = watch.others_share()
            if share is not None:
                print(f"  other processes used {share:.0%} of the machine's CPU time "
                      "during this run")
                contended.append(share)
        peer.close()
    rows, cpu_rows = build_rows(all_runs, cases)
    print(f"\nmedians of {runs} run(s), {time.perf_counter() - t0:.0f}s in all; ratios are "
          "medians of per-run ratios (ours / Java)\n")
    print_table(rows, ["case", "Java 4.9.8", "ours", "ours/Java", "target", "met"])
    print("\nCPU time per message, us (medians): the client's (the JVM's own count for Java) "
          "and the broker's (/proc stat; for sends it includes the warm-up, a fifth more "
          "messages, so it is per message of both)\n")
    print_table(cpu_rows, ["case, side", "client CPU us", "broker CPU us"])
    if contended and max(contended) > 0.05:
        print(f"\nWARNING: other processes used up to {max(contended):.0%} of the CPU time "
              "during the runs; the figures are unreliable: rerun on a quiet machine")
    if args.json:
        from _report import write_json

        write_json(args.json, {
            "bench": "rocketmq", "counts": {c: counts[c] for c in cases}, "size": SIZE,
            "ours": ours, "others_share": contended, "runs": all_runs, "table": rows,
            "cpu_table": cpu_rows, "in_flight": IN_FLIGHT, "batch": BATCH})
    return 0


if __name__ == "__main__":
    sys.exit(main())
