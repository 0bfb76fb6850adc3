"""Per-row and batch UDFs against the test service: every row equals the local computation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from codec import ResponseCode
from remoting.spark import (
    remote_batch_udf,
    remote_map_in_arrow,
    remote_udf,
    with_remote_column,
)

from .service import (
    BATCH_ENRICH,
    BATCH_FAIL,
    BATCH_SUM,
    BATCH_UPPER,
    FLAKY,
    JSON_SUM,
    LENGTH,
    SLOW,
    TYPED,
    UPPER,
    upper,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .conftest import Service

pytestmark = pytest.mark.spark

ROWS = 3_000
PARTITIONS = 4


def strings(spark: SparkSession, rows: int = ROWS, partitions: int = PARTITIONS) -> DataFrame:
    """Return a DataFrame (id, s = "row-<id>")."""
    from pyspark.sql import functions as F

    return spark.range(rows, numPartitions=partitions).select(
        "id", F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"))


def by_id(df: DataFrame, *columns: str) -> dict[int, Any]:
    """Collect ``columns`` keyed by id (one value, or a tuple for several columns)."""
    out = {}
    for row in df.select("id", *columns).collect():
        out[row["id"]] = row[columns[0]] if len(columns) == 1 else tuple(row[c] for c in columns)
    return out


def test_per_row_results_equal_local_computation_one_request_per_row(
        spark: SparkSession, service: Service) -> None:
    before = service.recorder.count(UPPER)
    udf = remote_udf(service.addr, UPPER, max_in_flight=32)

    got = by_id(strings(spark).withColumn("up", udf("s")), "up")

    assert got == {i: upper(f"row-{i}") for i in range(ROWS)}
    assert service.recorder.count(UPPER) - before == ROWS


def test_per_row_decodes_numbers_and_structs(spark: SparkSession, service: Service) -> None:
    from pyspark.sql import functions as F

    df = strings(spark, rows=1_000)
    length = remote_udf(service.addr, LENGTH, return_type="int")
    total = remote_udf(service.addr, JSON_SUM,
                       return_type="struct<total: bigint, label: string>")

    out = (df.withColumn("n", length("s"))
           .withColumn("r", total(F.struct(F.col("id").alias("a"), (F.col("id") * 2).alias("b")))))

    got = by_id(out, "n", "r")
    assert got == {i: (len(f"row-{i}"), (3 * i, "a+b")) for i in range(1_000)}


def test_per_row_decodes_arrays_maps_and_dates(spark: SparkSession, service: Service) -> None:
    import datetime

    df = strings(spark, rows=300)
    out = (df.withColumn("a", remote_udf(service.addr, TYPED, return_type="array<bigint>",
                                         header={"want": "array"})("id"))
           .withColumn("m", remote_udf(service.addr, TYPED, return_type="map<string,bigint>",
                                       header={"want": "map"})("id"))
           .withColumn("d", remote_udf(service.addr, TYPED, return_type="date")("id")))

    got = by_id(out, "a", "m", "d")
    assert got == {i: ([i, i + 1], {"n": i}, datetime.date(2024, 1, 1 + i % 28))
                   for i in range(300)}


def test_several_columns_go_as_one_json_list(spark: SparkSession, service: Service) -> None:
    from pyspark.sql import functions as F

    echo = remote_udf(service.addr, UPPER)
    out = strings(spark, rows=200).withColumn("j", echo("id", F.lit("x")))

    assert by_id(out, "j") == {i: f'[{i},"X"]' for i in range(200)}


def test_null_inputs_give_null_without_a_call(spark: SparkSession, service: Service) -> None:
    from pyspark.sql import functions as F

    before = service.recorder.count(UPPER)
    df = strings(spark, rows=1_000).withColumn(
        "s", F.when(F.col("id") % 2 == 0, F.col("s")))  # odd ids: null
    out = df.withColumn("up", remote_udf(service.addr, UPPER)("s"))

    assert by_id(out, "up") == {i: upper(f"row-{i}") if i % 2 == 0 else None
                                for i in range(1_000)}
    assert service.recorder.count(UPPER) - before == 500


def test_batch_udf_results_equal_local_computation_one_request_per_batch(
        spark: SparkSession, service: Service) -> None:
    before = service.recorder.count(BATCH_UPPER)
    udf = remote_batch_udf(service.addr, BATCH_UPPER)

    got = by_id(strings(spark).withColumn("up", udf("s")), "up")

    assert got == {i: upper(f"row-{i}") for i in range(ROWS)}
    # 4 partitions of 750 rows in Arrow batches of 100: 8 batches each.
    assert service.recorder.count(BATCH_UPPER) - before == PARTITIONS * 8


def test_batch_udf_struct_in_struct_out(spark: SparkSession, service: Service) -> None:
    from pyspark.sql import functions as F

    udf = remote_batch_udf(service.addr, BATCH_SUM,
                           return_type="struct<total: bigint, label: string>")
    out = strings(spark, rows=500).withColumn(
        "r", udf(F.struct(F.col("id").alias("a"), F.lit(1).cast("bigint").alias("b"))))

    assert by_id(out, "r") == {i: (i + 1, "a+b") for i in range(500)}


def test_map_in_arrow_results_equal_local_computation(
        spark: SparkSession, service: Service) -> None:
    out = remote_map_in_arrow(strings(spark), service.addr, BATCH_ENRICH,
                              "id long, s string, up string")

    assert by_id(out, "up") == {i: upper(f"row-{i}") for i in range(ROWS)}


def test_on_error_null_gives_null_and_companion_error_column(
        spark: SparkSession, service: Service) -> None:
    before = service.recorder.count(FLAKY)
    udf = remote_udf(service.addr, FLAKY, on_error="null")

    out = with_remote_column(strings(spark), "up", udf, "s")

    assert out.schema["up_error"].dataType.simpleString() == "struct<code:int,remark:string>"
    got = by_id(out, "up", "up_error")
    assert service.recorder.count(FLAKY) - before == ROWS  # the UDF ran once, not per field
    for i in range(ROWS):
        if i % 10 == 7:
            assert got[i][0] is None
            assert tuple(got[i][1]) == (ResponseCode.SYSTEM_ERROR, "no sevens")
        else:
            assert got[i] == (upper(f"row-{i}"), None)


def test_on_error_null_in_batch_mode_nulls_the_whole_batch(
        spark: SparkSession, service: Service) -> None:
    udf = remote_batch_udf(service.addr, BATCH_FAIL, on_error="null")

    rows = with_remote_column(strings(spark, rows=300), "up", udf, "s").collect()

    assert len(rows) == 300
    assert all(r["up"] is None for r in rows)
    assert {r["up_error"]["code"] for r in rows} == {ResponseCode.SYSTEM_ERROR}
    assert "always fails" in rows[0]["up_error"]["remark"]


def test_on_error_raise_fails_the_job_naming_the_row_and_code(
        spark: SparkSession, service: Service) -> None:
    from pyspark.errors import PythonException

    udf = remote_udf(service.addr, FLAKY)

    with pytest.raises(PythonException, match=r"RemoteCallError: 10 of 100 rows failed .*"
                       r"row 7: code 1: no sevens"):
        strings(spark, rows=400, partitions=1).withColumn("up", udf("s")).collect()


def test_slow_rows_time_out_and_the_others_succeed(spark: SparkSession, service: Service) -> None:
    udf = remote_udf(service.addr, SLOW, timeout=0.5, on_error="null")

    got = by_id(with_remote_column(strings(spark, rows=1_000), "v", udf, "s"), "v", "v_error")

    for i in range(1_000):
        if f"row-{i}".endswith("13"):
            assert got[i][0] is None
            assert got[i][1]["code"] == ResponseCode.RPC_TIME_OUT
        else:
            assert got[i] == (f"row-{i}", None)


def test_a_server_that_never_answers_costs_about_one_timeout_per_batch(
        spark: SparkSession, service: Service) -> None:
    import socket

    from pyspark.accumulators import AccumulatorParam

    class ListParam(AccumulatorParam[list[Any]]):
        def zero(self, value: list[Any]) -> list[Any]:
            return []

        def addInPlace(self, a: list[Any], b: list[Any]) -> list[Any]:
            return a + b

    sent = spark.sparkContext.accumulator([], ListParam())  # requests sent, per batch
    with socket.socket() as silent:  # accepts connections (backlog), never reads or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        host, port = silent.getsockname()
        udf = remote_udf(f"{host}:{port}", UPPER, timeout=0.5, max_in_flight=10,
                         on_error="null", on_batch=lambda s: sent.add([s.requests]))

        rows = with_remote_column(strings(spark, rows=800, partitions=2), "up", udf,
                                  "s").collect()

    # 8 batches of 100 rows. Without the chunk breaker each batch would send all its rows,
    # a window of 10 at a time, each waiting 0.5 s (20 s in all); with it, one window per
    # batch at most (a server cooling down after a failure gets none)
    assert len(sent.value) == 8 and max(sent.value) <= 10, sent.value
    assert all(r["up"] is None for r in rows)
    assert {r["up_error"]["code"] for r in rows} == {ResponseCode.RPC_TIME_OUT}


def test_rows_fail_over_to_the_next_address(spark: SparkSession, service: Service) -> None:
    dead = "127.0.0.1:1"  # nothing listens on port 1
    udf = remote_udf([dead, service.addr], UPPER)

    got = by_id(strings(spark, rows=1_000).withColumn("up", udf("s")), "up")

    assert got == {i: upper(f"row-{i}") for i in range(1_000)}


def test_killed_server_gives_per_row_errors_quickly(
        spark: SparkSession, fresh_service: Service) -> None:
    udf = remote_udf(fresh_service.addr, UPPER, on_error="null")
    df = strings(spark, rows=2_000)
    warm = by_id(with_remote_column(df, "up", udf, "s"), "up")
    assert warm == {i: upper(f"row-{i}") for i in range(2_000)}  # the workers are connected

    fresh_service.server.shutdown()
    rows = with_remote_column(df, "up", udf, "s").collect()

    # failed to send, not RPC_TIME_OUT: no row waited for its timeout
    assert all(r["up"] is None for r in rows)
    assert {r["up_error"]["code"] for r in rows} == {ResponseCode.RPC_SEND_TO_CHANNEL_FAILED}


def test_on_batch_reports_each_arrow_batch(spark: SparkSession, service: Service) -> None:
    from pyspark.accumulators import AccumulatorParam

    class ListParam(AccumulatorParam[list[Any]]):
        def zero(self, value: list[Any]) -> list[Any]:
            return []

        def addInPlace(self, a: list[Any], b: list[Any]) -> list[Any]:
            return a + b

    acc = spark.sparkContext.accumulator([], ListParam())
    udf = remote_udf(service.addr, UPPER,
                     on_batch=lambda s: acc.add([(s.mode, s.rows, s.requests, s.errors)]))

    strings(spark, rows=1_000, partitions=2).withColumn("up", udf("s")).collect()

    assert sorted(acc.value) == [("row", 100, 100, 0)] * 10


def test_on_batch_tells_the_driver_which_servers_are_cooling_down(
        spark: SparkSession, service: Service) -> None:
    import socket

    from pyspark.accumulators import AccumulatorParam

    class SetParam(AccumulatorParam[set[str]]):
        def zero(self, value: set[str]) -> set[str]:
            return set()

        def addInPlace(self, a: set[str], b: set[str]) -> set[str]:
            return a | b

    with socket.create_server(("127.0.0.1", 0)) as s:  # closed again: nothing listens there
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    cooling = spark.sparkContext.accumulator(set(), SetParam())
    udf = remote_udf([dead, service.addr], UPPER,
                     on_batch=lambda s: cooling.add(set(s.cooling)))

    # Several Arrow batches per task, so every task starts a batch on each address: which
    # address a task's first batch starts on depends on its worker's pid.
    batch_rows = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert batch_rows is not None  # (Spark's default, 10000)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        rows = strings(spark, rows=1_000, partitions=2).withColumn("up", udf("s")).collect()
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", batch_rows)

    assert all(r["up"] == r["s"].upper() for r in rows)  # the rows went to the live server
    assert cooling.value == {dead}
