"""Tracing a Spark job: one span per Arrow batch, parent of its calls, child of the driver's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from remoting import RemotingServer, ServerConfig

from .service import BATCH_UPPER, UPPER, Recorder, register
from .traced_job import PARTITIONS, ROWS, ROWS_PER_BATCH

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
BATCHES = PARTITIONS * -(-ROWS // PARTITIONS // ROWS_PER_BATCH)  # Arrow batches per UDF


def read_spans(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in folder.glob("spans-*.jsonl")
            for line in path.read_text().splitlines()]


def test_a_spark_job_traces_each_arrow_batch_and_its_calls(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    server = RemotingServer(ServerConfig(tracer_provider=provider))
    register(server, Recorder())
    with server.start():
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable)
        done = subprocess.run([sys.executable, "-m", "tests.spark.traced_job", server.addr,
                               str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert f"rows={ROWS}+{ROWS} bad=0" in done.stdout

    spans = read_spans(tmp_path)
    [job] = [s for s in spans if s["name"] == "job"]
    trace_id = job["context"]["trace_id"]
    batches = [s for s in spans if s["name"] == "remoting.spark.batch"]
    calls = [s for s in spans if s["kind"] == "SpanKind.CLIENT"]
    assert len(batches) == 2 * BATCHES  # the row UDF's and the batch UDF's
    assert all(b["parent_id"] == job["context"]["span_id"] for b in batches)
    assert {s["context"]["trace_id"] for s in batches + calls} == {trace_id}
    for mode, code, requests in (("row", UPPER, ROWS), ("batch", BATCH_UPPER, BATCHES)):
        mine = [b for b in batches if b["attributes"]["remoting.spark.mode"] == mode]
        assert len(mine) == BATCHES
        assert sum(b["attributes"]["remoting.spark.rows"] for b in mine) == ROWS
        assert sum(b["attributes"]["remoting.spark.requests"] for b in mine) == requests
        assert all(b["attributes"]["remoting.spark.errors"] == 0 for b in mine)
        ids = {b["context"]["span_id"] for b in mine}
        their_calls = [c for c in calls if c["parent_id"] in ids]
        assert len(their_calls) == requests
        assert {c["name"] for c in their_calls} == {f"remoting/{code}"}

    # the server (this process) saw each call as a SERVER span, child of the worker's span
    served = exporter.get_finished_spans()
    assert len(served) == len(calls) == ROWS + BATCHES
    call_ids = {int(c["context"]["span_id"], 16) for c in calls}
    assert {s.parent.span_id for s in served if s.parent is not None} == call_ids
    assert {s.context.trace_id for s in served} == {int(trace_id, 16)}
