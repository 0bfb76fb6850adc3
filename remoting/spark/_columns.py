"""What the Spark UDFs share: their error and result types, argument checks, and how row
outcomes become pandas columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn, Protocol

import pandas as pd
from pyspark.sql.functions import col
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from codec import RemotingCommand, ResponseCode

from .._errors import RemotingError
from ._calls import DEFAULT_COOLDOWN, Outcome, error_of
from ._serde import Serializer, misfits, to_pandas_column

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column, DataFrame

__all__ = [
    "RemoteUDF",
    "DEFAULT_BATCH_TIMEOUT",
    "DEFAULT_COOLDOWN",
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_ROW_TIMEOUT",
    "ERROR_TYPE",
    "FRAME_SLACK_BYTES",
    "BatchStats",
    "OnError",
    "RemoteCallError",
    "column_of",
    "data_type",
    "decode_outcomes",
    "output",
    "raise_first",
    "result_type",
    "with_remote_column",
]


OnError = Literal["raise", "null"]


class RemoteUDF(Protocol):
    """What `remote_udf` and `remote_batch_udf` return: a Spark UDF to call on columns."""

    @property
    def returnType(self) -> DataType:  # noqa: N802  (pyspark's name)
        """The Spark type of the column it makes (``struct<value, error>`` for "null")."""
        ...

    def __call__(self, *cols: Column | str) -> Column:
        """Return the column computed from ``cols`` (one column, or several)."""
        ...

#: The companion error column of ``on_error="null"``: the response code (or a client-side
#: pseudo code such as -1006 ``RPC_TIME_OUT``) and the remark.
ERROR_TYPE: Final = StructType([
    StructField("code", IntegerType(), True),
    StructField("remark", StringType(), True),
])

DEFAULT_ROW_TIMEOUT: Final = 3.0  # RocketMQ's usual timeoutMillis
DEFAULT_BATCH_TIMEOUT: Final = 30.0  # a batch carries ~10,000 rows of work
DEFAULT_MAX_IN_FLIGHT: Final = 256  # per worker process; measured plateau on loopback
FRAME_SLACK_BYTES: Final = 64 * 1024  # room for the header inside max_frame_bytes

_ATOMIC_TYPES: Final[dict[str, DataType]] = {
    "string": StringType(), "str": StringType(),
    "binary": BinaryType(), "boolean": BooleanType(), "bool": BooleanType(),
    "tinyint": ByteType(), "byte": ByteType(), "smallint": ShortType(), "short": ShortType(),
    "int": IntegerType(), "integer": IntegerType(), "bigint": LongType(), "long": LongType(),
    "float": FloatType(), "double": DoubleType(), "date": DateType(),
    "timestamp": TimestampType(),
}


ON_ERROR_HINT: Final = "use on_error='null' to get per-row errors instead"


class RemoteCallError(RemotingError):
    """Rows of a batch failed and the UDF was made with ``on_error="raise"``.

    Raised in the Python worker, so the task fails (and Spark retries it, re-sending the
    whole partition). Attributes describe the first failed row.

    Attributes:
        code: the response code, or a pseudo code (-1006 timeout, -1004 send/connect failed).
        remark: the response remark or the transport error.
        row: index of the first failed row within its Arrow batch.
        failed: how many rows of the batch failed.
    """

    def __init__(self, code: int, remark: str, *, row: int, failed: int, total: int,
                 request_code: int, hint: str = ON_ERROR_HINT) -> None:
        self.code = code
        self.remark = remark
        self.row = row
        self.failed = failed
        super().__init__(
            f"{failed} of {total} rows failed calling request code {request_code}; first: row "
            f"{row}: code {code}: {remark} ({hint})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchStats:
    """What one Arrow batch cost, passed to ``on_batch`` in the worker.

    Attributes:
        mode: ``"row"`` (one request per row) or ``"batch"`` (one per Arrow batch).
        rows: rows in the Arrow batch.
        requests: requests sent (null rows are not sent; a large batch may be split).
        errors: rows that got an error.
        seconds: wall time of the calls (one ``invoke_many`` hand-off or more).
        max_in_flight: the in-flight bound used.
        cooling: the UDF's addresses this worker process skips as the batch ends (they
            refused, lost or stalled a call in the last ``cooldown`` seconds); through an
            accumulator, the driver sees a dead server without reading executor logs.
    """

    mode: Literal["row", "batch"]
    rows: int
    requests: int
    errors: int
    seconds: float
    max_in_flight: int
    cooling: tuple[str, ...] = ()


def result_type(return_type: DataType, on_error: OnError) -> DataType:
    """Return the UDF's Spark type: ``return_type``, or ``struct<value, error>`` for "null"."""
    if on_error == "raise":
        return return_type
    return StructType([
        StructField("value", return_type, True),
        StructField("error", ERROR_TYPE, True),
    ])


