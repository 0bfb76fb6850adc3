"""Draw one trace of a Spark job, from a real run's spans: docs/images/trace-spark-batch.png.

    .venv/bin/python -m examples.trace_picture [--out docs/images/trace-spark-batch.png]

A local server (this process, an in-memory span exporter) serves an upper-casing processor; a
local[1] Spark job of 12 rows, one Arrow batch, calls it per row with 4 requests in flight,
inside a driver span. The driver and the Python worker write their spans as JSON lines
(`worker_setup`); the picture puts the three processes' spans on one time line, around the
Arrow batch. Needs the ``spark``, ``otel-export`` and ``docs`` extras (matplotlib).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROWS = 12
IN_FLIGHT = 4
UPPER = 1001


def write_spans_to(folder: str) -> None:
    """Configure this process's SDK: each finished span, one JSON line, in ``folder``."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    out = open(os.path.join(folder, f"spans-{os.getpid()}.jsonl"), "a")  # noqa: SIM115
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
        out=out, formatter=lambda span: span.to_json(indent=None) + "\n")))
    trace.set_tracer_provider(provider)


def run_job(folder: str) -> list[dict[str, Any]]:
    """Run the traced job; return every span of the three processes (JSON dicts)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from codec import RemotingCommand, ResponseCode
    from processors import RequestContext, RequestProcessor
    from remoting import RemotingServer, ServerConfig
    from remoting.spark import remote_udf

    class Upper(RequestProcessor):
        def process_request(self, ctx: RequestContext, request: RemotingCommand
                            ) -> RemotingCommand:
            response = RemotingCommand.create_response(ResponseCode.SUCCESS)
            response.body = (request.body or b"").upper()
            return response

    server_spans = InMemorySpanExporter()
    server_provider = TracerProvider()
    server_provider.add_span_processor(SimpleSpanProcessor(server_spans))
    write_spans_to(folder)  # the driver's
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[1]").appName("trace-picture")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    def setup() -> None:
        write_spans_to(folder)

    try:
        with RemotingServer(ServerConfig(tracer_provider=server_provider)) as server:
            server.register_processor(UPPER, Upper())
            with trace.get_tracer("job").start_as_current_span("score rows (driver)"):
                udf = remote_udf(server.addr, UPPER, max_in_flight=IN_FLIGHT,
                                 worker_setup=setup)
                df = spark.range(ROWS, numPartitions=1).select(
                    F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"))
                rows = df.select(udf("s").alias("up")).collect()
            assert len(rows) == ROWS
    finally:
        spark.stop()
    spans = [json.loads(line) for path in Path(folder).glob("spans-*.jsonl")
             for line in path.read_text().splitlines()]
    spans += [json.loads(s.to_json(indent=None)) for s in server_spans.get_finished_spans()]
    return spans


def _seconds(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _lanes(spans: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Pack spans into lanes where none overlaps the next."""
    lanes: list[list[dict[str, Any]]] = []
    for span in sorted(spans, key=lambda s: s["start"]):
        for lane in lanes:
            if lane[-1]["end"] <= span["start"]:
                lane.append(span)
                break
        else:
            lanes.append([span])
    return lanes


def draw(spans: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for span in spans:
        span["start"], span["end"] = _seconds(span["start_time"]), _seconds(span["end_time"])
    [batch] = [s for s in spans if s["name"] == "remoting.spark.batch"]
    zero = batch["start"]
    groups = [
        ("driver: job span", [s for s in spans if s["name"].endswith("(driver)")], "#8c8c8c"),
        ("worker: Arrow batch", [batch], "#4c72b0"),
        ("worker: CLIENT calls", [s for s in spans if s["kind"] == "SpanKind.CLIENT"],
         "#dd8452"),
        ("server: SERVER spans", [s for s in spans if s["kind"] == "SpanKind.SERVER"],
         "#55a868"),
    ]
    rows: list[tuple[str, list[dict[str, Any]], str]] = []
    for label, members, color in groups:
        for i, lane in enumerate(_lanes(members)):
            rows.append((label if i == 0 else "", lane, color))
    fig, ax = plt.subplots(figsize=(10, 0.34 * len(rows) + 1.8))
    left = -0.1 * (batch["end"] - zero) * 1e3
    right = (batch["end"] - zero) * 1e3 * 1.05
    for y, (_, lane, color) in enumerate(rows):
        for span in lane:
            start = max((span["start"] - zero) * 1e3, left)
            end = min((span["end"] - zero) * 1e3, right)
            ax.barh(y, end - start, left=start, height=0.7, color=color)
    ax.set_yticks(range(len(rows)), [label for label, _, _ in rows])
    ax.invert_yaxis()
    ax.set_xlim(left, right)
    ax.set_xlabel("milliseconds since the Arrow batch began (the job span runs on both sides)")
    calls = len(groups[2][1])
    ax.set_title(f"One trace: an Arrow batch of {ROWS} rows sent per row ({calls} calls, "
                 f"{IN_FLIGHT} in flight at first),\neach call served under a SERVER span "
                 "(the green ticks: processing takes tens of µs)", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"wrote {out} ({len(spans)} spans, one trace id: "
          f"{len({s['context']['trace_id'] for s in spans}) == 1})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("docs/images/trace-spark-batch.png"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        draw(run_job(folder), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
