"""Call remoting services from PySpark: per-row and per-Arrow-batch UDFs (the ``spark`` extra).

Per-row mode, `remote_udf`: a pandas UDF (iterator form) that sends one request per row.
Each Arrow batch goes to the client's trio thread in one hand-off (`RemotingClient.invoke_many`)
and fans out there, at most ``max_in_flight`` requests at a time; results come back in row
order. Batch mode, `remote_batch_udf` and `remote_map_in_arrow`: one request per Arrow batch,
its body an Arrow IPC stream, answered by a `processors.BatchProcessor`.

Only configuration travels with the UDF. Each Python worker process creates its own client on
first use (`get_client`: one per process and `ClientConfig`, replaced after ``fork``), so the
same code works with ``spark.python.worker.reuse`` on (a client serves many tasks) and off (a
client per task). Every request has its own deadline inside trio: a slow or dead server gives
per-row errors, never a hung task. See docs/spark.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator  # noqa: TC003  (pandas_udf reads the type hints at runtime)
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import pandas as pd
from pyspark.sql.functions import col
from pyspark.sql.pandas.functions import pandas_udf
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

from codec import RemotingCommand, ResponseCode, SerializeType
from processors.batch import decode_batch, encode_batch

from .._errors import RemotingError
from ._calls import CallReport, CallSpec, Outcome, call_bodies, error_of
from ._client import get_client, shutdown_clients
from ._serde import DefaultSerializer, Serializer, bodies_of, to_pandas_column

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from .._config import ClientConfig
    from .._faces._blocking import RemotingClient

__all__ = [
    "ERROR_TYPE",
    "BatchStats",
    "DefaultSerializer",
    "RemoteCallError",
    "Serializer",
    "get_client",
    "remote_batch_udf",
    "remote_map_in_arrow",
    "remote_udf",
    "result_type",
    "shutdown_clients",
    "with_remote_column",
]

OnError = Literal["raise", "null"]

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

    __module__ = "remoting.spark"

    def __init__(self, code: int, remark: str, *, row: int, failed: int, total: int,
                 request_code: int) -> None:
        self.code = code
        self.remark = remark
        self.row = row
        self.failed = failed
        super().__init__(
            f"{failed} of {total} rows failed calling request code {request_code}; first: row "
            f"{row}: code {code}: {remark} (use on_error='null' to get per-row errors instead)"
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
    """

    mode: Literal["row", "batch"]
    rows: int
    requests: int
    errors: int
    seconds: float
    max_in_flight: int


# ---------------------------------------------------------------------------- helpers


def result_type(return_type: DataType, on_error: OnError) -> DataType:
    """Return the UDF's Spark type: ``return_type``, or ``struct<value, error>`` for "null"."""
    if on_error == "raise":
        return return_type
    return StructType([
        StructField("value", return_type, True),
        StructField("error", ERROR_TYPE, True),
    ])


def _data_type(return_type: DataType | str) -> DataType:
    if isinstance(return_type, DataType):
        return return_type
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


def _call_spec(addresses: str | Sequence[str], code: int, timeout: float,
               max_in_flight: int, header: Mapping[str, str] | None,
               serialize_type: SerializeType) -> CallSpec:
    if isinstance(addresses, str):
        addrs = tuple(a.strip() for a in addresses.split(",") if a.strip())
    else:
        addrs = tuple(addresses)
    return CallSpec(
        addresses=addrs, code=int(code), timeout=float(timeout),
        max_in_flight=int(max_in_flight),
        header=tuple(sorted((str(k), str(v)) for k, v in (header or {}).items())),
        serialize_type=SerializeType(serialize_type),
    )


def _check_on_error(on_error: str) -> OnError:
    if on_error not in ("raise", "null"):
        raise ValueError(f"on_error must be 'raise' or 'null', not {on_error!r}")
    return on_error  # type: ignore[return-value]


def _column_of(args: pd.Series | pd.DataFrame | tuple[pd.Series | pd.DataFrame, ...]
               ) -> pd.Series | pd.DataFrame:
    """Return the UDF's one argument; several columns become one list per row."""
    if not isinstance(args, tuple):
        return args
    parts = [a.to_dict("records") if isinstance(a, pd.DataFrame) else a.tolist() for a in args]
    return pd.Series([list(row) for row in zip(*parts, strict=True)], dtype=object)


