"""The sink's publishes: a partition's rows become the same chunks, with the same idempotence
keys, every time the same rows come in the same order (however Arrow batched them), so the
service de-duplicates a batch run again; its input is checked in the driver."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from remoting.spark._streaming._sink import (
    PUBLISH_MESSAGES,
    check_schema,
    chunks,
    key_of,
    rows_of,
)

HEADERS = pa.map_(pa.string(), pa.string())


def batches_of(bodies: list[bytes], cut: int) -> list[pa.RecordBatch]:
    table = pa.table({"body": pa.array(bodies, pa.binary())})
    batches: list[pa.RecordBatch] = table.to_batches(max_chunksize=cut)
    return batches


def test_the_same_rows_make_the_same_chunks_however_they_are_batched() -> None:
    bodies = [b"x" * (i % 700) for i in range(10_000)]

    first = list(chunks(rows_of(batches_of(bodies, 1_000)), max_bytes=512 * 1024))
    second = list(chunks(rows_of(batches_of(bodies, 37)), max_bytes=512 * 1024))

    assert first == second
    assert sum(len(c) for c in first) == 10_000
    assert all(len(c) <= PUBLISH_MESSAGES for c in first)
    assert all(sum(len(b) for b, _ in c[:-1]) < 512 * 1024 for c in first)


def test_a_chunk_closes_at_its_message_count() -> None:
    sizes = [len(c) for c in chunks(((b"", {}) for _ in range(10_000)), max_messages=4096)]
    assert sizes == [4096, 4096, 1808]


def test_keys_name_the_query_the_batch_the_partition_and_the_chunk() -> None:
    assert key_of("5f0c-q", "17", 3, 0) == "spark/5f0c-q/17/3/0"
    assert len(key_of("0" * 36, str(2**63), 2**31, 10**6).encode()) < 1024


def test_rows_carry_bodies_as_bytes_and_their_headers() -> None:
    batch = pa.record_batch([
        pa.array(["text", "ünï"], pa.string()),
        pa.array([[("k", "v")], None], HEADERS),
    ], names=["body", "headers"])

    assert list(rows_of([batch])) == [(b"text", {"k": "v"}), ("ünï".encode(), {})]


def test_a_null_body_fails_the_task_naming_the_row() -> None:
    batch = pa.record_batch([pa.array([b"a", None], pa.binary())], names=["body"])
    with pytest.raises(ValueError, match="row 1 of the partition has a null body"):
        list(rows_of([batch]))


@pytest.mark.parametrize(("fields", "message"), [
    ([StructField("value", BinaryType())], "writes a column body"),
    ([StructField("body", BinaryType()), StructField("id", IntegerType())], "got body, id"),
    ([StructField("body", IntegerType())], "body must be binary or string, got int"),
    ([StructField("body", StringType()), StructField("headers", MapType(StringType(),
                                                                        IntegerType()))],
     "headers must be map<string,string>"),
])
def test_the_sinks_input_is_checked(fields: list[StructField], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_schema(StructType(fields))


def test_a_body_with_headers_is_accepted() -> None:
    check_schema(StructType([StructField("body", StringType()),
                             StructField("headers", MapType(StringType(), StringType()))]))
