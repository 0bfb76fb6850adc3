"""Per-row mode: `remote_udf`, one request per row, a whole Arrow batch per hand-off."""

from __future__ import annotations

import logging
from collections.abc import Iterator  # noqa: TC003  (pandas_udf reads the type hints at runtime)
from typing import TYPE_CHECKING

import pandas as pd  # noqa: TC002  (pandas_udf reads the type hints at runtime)

from codec import SerializeType

from ._calls import CallReport, CallSpec, call_bodies
from ._client import get_client
from ._columns import (
    DEFAULT_COOLDOWN,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_ROW_TIMEOUT,
    BatchStats,
    OnError,
    RemoteUDF,
    column_of,
    data_type,
    decode_outcomes,
    output,
    raise_first,
    result_type,
)
from ._options import (
    WorkerOptions,
    call_spec,
    check_on_error,
    serializer_of,
    spark_udf,
    worker_options,
)
from ._serde import Serializer, bodies_of
from ._telemetry import batch_span, driver_context, run_worker_setup

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from pyspark.sql.types import DataType

    from .._config import ClientConfig
    from .._hooks import RPCHook

__all__ = ["remote_udf"]


def _row_function(spec: CallSpec, worker: WorkerOptions, serializer: Serializer,
                  value_type: DataType, on_error: OnError
                  ) -> Callable[[Iterator[pd.Series]], Iterator[pd.Series]]:
    def remote_rows(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
        run_worker_setup(worker.setup)
        client = get_client(worker.config, log_level=worker.log_level, hooks=worker.hooks)
        for batch_no, args in enumerate(batches):
            with batch_span("row", spec.code, batch_no, worker.parent) as traced:
                column = column_of(args)
                bodies = bodies_of(column, serializer)
                report = CallReport()
                outcomes = call_bodies(client, spec, bodies, report=report)
                values, errors, failed = decode_outcomes(outcomes, serializer, value_type)
                traced.rows, traced.requests, traced.errors = len(bodies), report.requests, failed
                if worker.on_batch is not None:
                    worker.on_batch(BatchStats(
                        mode="row", rows=len(bodies), requests=report.requests, errors=failed,
                        seconds=report.seconds, max_in_flight=spec.max_in_flight,
                        cooling=report.cooling))
                if failed and on_error == "raise":
                    raise_first(errors, failed, spec.code)
            yield output(values, errors, value_type, on_error)

    return remote_rows


def remote_udf(
    addresses: str | Sequence[str], code: int, *,
    return_type: DataType | str = "string", timeout: float = DEFAULT_ROW_TIMEOUT,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT, on_error: OnError = "raise",
    serializer: Serializer | None = None, config: ClientConfig | None = None,
    header: Mapping[str, str] | None = None,
    serialize_type: SerializeType = SerializeType.ROCKETMQ,
    on_batch: Callable[[BatchStats], object] | None = None,
    worker_log_level: int | str | None = logging.WARNING,
    worker_setup: Callable[[], object] | None = None, hooks: Sequence[RPCHook] = (),
    deterministic: bool = False, idempotent: bool = False, cooldown: float = DEFAULT_COOLDOWN,
) -> RemoteUDF:
    """Return a pandas UDF (iterator form) sending one request per row: ``udf("column")``.

    It takes one column (a struct arrives as a dict per row, several columns as a list).
    Each non-null value is a request body (str as UTF-8, bytes as is, else JSON) sent with
    ``code`` (a null gives null, no call); SUCCESS bodies are decoded to ``return_type``.

    Args:
        addresses: ``"host:port"``, a comma-separated list or a sequence (a fleet: each
            Arrow batch starts at the next, docs/spark.md).
        code: the request code the server registered a processor for.
        return_type: the Spark type of the result (a `DataType` or a type string).
        timeout: seconds per request, enforced inside the client's trio loop.
        max_in_flight: requests in flight at most, per Python worker process.
        on_error: ``"raise"`` fails the task on a failed row (Spark may retry it), ``"null"``
            returns ``struct<value, error: struct<code, remark>>`` (`with_remote_column`).
        serializer: a `Serializer` to replace the default body encoding and decoding.
        config: the worker's client settings (picklable: shipped, not the client).
        header: ext fields added to every request.
        serialize_type: the header encoding (the server answers in kind): ``ROCKETMQ``
            (binary) is smaller and twice as cheap as ``JSON``, RocketMQ's default.
        on_batch: called in the worker with a `BatchStats` after each Arrow batch; picklable.
        worker_log_level: the worker's ``remoting`` log level, e.g. ``"DEBUG"`` (None: as is).
        worker_setup: run once per worker process before its first request (picklable),
            e.g. to configure the OpenTelemetry SDK there (batches are then traced).
        hooks: RPC hooks on the workers' client, e.g. ``[AclClientRPCHook(...)]`` to sign
            every request; picklable (they travel with the UDF, secrets included).
        deterministic: True only for pure calls: Spark may then re-evaluate or reorder them.
        idempotent: True if processing a row twice is harmless: rows lost to a timeout or a
            broken connection are then resent to the next address (else they fail).
        cooldown: seconds a failed address is skipped by the worker process.

    Raises:
        TypeError: an argument of the wrong type (``code=1.7``, an unpicklable hook...).
        ValueError: a bad address, timeout, in-flight bound, ``on_error`` or return type.
    """
    mode = check_on_error(on_error)
    value_type = data_type(return_type)
    spec = call_spec(addresses, code, timeout, max_in_flight, header, serialize_type, idempotent,
                     cooldown)
    worker = worker_options(config, on_batch, worker_log_level, worker_setup, driver_context(),
                            hooks)
    fn = _row_function(spec, worker, serializer_of(serializer, value_type), value_type, mode)
    return spark_udf(fn, result_type(value_type, mode), deterministic)