def data_type(return_type: DataType | str) -> DataType:
    if isinstance(return_type, DataType):
        return return_type
    if not isinstance(return_type, str):  # e.g. the Python type str: its .strip crashed 3.11.7
        raise TypeError("return_type must be a pyspark.sql.types.DataType or a type string "
                        f"such as 'double', got {return_type!r}")
    atomic = _ATOMIC_TYPES.get(return_type.strip().lower())
    if atomic is not None:
        return atomic
    from pyspark import SparkContext
    from pyspark.sql.types import _parse_datatype_string

    if SparkContext._active_spark_context is None:
        raise ValueError(
            f"cannot parse return type {return_type!r} without a SparkSession: start one "
            "first, or pass a pyspark.sql.types.DataType"
        )
    return _parse_datatype_string(return_type)


def column_of(args: pd.Series | pd.DataFrame | tuple[pd.Series | pd.DataFrame, ...]
               ) -> pd.Series | pd.DataFrame:
    """Return the UDF's one argument; several columns become one list per row."""
    if not isinstance(args, tuple):
        return args
    parts = [a.to_dict("records") if isinstance(a, pd.DataFrame) else a.tolist() for a in args]
    return pd.Series([list(row) for row in zip(*parts, strict=True)], dtype=object)


def raise_first(errors: Sequence[tuple[int, str] | None], failed: int, request_code: int,
                hint: str = ON_ERROR_HINT) -> NoReturn:
    row = next(i for i, e in enumerate(errors) if e is not None)
    code, remark = errors[row]  # type: ignore[misc]
    raise RemoteCallError(code, remark, row=row, failed=failed, total=len(errors),
                          request_code=request_code, hint=hint)


def decode_outcomes(outcomes: Sequence[Outcome], serializer: Serializer, value_type: DataType
                    ) -> tuple[list[Any], list[tuple[int, str] | None], int]:
    """Return (values, errors, failed) for one batch of row outcomes.

    A SUCCESS body that cannot be decoded, or whose value ``value_type`` cannot hold, is a
    row error (``RPC_UNKNOWN``), not a failed task.
    """
    n = len(outcomes)
    values: list[Any] = [None] * n
    errors: list[tuple[int, str] | None] = [None] * n
    failed = 0
    decode = serializer.decode
    success = ResponseCode.SUCCESS
    for i, outcome in enumerate(outcomes):
        if outcome is None:
            continue
        if type(outcome) is RemotingCommand and outcome.code == success:
            try:
                values[i] = decode(outcome.body)
            except Exception as exc:  # a body the return type cannot hold: a row error
                errors[i] = (int(ResponseCode.RPC_UNKNOWN),
                             f"cannot decode the response body: {exc!r}")
                failed += 1
            continue
        errors[i] = error_of(outcome)
        failed += 1
    for i, reason in misfits(values, value_type).items():
        values[i] = None
        errors[i] = (int(ResponseCode.RPC_UNKNOWN), f"the response does not fit: {reason}")
        failed += 1
    return values, errors, failed


def output(values: Sequence[Any], errors: Sequence[tuple[int, str] | None],
            value_type: DataType, on_error: OnError) -> pd.Series | pd.DataFrame:
    if on_error == "raise":
        return to_pandas_column(values, value_type)
    if isinstance(value_type, StructType):
        value_column: pd.Series = pd.Series(list(values), dtype=object)
    else:
        value_column = to_pandas_column(values, value_type)
    error_column = pd.Series(
        [None if e is None else {"code": e[0], "remark": e[1]} for e in errors], dtype=object
    )
    return pd.DataFrame({"value": value_column, "error": error_column})


def with_remote_column(df: DataFrame, name: str, udf: RemoteUDF, *cols: str | Column
                       ) -> DataFrame:
    """Add column ``name`` computed by a remote UDF; with ``on_error="null"`` also its error.

    For a UDF made with ``on_error="null"``, ``name`` holds the value (null when the call
    failed) and ``name + "_error"`` the companion ``struct<code: int, remark: string>`` (null
    when the call succeeded). Otherwise this is ``df.withColumn(name, udf(*cols))``.
    """
    if not _is_null_mode(udf.returnType):
        return df.withColumn(name, udf(*cols))
    tmp = f"__{name}_remote"
    return (df.withColumn(tmp, udf(*cols))
            .withColumn(name, col(tmp).getField("value"))
            .withColumn(f"{name}_error", col(tmp).getField("error"))
            .drop(tmp))


def _is_null_mode(data_type: DataType) -> bool:
    return (isinstance(data_type, StructType) and data_type.fieldNames() == ["value", "error"]
            and data_type["error"].dataType == ERROR_TYPE)
