"""`BatchProcessor`: a processor whose request and response bodies are Arrow record batches.

One request carries a whole `pyarrow.RecordBatch` as an Arrow IPC stream (schema + one batch),
so a Spark task pays one round trip per Arrow batch instead of one per row
(`remoting.spark.remote_batch_udf` / `remote_map_in_arrow` are the client side).

pyarrow is imported inside the functions: ``import processors`` must work without it.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Final

from codec import RemotingCommand, ResponseCode

from ._base import RequestProcessor

if TYPE_CHECKING:
    from ._base import RequestContext

__all__ = ["ARROW_CONTENT_TYPE", "BatchProcessor", "decode_batch", "encode_batch"]

# Put in the ``content-type`` ext field of batch responses, so a peer (or a packet capture)
# can tell an Arrow body from a row body (the Spark helpers' requests do not carry it).
ARROW_CONTENT_TYPE: Final = "application/vnd.apache.arrow.stream"


def encode_batch(batch: Any) -> bytes:
    """Return ``batch`` (a `pyarrow.RecordBatch` or `pyarrow.Table`) as Arrow IPC stream bytes."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write(batch)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def decode_batch(body: bytes | None) -> Any:
    """Return the `pyarrow.RecordBatch` held in Arrow IPC stream bytes.

    Several batches in one stream are combined into one. Zero-copy when there is one batch.

    Raises:
        ValueError: ``body`` is empty or not an Arrow IPC stream.
    """
    import pyarrow as pa

    if not body:
        raise ValueError("empty body: expected an Arrow IPC stream")
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(body))
        batches = list(reader)
    except (pa.ArrowException, OSError, ValueError) as exc:  # a truncated one: OSError
        raise ValueError(f"body is not an Arrow IPC stream: {exc}") from exc
    if len(batches) == 1:
        return batches[0]
    table = pa.Table.from_batches(batches, reader.schema).combine_chunks()
    combined = table.to_batches()
    return combined[0] if combined else pa.RecordBatch.from_pylist([], schema=reader.schema)


class BatchProcessor(RequestProcessor):
    """Base class for services that handle a whole Arrow record batch per request.

    Subclasses implement `process_batch`. The request body must be an Arrow IPC stream; the
    reply is SUCCESS with the returned batch as an Arrow IPC stream. A body that is not Arrow
    gets an ``INVALID_PARAMETER`` reply; an exception in `process_batch` becomes the usual
    ``SYSTEM_ERROR`` reply (logged once by the transport). Runs on the thread pool registered
    for its code, like every `RequestProcessor`, so it may use CPU (pyarrow releases the GIL
    in most compute kernels).
    """

    @abc.abstractmethod
    def process_batch(self, ctx: RequestContext, batch: Any) -> Any:
        """Return the `pyarrow.RecordBatch` (or `pyarrow.Table`) answering ``batch``.

        The number of rows is the service's choice; `remote_batch_udf` requires one output
        row per input row, `remote_map_in_arrow` does not.
        """

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            batch = decode_batch(request.body)
        except ValueError as exc:
            return RemotingCommand.create_response(ResponseCode.INVALID_PARAMETER, str(exc))
        result = self.process_batch(ctx, batch)
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.ext_fields = {"content-type": ARROW_CONTENT_TYPE}
        response.body = encode_batch(result)
        return response
