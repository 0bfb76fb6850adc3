"""The ``remoting`` format in a real SparkSession: a batch read of an offset range, in tasks of
``messagesPerPartition``; a deferred message not yet due ends what a read takes; a stream that
starts at ``latest`` reads only what comes after it; bodies decode from JSON and from Arrow, a
malformed one failing the query with its offset or kept with a ``body_error``; a misspelt
option is refused when the query is planned."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from remoting.spark import decode_bodies

from .conftest import Queue

pytestmark = pytest.mark.spark


def remoting_read(spark: Any, queue: Queue, **options: str) -> Any:
    reader = spark.read.format("remoting").option("addresses", queue.addr)
    for key, value in {"topic": "t", **options}.items():
        reader = reader.option(key, value)
    return reader.load()


def test_a_batch_read_takes_an_offset_range_in_tasks_of_the_size(
        streaming: Any, queue: Queue) -> None:
    queue.q.publish_many(queue.addr, "t", [b"%d" % i for i in range(300)])

    df = remoting_read(streaming, queue, startingOffsets="100", endingOffsets="200",
                       messagesPerPartition="30")

    assert df.schema.simpleString() == (
        "struct<offset:bigint,timestamp:timestamp,headers:map<string,string>,body:binary>")
    assert df.rdd.getNumPartitions() == 4
    rows = df.orderBy("offset").collect()
    assert [r.offset for r in rows] == list(range(100, 200))
    assert all(r.body == b"%d" % r.offset for r in rows)


def test_a_read_stops_at_a_deferred_message_not_yet_due(streaming: Any, queue: Queue) -> None:
    queue.q.publish_many(queue.addr, "t", [b"a"] * 10)
    queue.q.publish(queue.addr, "t", b"later", defer=600.0)
    queue.q.publish_many(queue.addr, "t", [b"b"] * 5)

    assert remoting_read(streaming, queue).count() == 10
    assert remoting_read(streaming, queue, endingOffsets="14").count() == 10


def test_a_stream_from_latest_reads_only_what_comes_after_it_starts(
        streaming: Any, queue: Queue) -> None:
    queue.q.publish_many(queue.addr, "t", [b"old"] * 50)
    query = (streaming.readStream.format("remoting").option("addresses", queue.addr)
             .option("topic", "t").load()
             .writeStream.format("memory").queryName("from_latest").start())
    try:
        query.processAllAvailable()  # the query has its starting offset
        queue.q.publish_many(queue.addr, "t", [b"new %d" % i for i in range(5)])
        query.processAllAvailable()
        got = streaming.sql("SELECT offset, body FROM from_latest ORDER BY offset").collect()
    finally:
        query.stop()
    assert [(r.offset, r.body) for r in got] == [(50 + i, b"new %d" % i) for i in range(5)]


def test_json_bodies_decode_and_a_malformed_one_is_an_error_column_or_a_failure(
        streaming: Any, queue: Queue) -> None:
    bodies = [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in range(20)]
    bodies[7] = b"{not json"
    bodies[9] = b'{"id": "seven"}'
    queue.q.publish_many(queue.addr, "t", bodies)
    df = remoting_read(streaming, queue)

    kept = decode_bodies(df, "id long, name string", on_error="null").orderBy("offset")
    rows = kept.collect()
    assert kept.columns == ["offset", "timestamp", "headers", "id", "name", "body_error"]
    assert [r.offset for r in rows if r.body_error] == [7, 9]
    assert all(r.id == r.offset and r.name == f"n{r.offset}" for r in rows if not r.body_error)
    assert rows[7].id is None and rows[7].body_error == "not a JSON object of the schema"

    with pytest.raises(Exception, match=r"remoting.spark: the body at offset 7 does not decode"):
        decode_bodies(df, "id long, name string").collect()


@pytest.mark.parametrize("on_error", ["raise", "null"])
def test_a_json_body_is_parsed_once_and_a_bad_one_fails_whatever_is_selected(
        streaming: Any, queue: Queue, on_error: str) -> None:
    queue.q.publish_many(queue.addr, "t", [b'{"id": 1}', b"{not json", b'{"id": 3}'])
    df = remoting_read(streaming, queue)

    decoded = decode_bodies(df, "id long, name string", on_error=on_error)  # type: ignore[arg-type]

    # the raising filter once made Spark parse each body three times (pushed below the parse)
    plan = decoded._jdf.queryExecution().executedPlan().toString()
    assert plan.count("from_json(") == 1
    if on_error == "raise":  # the filter is kept whatever the query reads of the result
        with pytest.raises(Exception, match=r"the body at offset 1 does not decode"):
            decoded.select("offset").count()
    else:
        assert decoded.where("body_error IS NULL").select("offset").count() == 2


def test_a_bad_body_in_a_row_filtered_out_on_the_sources_columns_fails_nothing(
        streaming: Any, queue: Queue) -> None:
    queue.q.publish_many(queue.addr, "t", [b'{"id": 1}', b"{not json", b'{"id": 3}'])
    decoded = decode_bodies(remoting_read(streaming, queue), "id long, name string")

    # Spark drops offset 1 before its body is decoded (the filter goes below the parse)
    assert [r.id for r in decoded.where("offset <> 1").orderBy("offset").collect()] == [1, 3]
    with pytest.raises(Exception, match=r"the body at offset 1 does not decode"):
        decoded.where("offset >= 0").collect()


def test_arrow_bodies_decode_into_their_rows(streaming: Any, queue: Queue) -> None:
    def ipc(table: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        data: bytes = sink.getvalue().to_pybytes()
        return data

    queue.q.publish_many(queue.addr, "t", [
        ipc(pa.table({"id": [1, 2], "score": [0.5, 1.5], "extra": ["x", "y"]})),
        b"not arrow",
        ipc(pa.table({"id": pa.array([3], pa.int32()), "score": [2.5]})),
    ])
    df = remoting_read(streaming, queue)

    rows = decode_bodies(df, "id long, score double", format="arrow",
                         on_error="null").orderBy("offset", "id").collect()
    assert [(r.offset, r.id, r.score) for r in rows] == [
        (0, 1, 0.5), (0, 2, 1.5), (1, None, None), (2, 3, 2.5)]
    assert rows[2].body_error.startswith("not an Arrow stream of the schema")
    with pytest.raises(Exception, match=r"the body at offset 1 does not decode"):
        decode_bodies(df, "id long, score double", format="arrow").collect()


def test_a_misspelt_option_is_refused_when_loaded(streaming: Any, queue: Queue) -> None:
    queue.q.create_topic(queue.addr, "t")
    with pytest.raises(Exception, match="has no option 'maxmessagepertrigger' "
                       r"\(did you mean maxMessagesPerTrigger\?\)"):
        remoting_read(streaming, queue, maxMessagePerTrigger="10")
