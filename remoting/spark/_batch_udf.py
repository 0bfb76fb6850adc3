"""Batch mode: `remote_batch_udf` and `remote_map_in_arrow`, one request per Arrow batch (its
body an Arrow IPC stream) answered by a `processors.BatchProcessor`."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator  # noqa: TC003  (pandas_udf reads the type hints at runtime)
from typing import TYPE_CHECKING, Any, Final

import pandas as pd
from pyspark.sql.types import StructType

from codec import RemotingCommand, ResponseCode, SerializeType
from processors.batch import decode_batch, encode_batch

from ._calls import CallReport, CallSpec, call_bodies, error_of
from ._client import get_client
from ._columns import (
    DEFAULT_BATCH_TIMEOUT,
    DEFAULT_COOLDOWN,
    FRAME_SLACK_BYTES,
    BatchStats,
    OnError,
    RemoteCallError,
    RemoteUDF,
    column_of,
    data_type,
    output,
    raise_first,
    result_type,
)
from ._options import WorkerOptions, call_spec, check_on_error, spark_udf, worker_options
from ._serde import arrow_type
from ._telemetry import batch_span, driver_context, run_worker_setup

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType

    from .._config import ClientConfig
    from .._hooks import RPCHook
    from ..blocking import RemotingClient
    from ._telemetry import BatchSpan

__all__ = ["remote_batch_udf", "remote_map_in_arrow"]

MAP_HINT: Final = "for per-row errors, use remote_batch_udf with on_error='null'"


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


def _call_batch(client: RemotingClient, spec: CallSpec, batch: pa.RecordBatch,
                report: CallReport) -> pa.RecordBatch | tuple[int, str]:
    """Send ``batch`` (split if needed); return the answer batch or the first error."""

    bodies = _split_bodies(batch, client.config.max_frame_bytes - FRAME_SLACK_BYTES)
    outcomes = call_bodies(client, spec, bodies, report=report)
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
    return _combined(answers)


def _combined(answers: list[pa.RecordBatch]) -> pa.RecordBatch | tuple[int, str]:
    """Return the answers to the slices of a split batch as one batch, or the batch's error.

    Their types may differ where they agree in value (a slice whose answers are all null
    comes back with a null column): they are unified as Arrow promotes types.
    """
    import pyarrow as pa

    if len(answers) == 1:
        return answers[0]
    try:
        table = pa.concat_tables([pa.Table.from_batches([a]) for a in answers],
                                 promote_options="default").combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        return (int(ResponseCode.RPC_UNKNOWN),
                f"the answers to the parts of a split batch do not fit together: {exc}")
    return table.to_batches()[0] if table.num_rows else answers[0]


def _batchoutput(answer: pa.RecordBatch, rows: int, value_type: DataType
                 ) -> pd.Series | pd.DataFrame | tuple[int, str]:
    """Return the answer's result column(s) as Spark will take them, or the batch's error:
    the wrong number of rows, missing columns, or values ``value_type`` cannot hold."""
    import pyarrow as pa

    if answer.num_rows != rows:
        return (int(ResponseCode.RPC_UNKNOWN),
                f"the batch processor returned {answer.num_rows} rows for {rows}")
    have = answer.schema.names
    wanted = value_type.fieldNames() if isinstance(value_type, StructType) else ["value"]
    if not have or [n for n in wanted if have.count(n) > 1]:  # which "value" is meant?
        return int(ResponseCode.RPC_UNKNOWN), f"the answer's columns {have} are not {wanted}"
    if isinstance(value_type, StructType):
        names = wanted
        missing = [n for n in names if n not in have]
        if missing:
            return int(ResponseCode.RPC_UNKNOWN), f"the answer lacks columns {missing}"
        columns = [answer.column(have.index(n)) for n in names]
        targets = [arrow_type(f.dataType) for f in value_type.fields]
    else:  # its "value" column, else its first
        index = have.index("value") if "value" in have else 0
        columns, targets = [answer.column(index)], [arrow_type(value_type)]
    try:  # Arrow refuses here what Spark would refuse later, failing the whole task
        columns = [_fit(c, t) for c, t in zip(columns, targets, strict=True)]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        return (int(ResponseCode.RPC_UNKNOWN),
                f"the answer does not fit {value_type.simpleString()}: {exc}")
    if isinstance(value_type, StructType):
        frame: pd.DataFrame = pa.RecordBatch.from_arrays(columns, names=names).to_pandas()
        return frame
    series: pd.Series = columns[0].to_pandas()
    return series


def _fit(column: pa.Array, target: pa.DataType) -> pa.Array:
    """Return ``column`` cast to ``target`` (raises if it does not fit).

    A timestamp column stays as it is, for Spark to localise; for a timestamp target only
    ISO 8601 text is cast besides (an int would be read as microseconds: refused).
    """
    import pyarrow as pa

    if pa.types.is_timestamp(target):
        if pa.types.is_timestamp(column.type):
            return column
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise pa.ArrowTypeError(f"a timestamp answer must be an Arrow timestamp or "
                                    f"ISO 8601 text, not {column.type}")
    return column.cast(target)


def _batch_function(spec: CallSpec, worker: WorkerOptions, value_type: DataType,
                    on_error: OnError) -> Callable[[Iterator[pd.Series]], Iterator[pd.Series]]:
    def remote_batches(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
        run_worker_setup(worker.setup)
        client = get_client(worker.config, log_level=worker.log_level, hooks=worker.hooks)
        for batch_no, args in enumerate(batches):
            with batch_span("batch", spec.code, batch_no, worker.parent) as traced:
                result = _one_batch(client, spec, args, value_type, on_error,
                                    worker.on_batch, traced)
            yield result

    return remote_batches


def _one_batch(client: RemotingClient, spec: CallSpec, args: pd.Series,
               value_type: DataType, on_error: OnError,
               on_batch: Callable[[BatchStats], object] | None, traced: BatchSpan
               ) -> pd.Series | pd.DataFrame:
    column = column_of(args)
    rows = len(column)
    report = CallReport()
    answer = _call_batch(client, spec, _record_batch_of(column), report)
    result = answer if isinstance(answer, tuple) else _batchoutput(answer, rows, value_type)
    failed = rows if isinstance(result, tuple) else 0
    traced.rows, traced.requests, traced.errors = rows, report.requests, failed
    if on_batch is not None:
        on_batch(BatchStats(mode="batch", rows=rows, requests=report.requests,
                            errors=failed, seconds=report.seconds, max_in_flight=1,
                            cooling=report.cooling))
    if isinstance(result, tuple):
        if on_error == "raise":
            raise_first([result] * rows, rows, spec.code)
        return output([None] * rows, [result] * rows, value_type, on_error)
    if on_error == "raise":
        return result
    values = result.to_dict("records") if isinstance(result, pd.DataFrame) else result
    if isinstance(result, pd.DataFrame):
        value_column: Any = pd.Series(values, dtype=object)
    else:
        value_column = result.reset_index(drop=True)
    return pd.DataFrame({
        "value": value_column,
        "error": pd.Series([None] * rows, dtype=object),
    })


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
    worker_log_level: int | str | None = logging.WARNING,
    worker_setup: Callable[[], object] | None = None,
    hooks: Sequence[RPCHook] = (),
    deterministic: bool = False,
    idempotent: bool = False,
    cooldown: float = DEFAULT_COOLDOWN,
) -> RemoteUDF:
    """Return a pandas UDF (iterator form) that sends one request per Arrow batch.

    The request body is the batch as an Arrow IPC stream: one column ``value`` (or the
    fields of a struct column); a `processors.BatchProcessor` answers with a batch of as many
    rows, whose ``value`` column (else its first column; for a struct return type, the
    columns named like its fields) is the result. A batch larger than the client's
    ``max_frame_bytes`` is split into several requests, sent together.

    Arguments are those of `remote_udf`, but ``timeout`` defaults to 30 s (a batch carries
    ~10,000 rows of work). With ``on_error="null"`` a failed call nulls every row of its
    batch and sets their error.
    """
    mode = check_on_error(on_error)
    value_type = data_type(return_type)
    spec = call_spec(addresses, code, timeout, 64, header, serialize_type, idempotent,
                     cooldown)
    worker = worker_options(config, on_batch, worker_log_level, worker_setup, driver_context(),
                            hooks)
    fn = _batch_function(spec, worker, value_type, mode)
    return spark_udf(fn, result_type(value_type, mode), deterministic)


def _map_function(spec: CallSpec, worker: WorkerOptions, schema: pa.Schema
                  ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def remote_map(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        run_worker_setup(worker.setup)
        client = get_client(worker.config, log_level=worker.log_level, hooks=worker.hooks)
        for batch_no, batch in enumerate(batches):
            with batch_span("batch", spec.code, batch_no, worker.parent) as traced:
                answer = _map_one(client, spec, batch, schema, worker.on_batch,
                                  traced)
            yield answer

    return remote_map


def _map_one(client: RemotingClient, spec: CallSpec, batch: pa.RecordBatch,
             schema: pa.Schema, on_batch: Callable[[BatchStats], object] | None,
             traced: BatchSpan) -> pa.RecordBatch:
    import pyarrow as pa

    report = CallReport()
    answer = _call_batch(client, spec, batch, report)
    failed = batch.num_rows if isinstance(answer, tuple) else 0
    traced.rows, traced.requests, traced.errors = batch.num_rows, report.requests, failed
    if on_batch is not None:
        on_batch(BatchStats(mode="batch", rows=batch.num_rows, requests=report.requests,
                            errors=failed, seconds=report.seconds, max_in_flight=1,
                            cooling=report.cooling))
    if isinstance(answer, tuple):
        raise_first([answer], batch.num_rows, spec.code, MAP_HINT)
    if answer.schema != schema:
        try:
            answer = pa.Table.from_batches([answer]).select(schema.names).cast(
                schema).combine_chunks().to_batches()[0]
        except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise RemoteCallError(
                int(ResponseCode.RPC_UNKNOWN),
                f"the answer does not fit the schema {schema}: {exc}",
                row=0, failed=batch.num_rows, total=batch.num_rows,
                request_code=spec.code, hint=MAP_HINT) from exc
    return answer


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
    worker_log_level: int | str | None = logging.WARNING,
    worker_setup: Callable[[], object] | None = None,
    hooks: Sequence[RPCHook] = (),
    idempotent: bool = False,
    cooldown: float = DEFAULT_COOLDOWN,
) -> DataFrame:
    """Return ``df.mapInArrow(...)`` sending each Arrow batch to a `BatchProcessor`.

    Every column of ``df`` goes in the request; the answer batches make up the result and
    must have ``schema``'s columns (matched by name, cast to its types); their row count is
    the processor's choice. No pandas conversion on either side: the fastest batch mode.
    A failed call fails the task (`RemoteCallError`); for per-row errors use
    `remote_batch_udf` with ``on_error="null"``.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    spark_schema = schema if isinstance(schema, StructType) else data_type(schema)
    if not isinstance(spark_schema, StructType):
        raise ValueError(f"schema must be a struct type, got {spark_schema.simpleString()}")
    spec = call_spec(addresses, code, timeout, 64, header, serialize_type, idempotent,
                     cooldown)
    worker = worker_options(config, on_batch, worker_log_level, worker_setup, driver_context(),
                            hooks)
    fn = _map_function(spec, worker, to_arrow_schema(spark_schema))
    return df.mapInArrow(fn, spark_schema)


