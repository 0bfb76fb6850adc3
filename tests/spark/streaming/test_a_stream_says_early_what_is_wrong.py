"""A streaming query that cannot work fails when it is set up, saying what to do: Spark's
Python workers without this package (a local master's are pointed at this interpreter), and a
topic that does not exist (unless the query is told to wait for it). Without these, a reader
of docs/spark.md#streaming got ``No module named 'remoting'`` from a worker, and a query of a
missing topic ended with an empty batch and no error."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from codec import ResponseCode
from remoting.queue import QueueError
from remoting.spark import register_data_source
from remoting.spark._python_workers import check_python_workers

from ...logs import capture_logs
from .conftest import Queue

pytestmark = pytest.mark.spark


def _python_without_the_package(tmp_path: Path) -> str:
    """An interpreter of the driver's version that cannot import this package: the base
    interpreter, isolated (no current directory, no PYTHONPATH, no virtualenv)."""
    base = getattr(sys, "_base_executable", sys.executable)
    script = tmp_path / "python-without-remoting"
    script.write_text(f'#!/bin/sh\nexec "{base}" -I "$@"\n')
    script.chmod(0o755)
    return str(script)


def test_a_local_session_s_workers_are_pointed_at_this_interpreter(
        spark: Any, queue: Queue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bare = _python_without_the_package(tmp_path)
    monkeypatch.setattr(spark.sparkContext, "pythonExec", bare)  # as PYSPARK_PYTHON=bare
    with capture_logs("remoting.spark") as logs:
        register_data_source(spark)
    assert spark.sparkContext.pythonExec == sys.executable
    [set_] = [e for e in logs if e["event"] == "spark.python_workers_set"]
    assert (set_["was"], set_["now"]) == (bare, sys.executable)
    assert "no module named 'remoting'" in set_["reason"]
    # the source is planned and read in workers of this interpreter (with `bare`: "No
    # module named 'remoting'")
    queue.q.publish_many(queue.addr, "t", [b"a", b"b"])
    table = (spark.read.format("remoting").option("addresses", queue.addr)
             .option("topic", "t").load())
    assert [bytes(r.body) for r in table.orderBy("offset").collect()] == [b"a", b"b"]


class ClusterContext:
    """What `check_python_workers` reads of a SparkContext whose master is a cluster (the
    real one is in tests/cluster, which starts a standalone cluster)."""

    master = "spark://127.0.0.1:7077"
    _python_includes: list[str] = []

    def __init__(self, python: str) -> None:
        self.pythonExec = python


def test_another_master_s_workers_without_the_package_fail_registration_saying_what_to_set(
        tmp_path: Path) -> None:
    context = ClusterContext(_python_without_the_package(tmp_path))
    with pytest.raises(ImportError, match="no module named 'remoting'.*Set PYSPARK_PYTHON"):
        check_python_workers(context)  # type: ignore[arg-type]
    assert context.pythonExec != sys.executable  # a cluster's setting is not changed here
    context = ClusterContext(str(tmp_path / "no-such-python"))
    with pytest.raises(ImportError, match="cannot be run"):
        check_python_workers(context)  # type: ignore[arg-type]


def test_a_stream_of_a_topic_that_does_not_exist_fails_when_it_starts(
        streaming: Any, queue: Queue, tmp_path: Path) -> None:
    query = (streaming.readStream.format("remoting").option("addresses", queue.addr)
             .option("topic", "nobody-publishes-here").load()
             .writeStream.format("memory").queryName("missing_topic")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    with pytest.raises(Exception, match="topic 'nobody-publishes-here' does not exist.*"
                       "waitForTopic=true"):
        query.awaitTermination(120)


def test_a_stream_told_to_wait_reads_the_topic_once_it_exists(
        streaming: Any, queue: Queue, tmp_path: Path) -> None:
    query = (streaming.readStream.format("remoting").option("addresses", queue.addr)
             .option("topic", "later").option("waitForTopic", "true").load()
             .writeStream.format("memory").queryName("waited_topic")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.processAllAvailable()  # running, the topic still missing: nothing to read
        queue.q.publish_many(queue.addr, "later", [b"a", b"b"])
        query.processAllAvailable()
        rows = streaming.sql("SELECT body FROM waited_topic ORDER BY offset").collect()
    finally:
        query.stop()
    assert [bytes(r.body) for r in rows] == [b"a", b"b"]


def test_a_batch_read_of_a_topic_that_does_not_exist_fails(streaming: Any, queue: Queue) -> None:
    reader = (streaming.read.format("remoting").option("addresses", queue.addr)
              .option("topic", "nobody-publishes-here"))
    with pytest.raises(Exception, match="does not exist"):
        reader.load().collect()


def test_the_missing_topic_error_is_a_queue_error(queue: Queue) -> None:
    from remoting.spark._streaming._options import source_options
    from remoting.spark._streaming._source import QueueStreamReader

    options = {"addresses": queue.addr, "topic": "nobody-publishes-here"}
    with pytest.raises(QueueError, match="does not exist") as caught:
        QueueStreamReader(source_options(options, streaming=True)).initialOffset()
    assert caught.value.code == ResponseCode.TOPIC_NOT_EXIST
    waiting = {**options, "waitForTopic": "true"}
    assert QueueStreamReader(source_options(waiting, streaming=True)).initialOffset()[
        "offset"] == 0