def _raise_first(errors: Sequence[tuple[int, str] | None], failed: int, request_code: int
                 ) -> None:
    row = next(i for i, e in enumerate(errors) if e is not None)
    code, remark = errors[row]  # type: ignore[misc]
    raise RemoteCallError(code, remark, row=row, failed=failed, total=len(errors),
                          request_code=request_code)


def _decode_outcomes(outcomes: Sequence[Outcome], serializer: Serializer
                     ) -> tuple[list[Any], list[tuple[int, str] | None], int]:
    """Return (values, errors, failed) for one batch of row outcomes."""
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
    return values, errors, failed


def _output(values: Sequence[Any], errors: Sequence[tuple[int, str] | None],
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


# ---------------------------------------------------------------------------- per-row mode


def _row_function(spec: CallSpec, config: ClientConfig | None, serializer: Serializer,
                  value_type: DataType, on_error: OnError,
                  on_batch: Callable[[BatchStats], object] | None, log_level: int | None
                  ) -> Callable[[Iterator[pd.Series]], Iterator[pd.Series]]:
    def remote_rows(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
        client = get_client(config, log_level=log_level)
        for batch_no, args in enumerate(batches):
            column = _column_of(args)
            bodies = bodies_of(column, serializer)
            report = CallReport()
            outcomes = call_bodies(client, spec, bodies, batch_no, report)
            values, errors, failed = _decode_outcomes(outcomes, serializer)
            if on_batch is not None:
                on_batch(BatchStats(mode="row", rows=len(bodies), requests=report.requests,
                                    errors=failed, seconds=report.seconds,
                                    max_in_flight=spec.max_in_flight))
            if failed and on_error == "raise":
                _raise_first(errors, failed, spec.code)
            yield _output(values, errors, value_type, on_error)

    return remote_rows


def remote_udf(
    addresses: str | Sequence[str],
    code: int,
    *,
    return_type: DataType | str = "string",
    timeout: float = DEFAULT_ROW_TIMEOUT,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    on_error: OnError = "raise",
    serializer: Serializer | None = None,
    config: ClientConfig | None = None,
    header: Mapping[str, str] | None = None,
    serialize_type: SerializeType = SerializeType.ROCKETMQ,
    on_batch: Callable[[BatchStats], object] | None = None,
    worker_log_level: int | None = logging.WARNING,
    deterministic: bool = False,
) -> Any:
    """Return a pandas UDF (iterator form) that sends one request per row.

    The UDF takes one column (a struct column arrives as one dict per row; several columns
    as one list per row). Each non-null value becomes a request body (str as UTF-8, bytes as
    is, anything else as JSON) sent with ``code``; a null value gives null without a call.
    SUCCESS response bodies are decoded to ``return_type``.

    Args:
        addresses: ``"host:port"``, a comma-separated list, or a sequence; each Arrow batch
            goes to one of them in rotation, and rows that could not be sent (connect
            failed) are resent to the next.
        code: the request code the server registered a processor for.
        return_type: the Spark type of the result (a `DataType` or a type string).
        timeout: seconds per request, enforced inside the client's trio loop.
        max_in_flight: requests in flight at most, per Python worker process.
        on_error: ``"raise"`` fails the task on the first failed row (Spark may retry it);
            ``"null"`` makes the UDF return ``struct<value, error: struct<code, remark>>``
            with a null value on failure (see `with_remote_column`).
        serializer: a `Serializer` to replace the default body encoding and decoding.
        config: the client settings of the worker's client (picklable; shipped, not the
            client).
        header: ext fields added to every request.
        serialize_type: the header encoding of requests (the server answers in kind):
            ``SerializeType.ROCKETMQ`` (binary) is smaller and about twice as cheap to
            encode and decode as ``JSON``, RocketMQ's default.
        on_batch: called in the worker with a `BatchStats` after each Arrow batch (for
            metrics: e.g. add to an accumulator). Must be picklable.
        worker_log_level: filter structlog below this level in the worker, unless the worker
            configured structlog itself; None leaves structlog alone.
        deterministic: leave False unless calls are pure: Spark may then re-evaluate or
            reorder them (e.g. evaluate the UDF twice for a filter on its result).

    Returns:
        The UDF, to call on a column: ``df.withColumn("y", udf("x"))``.

    Raises:
        ValueError: a bad address, timeout, in-flight bound, ``on_error`` or return type.
    """
    mode = _check_on_error(on_error)
    value_type = _data_type(return_type)
    spec = _call_spec(addresses, code, timeout, max_in_flight, header, serialize_type)
    fn = _row_function(spec, config, serializer or DefaultSerializer(value_type), value_type,
                       mode, on_batch, worker_log_level)
    udf = pandas_udf(fn, result_type(value_type, mode))  # type: ignore[call-overload]
    return udf if deterministic else udf.asNondeterministic()


# ---------------------------------------------------------------------------- batch mode


def _record_batch_of(column: pd.Series | pd.DataFrame) -> pa.RecordBatch:
    import pyarrow as pa

    if isinstance(column, pd.DataFrame):
        return pa.RecordBatch.from_pandas(column, preserve_index=False)
    return pa.RecordBatch.from_arrays([pa.Array.from_pandas(column)], names=["value"])


def _split_bodies(batch: pa.RecordBatch, max_body: int) -> list[bytes | None]:
    """Return ``batch`` as one IPC body, or several row slices if one would be too large."""
    body = encode_batch(batch)
    if len(body) <= max_body or batch.num_rows <= 1:
        return [body]
    parts = min(batch.num_rows, math.ceil(len(body) / max_body) + 1)
    step = math.ceil(batch.num_rows / parts)
    bodies: list[bytes | None] = []
    for start in range(0, batch.num_rows, step):
        bodies.extend(_split_bodies(batch.slice(start, step), max_body))
    return bodies


def _call_batch(client: RemotingClient, spec: CallSpec, batch: pa.RecordBatch, batch_no: int,
                report: CallReport) -> pa.RecordBatch | tuple[int, str]:
    """Send ``batch`` (split if needed); return the answer batch or the first error."""
    import pyarrow as pa

    bodies = _split_bodies(batch, client.config.max_frame_bytes - FRAME_SLACK_BYTES)
    outcomes = call_bodies(client, spec, bodies, batch_no, report)
    answers = []
    for outcome in outcomes:
        error = error_of(outcome)
        if error is not None:
            return error
        assert isinstance(outcome, RemotingCommand)
        try:
            answers.append(decode_batch(outcome.body))
        except ValueError as exc:
            return int(ResponseCode.RPC_UNKNOWN), f"bad batch response: {exc}"
    if len(answers) == 1:
        return answers[0]
    table = pa.Table.from_batches(answers).combine_chunks()
    return table.to_batches()[0] if table.num_rows else answers[0]


def _batch_output(answer: pa.RecordBatch, rows: int, value_type: DataType
                  ) -> pd.Series | pd.DataFrame | tuple[int, str]:
    if answer.num_rows != rows:
        return (int(ResponseCode.RPC_UNKNOWN),
                f"the batch processor returned {answer.num_rows} rows for {rows}")
    if isinstance(value_type, StructType):
        names = value_type.fieldNames()
        missing = [n for n in names if n not in answer.schema.names]
        if missing:
            return int(ResponseCode.RPC_UNKNOWN), f"the answer lacks columns {missing}"
        frame: pd.DataFrame = answer.select(names).to_pandas()
        return frame
    index = answer.schema.get_field_index("value")
    series: pd.Series = answer.column(index if index >= 0 else 0).to_pandas()
    return series


def _batch_function(spec: CallSpec, config: ClientConfig | None, value_type: DataType,
                    on_error: OnError, on_batch: Callable[[BatchStats], object] | None,
                    log_level: int | None
                    ) -> Callable[[Iterator[pd.Series]], Iterator[pd.Series]]:
    def remote_batches(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
        client = get_client(config, log_level=log_level)
        for batch_no, args in enumerate(batches):
            column = _column_of(args)
            rows = len(column)
            report = CallReport()
            answer = _call_batch(client, spec, _record_batch_of(column), batch_no, report)
            result = answer if isinstance(answer, tuple) else _batch_output(
                answer, rows, value_type)
            failed = rows if isinstance(result, tuple) else 0
            if on_batch is not None:
                on_batch(BatchStats(mode="batch", rows=rows, requests=report.requests,
                                    errors=failed, seconds=report.seconds, max_in_flight=1))
            if isinstance(result, tuple):
                if on_error == "raise":
                    _raise_first([result] * rows, rows, spec.code)
                yield _output([None] * rows, [result] * rows, value_type,
                              on_error)
            elif on_error == "raise":
                yield result
            else:
                values = result.to_dict("records") if isinstance(result, pd.DataFrame) \
                    else result
                if isinstance(result, pd.DataFrame):
                    value_column: Any = pd.Series(values, dtype=object)
                else:
                    value_column = result.reset_index(drop=True)
                yield pd.DataFrame({
                    "value": value_column,
                    "error": pd.Series([None] * rows, dtype=object),
                })

    return remote_batches


def remote_batch_udf(
    addresses: str | Sequence[str],
    code: int,
    *,
    return_type: DataType | str = "string",
    timeout: float = DEFAULT_BATCH_TIMEOUT,
    on_error: OnError = "raise",
    config: ClientConfig | None = None,
    header: Mapping[str, str] | None = None,
    serialize_type: SerializeType = SerializeType.ROCKETMQ,
    on_batch: Callable[[BatchStats], object] | None = None,
    worker_log_level: int | None = logging.WARNING,
    deterministic: bool = False,
) -> Any:
    """Return a pandas UDF (iterator form) that sends one request per Arrow batch.

    The request body is the batch as an Arrow IPC stream: one column ``value`` (or the
    fields of a struct column); a `processors.BatchProcessor` answers with a batch of as many
    rows, whose ``value`` column (else its first column; for a struct return type, the
    columns named like its fields) is the result. A batch larger than the client's
    ``max_frame_bytes`` is split into several requests, sent together.

    Arguments are those of `remote_udf`. With ``on_error="null"`` a failed call nulls every
    row of its batch and sets their error.
    """
    mode = _check_on_error(on_error)
    value_type = _data_type(return_type)
    spec = _call_spec(addresses, code, timeout, 64, header, serialize_type)
    fn = _batch_function(spec, config, value_type, mode, on_batch, worker_log_level)
    udf = pandas_udf(fn, result_type(value_type, mode))  # type: ignore[call-overload]
    return udf if deterministic else udf.asNondeterministic()


def _map_function(spec: CallSpec, config: ClientConfig | None, schema: pa.Schema,
                  on_batch: Callable[[BatchStats], object] | None, log_level: int | None
                  ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def remote_map(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        client = get_client(config, log_level=log_level)
        for batch_no, batch in enumerate(batches):
            report = CallReport()
            answer = _call_batch(client, spec, batch, batch_no, report)
            if on_batch is not None:
                on_batch(BatchStats(
                    mode="batch", rows=batch.num_rows, requests=report.requests,
                    errors=batch.num_rows if isinstance(answer, tuple) else 0,
                    seconds=report.seconds, max_in_flight=1))
            if isinstance(answer, tuple):
                _raise_first([answer], batch.num_rows, spec.code)
                return
            if answer.schema != schema:
                try:
                    answer = pa.Table.from_batches([answer]).select(schema.names).cast(
                        schema).combine_chunks().to_batches()[0]
                except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise RemoteCallError(
                        int(ResponseCode.RPC_UNKNOWN),
                        f"the answer does not fit the schema {schema}: {exc}",
                        row=0, failed=batch.num_rows, total=batch.num_rows,
                        request_code=spec.code) from exc
            yield answer

    return remote_map


def remote_map_in_arrow(
    df: DataFrame,
    addresses: str | Sequence[str],
    code: int,
    schema: StructType | str,
    *,
    timeout: float = DEFAULT_BATCH_TIMEOUT,
    config: ClientConfig | None = None,
    header: Mapping[str, str] | None = None,
    serialize_type: SerializeType = SerializeType.ROCKETMQ,
    on_batch: Callable[[BatchStats], object] | None = None,
    worker_log_level: int | None = logging.WARNING,
) -> DataFrame:
    """Return ``df.mapInArrow(...)`` sending each Arrow batch to a `BatchProcessor`.

    Every column of ``df`` goes in the request; the answer batches make up the result and
    must have ``schema``'s columns (matched by name, cast to its types); their row count is
    the processor's choice. No pandas conversion on either side: the fastest batch mode.
    A failed call fails the task (`RemoteCallError`); for per-row errors use
    `remote_batch_udf` with ``on_error="null"``.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    spark_schema = schema if isinstance(schema, StructType) else _data_type(schema)
    if not isinstance(spark_schema, StructType):
        raise ValueError(f"schema must be a struct type, got {spark_schema.simpleString()}")
    spec = _call_spec(addresses, code, timeout, 64, header, serialize_type)
    fn = _map_function(spec, config, to_arrow_schema(spark_schema), on_batch, worker_log_level)
    return df.mapInArrow(fn, spark_schema)


def with_remote_column(df: DataFrame, name: str, udf: Any, *cols: str | Column) -> DataFrame:
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
