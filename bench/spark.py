"""Spark benchmark: calling a service from PySpark UDFs, ours against what users do today.

    .venv/bin/python bench/spark.py                   # 1,000,000 rows, local[2]
    .venv/bin/python bench/spark.py --rows 200000 --http-rows 5000

f is ``str.upper`` on ``"row-<id>"`` strings (cheap: the cost of calling shows). In one run,
on one local[2] SparkSession, with both servers in this process (background threads):

- local limit: f computed inside a pandas UDF (no service at all);
- per-row HTTP: a ``requests.Session`` per task, one POST per row, to a threaded
  ``http.server`` (HTTP/1.1 keep-alive, TCP_NODELAY); it is slow, so it runs ``--http-rows``
  rows and reports rows/s;
- per-batch HTTP: ``mapInArrow``, one POST per Arrow batch carrying Arrow IPC;
- ours per-row: `remoting.spark.remote_udf`, one request per row, ``--max-in-flight``;
- ours batch: `remote_map_in_arrow` and `remote_batch_udf`, one request per Arrow batch,
  answered by a `processors.BatchProcessor`.

Each variant is timed as ``df.write.format("noop")`` over the whole column, after a small warm-up
job (Python workers started, modules imported), ``--repeats`` times in interleaved rounds; the
best run counts (the spread is shown). Before the Spark part, `invoke_many` is timed from a
plain thread: 10,000 small requests to an echo server in another process (best and median
of 7 runs per window size; ``--invoke-many-only`` runs just that).

The machine may be shared: the table ends with the CPU share other processes used during the
run. Compare ratios, not absolute figures, across machines.
"""

from __future__ import annotations

import argparse
import http.server
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

# Python put bench/ first on sys.path, where bench/codec.py would shadow the `codec` package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402

from codec import RemotingCommand, ResponseCode  # noqa: E402
from processors import BatchProcessor, RequestContext, RequestProcessor  # noqa: E402
from remoting import ClientConfig, RemotingClient, RemotingServer, ServerConfig  # noqa: E402

LIMIT = "local limit (pandas UDF)"
HTTP_ROW = "per-row HTTP (requests.Session)"
UPPER = 4001
UPPER_BATCH = 4002
UPPER_MAP = 4003
ECHO = 4004

ECHO_SERVER = f"""
import sys
from processors import EchoProcessor
from remoting import RemotingServer, ServerConfig
server = RemotingServer(ServerConfig(listen_port=0))
server.register_processor({ECHO}, EchoProcessor())
server.start()
print(server.port, flush=True)
sys.stdin.read()
server.shutdown()
"""


# ------------------------------------------------------------------------------ services


class Upper(RequestProcessor):
    """One row: body -> body.upper()."""

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = (request.body or b"").upper()
        return response


class UpperBatch(BatchProcessor):
    """One Arrow batch: column "value" (remote_batch_udf) or "s" (mapInArrow) upper-cased."""

    def process_batch(self, ctx: RequestContext, batch: Any) -> Any:
        return upper_batch(batch)


