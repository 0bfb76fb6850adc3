"""A response the return type cannot hold is a row error, not a failed task.

Before, an answer such as 300 for a ``tinyint`` passed the decoder and then failed the whole
task inside Spark's Arrow conversion, even with ``on_error="null"``; a JSON list for a struct
was matched to its fields by position. Timestamps as input failed every task.
"""

from __future__ import annotations

import datetime
import decimal
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from codec import ResponseCode
from remoting.spark import remote_batch_udf, remote_map_in_arrow, remote_udf, with_remote_column
from remoting.spark._serde import misfits

from .service import BATCH_FAIL, BATCH_SUM, LENGTH, TYPED, UPPER

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .conftest import Service

PAIR = StructType([StructField("a", IntegerType()), StructField("b", IntegerType())])


@pytest.mark.parametrize(("values", "data_type", "bad"), [
    ([1, None, 127, 300, -129], ByteType(), {3, 4}),
    ([2**63 - 1, 2**63], LongType(), {1}),
    ([decimal.Decimal("12.5"), decimal.Decimal("1234.5"), decimal.Decimal("1.25")],
     DecimalType(3, 1), {1, 2}),
    ([[1, 2], [1, "x"], None], ArrayType(IntegerType()), {1}),
    ([{"a": 1, "b": 2}, [1, 2], {"a": 1}], PAIR, {1}),  # a list is not matched by position
    (["x", 5], StringType(), {1}),
    ([1, 2, None], IntegerType(), set()),
])
def test_misfits_names_the_rows_the_type_cannot_hold(values: list[Any], data_type: Any,
                                                     bad: set[int]) -> None:
    found = misfits(values, data_type)

    assert set(found) == bad
    for reason in found.values():
        assert data_type.simpleString() in reason


@pytest.mark.spark
def test_a_value_out_of_range_is_a_row_error_with_on_error_null(
        spark: SparkSession, service: Service) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(0, "x"), (1, "y" * 200), (2, "zz")], "id long, s string")
    udf = remote_udf(service.addr, LENGTH, return_type="tinyint", on_error="null")

    rows = {r["id"]: r for r in with_remote_column(df, "n", udf, F.col("s")).collect()}

    assert (rows[0]["n"], rows[0]["n_error"]) == (1, None)
    assert (rows[2]["n"], rows[2]["n_error"]) == (2, None)
    assert rows[1]["n"] is None
    assert rows[1]["n_error"]["code"] == ResponseCode.RPC_UNKNOWN
    assert "200 does not fit tinyint" in rows[1]["n_error"]["remark"]


@pytest.mark.spark
def test_a_value_out_of_range_fails_the_task_naming_the_row_with_on_error_raise(
        spark: SparkSession, service: Service) -> None:
    from pyspark.errors import PythonException

    df = spark.createDataFrame([("x",), ("y" * 200,)], "s string").coalesce(1)
    udf = remote_udf(service.addr, LENGTH, return_type="tinyint")

    with pytest.raises(PythonException, match=r"RemoteCallError: 1 of 2 rows failed .*row 1: "
                       r"code -1000: the response does not fit: 200 does not fit tinyint"):
        df.withColumn("n", udf("s")).collect()


@pytest.mark.spark
def test_a_json_list_for_a_struct_is_a_row_error(spark: SparkSession, service: Service) -> None:
    df = spark.range(3).coalesce(1)
    udf = remote_udf(service.addr, TYPED, return_type="struct<a: bigint, b: bigint>",
                     header={"want": "array"}, on_error="null")

    rows = with_remote_column(df, "v", udf, "id").collect()

    assert [r["v"] for r in rows] == [None, None, None]
    assert {r["v_error"]["code"] for r in rows} == {ResponseCode.RPC_UNKNOWN}
    assert "needs a JSON object" in rows[0]["v_error"]["remark"]


@pytest.mark.spark
def test_a_batch_answer_out_of_range_is_an_error_of_its_batch(
        spark: SparkSession, service: Service) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(1, 2), (100, 100)], "a int, b int").coalesce(1)
    udf = remote_batch_udf(service.addr, BATCH_SUM, on_error="null",
                           return_type="struct<total: tinyint, label: string>")

    rows = with_remote_column(df, "r", udf, F.struct("a", "b")).collect()

    assert [r["r"] for r in rows] == [None, None]  # 200 does not fit: the whole batch fails
    assert {r["r_error"]["code"] for r in rows} == {ResponseCode.RPC_UNKNOWN}
    assert "does not fit struct<total:tinyint,label:string>" in rows[0]["r_error"]["remark"]

    fits = remote_batch_udf(service.addr, BATCH_SUM,
                            return_type="struct<total: bigint, label: string>")
    assert [tuple(r["r"]) for r in df.withColumn("r", fits(F.struct("a", "b"))).collect()] == [
        (3, "a+b"), (200, "a+b")]