def upper_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch computation shared by our BatchProcessor and the HTTP batch endpoint."""
    import pyarrow.compute as pc

    if "s" in batch.schema.names:
        return batch.append_column("up", pc.utf8_upper(batch.column("s")))
    return pa.RecordBatch.from_arrays([pc.utf8_upper(batch.column("value"))], names=["value"])


class HTTPHandler(http.server.BaseHTTPRequestHandler):
    """POST /row: body upper-cased; POST /batch: Arrow IPC in, Arrow IPC out."""

    protocol_version = "HTTP/1.1"  # keep-alive, as a requests.Session expects
    # without it every request waits ~40 ms: Nagle's algorithm against the client's delayed ACK
    disable_nagle_algorithm = True

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        from processors.batch import decode_batch, encode_batch

        body = self.rfile.read(int(self.headers["Content-Length"]))
        out = body.upper() if self.path == "/row" else encode_batch(upper_batch(
            decode_batch(body)))
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


# ------------------------------------------------------------------------------ invoke_many


def bench_invoke_many(requests: int = 10_000, runs: int = 7
                      ) -> list[tuple[str, float, float]]:
    """Time invoke_many from this (plain) thread against an echo server in another process.

    Returns (label, best, median) requests per second over ``runs`` runs per limit.
    """
    server = subprocess.Popen([sys.executable, "-c", ECHO_SERVER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    results = []
    try:
        assert server.stdout is not None
        addr = f"127.0.0.1:{int(server.stdout.readline())}"
        with RemotingClient(ClientConfig()) as client:
            for limit in (64, 256, 1024):
                rates = []
                for run in range(runs + 1):
                    batch = [RemotingCommand(code=ECHO, body=b"row-%d" % i)
                             for i in range(requests)]
                    started = time.perf_counter()
                    got = client.invoke_many(addr, batch, timeout=10.0, limit=limit)
                    seconds = time.perf_counter() - started
                    assert all(isinstance(r, RemotingCommand) and r.code == 0 for r in got)
                    if run:  # the first run warms the connection up
                        rates.append(requests / seconds)
                results.append((f"invoke_many, {requests:,} requests, limit {limit}",
                                max(rates), statistics.median(rates)))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(30)
    return results


# ------------------------------------------------------------------------------ Spark variants


def local_limit() -> Any:
    from pyspark.sql.pandas.functions import pandas_udf

    @pandas_udf("string")  # type: ignore[call-overload,untyped-decorator,unused-ignore]
    def upper_local(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
        for s in batches:
            yield s.str.upper()

    return upper_local


def http_per_row(url: str) -> Any:
    from pyspark.sql.pandas.functions import pandas_udf

    @pandas_udf("string")  # type: ignore[call-overload,untyped-decorator,unused-ignore]
    def upper_http(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
        import requests

        with requests.Session() as session:  # one per task, reused for all its rows
            for s in batches:
                yield pd.Series([session.post(url, data=v.encode()).content.decode()
                                 for v in s.tolist()], dtype=object)

    return upper_http


def http_per_batch(url: str) -> Any:
    def upper_http_batch(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import requests

        from processors.batch import decode_batch, encode_batch

        with requests.Session() as session:
            for batch in batches:
                yield decode_batch(session.post(url, data=encode_batch(batch)).content)

    return upper_http_batch


def cpu_seconds() -> tuple[float, float]:
    """Return (all CPUs busy seconds, this process tree's CPU seconds) so far."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    busy = (sum(fields) - fields[3] - fields[4]) / tick  # minus idle and iowait
    mine = 0.0
    for pid in _tree(os.getpid()):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()
            mine += (int(stat[11]) + int(stat[12])) / tick
        except OSError:
            pass
    return busy, mine


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--http-rows", type=int, default=20_000,
                        help="rows for the (slow) per-row HTTP variant")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--max-in-flight", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed runs per variant (best is reported)")
    parser.add_argument("--skip-invoke-many", action="store_true")
    parser.add_argument("--invoke-many-only", action="store_true")
    parser.add_argument("--only", metavar="TEXT", action="append", default=[],
                        help="run only the variants whose label contains TEXT (repeatable; "
                             "bench/ab.py uses 'ours per-row')")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # all traffic stays on loopback
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    busy0, mine0 = cpu_seconds()
    wall0 = time.perf_counter()

    many = [] if args.skip_invoke_many else bench_invoke_many()

    for label, best, median in many:
        print(f"{label}: best {best:,.0f} req/s, median {median:,.0f}", flush=True)
    if args.invoke_many_only:
        return 0

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from remoting.spark import remote_batch_udf, remote_map_in_arrow, remote_udf

    server = RemotingServer(ServerConfig(listen_port=0))
    server.register_processor(UPPER, Upper())
    server.register_processor(UPPER_BATCH, UpperBatch(), threads=2)
    server.start()
    http_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HTTPHandler)
    http_server.daemon_threads = True
    threading.Thread(target=http_server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{http_server.server_address[1]}"
    spark = (SparkSession.builder.master("local[2]").appName("bench-spark")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
              .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    def strings(rows: int) -> Any:
        return spark.range(rows, numPartitions=args.partitions).select(
            F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"))

    def mapped(fn: Any) -> Callable[[int], Any]:
        def make(rows: int) -> Any:
            if fn is None:
                return remote_map_in_arrow(strings(rows), server.addr, UPPER_BATCH,
                                           "s string, up string")
            return strings(rows).mapInArrow(fn, "s string, up string")
        return make

    def column(udf: Any) -> Callable[[int], Any]:
        return lambda rows: strings(rows).select(udf("s").alias("up"))

    # (label, DataFrame for n rows, rows, repeats); the slow per-row HTTP runs once.
    variants: list[tuple[str, Callable[[int], Any], int, int]] = [
        (LIMIT, column(local_limit()), args.rows, args.repeats),
        (HTTP_ROW, column(http_per_row(base + "/row")), args.http_rows, 1),
        ("per-batch HTTP POST (mapInArrow)", mapped(http_per_batch(base + "/batch")),
         args.rows, args.repeats),
        ("ours per-row (remote_udf)",
         column(remote_udf(server.addr, UPPER, max_in_flight=args.max_in_flight)),
         args.rows, args.repeats),
        ("ours batch (remote_batch_udf)",
         column(remote_batch_udf(server.addr, UPPER_BATCH)), args.rows, args.repeats),
        ("ours batch (remote_map_in_arrow)", mapped(None), args.rows, args.repeats),
    ]
    if args.only:
        variants = [v for v in variants if any(text in v[0] for text in args.only)]
    runs: dict[str, list[float]] = {label: [] for label, *_ in variants}

    try:
        for _label, make, rows, _ in variants:  # warm-up: workers, imports, connections
            make(min(rows, 2_000)).write.format("noop").mode("overwrite").save()
        for round_no in range(args.repeats):  # interleaved, so load bursts hit all alike
            for label, make, rows, repeats in variants:
                if round_no >= repeats:
                    continue
                started = time.perf_counter()
                make(rows).write.format("noop").mode("overwrite").save()
                seconds = time.perf_counter() - started
                runs[label].append(seconds)
                print(f"{label}: {rows / seconds:,.0f} rows/s ({rows:,} rows, {seconds:.2f} s)",
                      flush=True)
    finally:
        spark.stop()
        server.shutdown()
        http_server.shutdown()
        http_server.server_close()

    busy1, mine1 = cpu_seconds()
    cpus = os.cpu_count() or 1
    wall = time.perf_counter() - wall0
    others = max(0.0, (busy1 - busy0) - (mine1 - mine0)) / (wall * cpus)

    rows_of = {label: rows for label, _make, rows, _r in variants}

    def rate(label: str) -> float:
        return rows_of[label] / min(runs[label])

    http_rate = rate(HTTP_ROW) if HTTP_ROW in runs else math.nan
    limit_rate = rate(LIMIT) if LIMIT in runs else math.nan
    print(f"\nSpark local[2], {args.partitions} partitions, f = upper(), max_in_flight "
          f"{args.max_in_flight}; best of {args.repeats} (per-row HTTP: 1 run)")
    head = (f"{'variant':<34} {'rows':>10} {'best s':>7} {'rows/s':>11} {'runs rows/s':>19} "
            f"{'x HTTP/row':>10} {'of limit':>8}")
    print(head)
    print("-" * len(head))
    for label, times in runs.items():
        rows = rows_of[label]
        r = rate(label)
        spread = f"{rows / max(times):,.0f}-{rows / min(times):,.0f}"
        print(f"{label:<34} {rows:>10,} {min(times):>7.2f} {r:>11,.0f} {spread:>19} "
              f"{r / http_rate:>9.1f}x {r / limit_rate:>8.0%}")
    for label, best, median in many:
        print(f"{label:<40} best {best:>8,.0f} req/s, median {median:>8,.0f}")
    print(f"\nother processes used {others:.0%} of the {cpus} CPUs during the run")
    if args.json:
        import pandas
        import pyspark

        sys.path.append(_HERE)
        from _report import write_json

        write_json(args.json, {
            "bench": "spark", "master": "local[2]", "partitions": args.partitions,
            "max_in_flight": args.max_in_flight, "pandas": pandas.__version__,
            "pyspark": pyspark.__version__, "others_share": others,
            "variants": {label: {"rows": rows_of[label], "seconds": runs[label]}
                         for label in runs},
            "invoke_many": [{"label": label, "best": best, "median": median}
                            for label, best, median in many]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