@pytest.mark.spark
def test_timestamp_and_date_columns_are_sent_as_iso_8601(
        spark: SparkSession, service: Service) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame(
        [(datetime.datetime(2024, 1, 2, 3, 4, 5), datetime.date(2024, 1, 2))],
        "t timestamp, d date")
    echo = remote_udf(service.addr, UPPER)

    row = df.select(echo("t").alias("t"), echo("d").alias("d"),
                    echo(F.struct("t", "d")).alias("s")).collect()[0]

    assert row["t"] == '"2024-01-02T03:04:05"'
    assert row["d"] == '"2024-01-02"'
    assert row["s"] == '{"T":"2024-01-02T03:04:05","D":"2024-01-02"}'


@pytest.mark.spark
def test_map_in_arrow_errors_point_to_the_helper_with_per_row_errors(
        spark: SparkSession, service: Service) -> None:
    from pyspark.errors import PythonException

    with pytest.raises(PythonException) as caught:
        remote_map_in_arrow(spark.range(2), service.addr, BATCH_FAIL, "id long").collect()

    message = str(caught.value)
    assert "use remote_batch_udf with on_error='null'" in message
    assert "use on_error='null' to get" not in message  # it has no such option


# ------------------------------------------------------------- batch answers (no Spark)

def _batch(**columns: list[Any]) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array(v) for v in columns.values()],
                                      names=list(columns))


def test_answers_to_a_split_batch_are_unified_as_arrow_promotes_types() -> None:
    # A slice whose answers were all null came back as a null column, and combining the
    # slices raised ArrowInvalid out of the task, also with on_error="null".
    from remoting.spark._batch_udf import _combined

    combined = _combined([_batch(value=["a", "b"]), _batch(value=[None, None])])
    assert not isinstance(combined, tuple)
    assert combined.column(0).to_pylist() == ["a", "b", None, None]

    refused = _combined([_batch(value=["a"]), _batch(value=[1])])
    assert isinstance(refused, tuple) and refused[0] == ResponseCode.RPC_UNKNOWN
    assert "do not fit together" in refused[1]


@pytest.mark.parametrize(("answer", "data_type", "words"), [
    # two columns named "value": the first was taken, silently
    ({"names": ["value", "value"], "values": [["W"], ["R"]]}, StringType(), "are not"),
    # for a struct, get_field_index gave -1 and column(-1) was the last column ("x")
    ({"names": ["b", "b", "x"], "values": [["1"], ["2"], ["x"]]},
     StructType([StructField("b", StringType())]), "are not"),
    ({"names": [], "values": []}, StringType(), "are not"),  # was IndexError
    # an int for a timestamp was read as microseconds since 1970
    ({"names": ["value"], "values": [[1_700_000_000]]}, None, "must be an Arrow timestamp"),
], ids=["two-value-columns", "struct-field-twice", "no-columns", "int-for-timestamp"])
def test_an_answer_that_is_ambiguous_or_of_the_wrong_kind_is_an_error_of_its_batch(
        answer: dict[str, Any], data_type: Any, words: str) -> None:
    import pyarrow as pa
    from pyspark.sql.types import TimestampType

    from remoting.spark._batch_udf import _batchoutput

    batch = (pa.RecordBatch.from_arrays([pa.array(v) for v in answer["values"]],
                                        names=answer["names"])
             if answer["names"] else _batch(value=["x"]).select([]))  # 1 row, no columns
    result = _batchoutput(batch, 1, data_type or TimestampType())
    assert isinstance(result, tuple) and result[0] == ResponseCode.RPC_UNKNOWN
    assert words in result[1]


def test_a_timestamp_answer_may_be_a_timestamp_or_iso_text() -> None:
    from pyspark.sql.types import TimestampType

    from remoting.spark._batch_udf import _batchoutput

    stamped = _batchoutput(_batch(value=[datetime.datetime(2024, 1, 2, 3, 4, 5)]), 1,
                           TimestampType())
    text = _batchoutput(_batch(value=["2024-01-02T03:04:05Z"]), 1, TimestampType())
    assert not isinstance(stamped, tuple) and not isinstance(text, tuple)
    assert stamped.iloc[0].isoformat() == "2024-01-02T03:04:05"
    assert text.iloc[0].isoformat() == "2024-01-02T03:04:05+00:00"
