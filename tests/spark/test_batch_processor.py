"""`processors.BatchProcessor` and its Arrow IPC helpers, over a real connection."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from codec import RemotingCommand, ResponseCode
from processors.batch import ARROW_CONTENT_TYPE, decode_batch, encode_batch
from remoting import RemotingClient

from .service import BATCH_FAIL, BATCH_UPPER

if TYPE_CHECKING:
    from .conftest import Service

pytestmark = pytest.mark.spark


def test_batch_round_trip_through_the_processor(service: Service) -> None:
    import pyarrow as pa

    batch = pa.RecordBatch.from_pydict({"value": ["a", None, "ç"]})
    with RemotingClient() as client:
        response = client.invoke_sync(
            service.addr, RemotingCommand.create_request(BATCH_UPPER, body=encode_batch(batch)))

    assert response.code == ResponseCode.SUCCESS
    assert response.ext_fields == {"content-type": ARROW_CONTENT_TYPE}
    assert decode_batch(response.body).to_pydict() == {"value": ["A", None, "Ç"]}


def _truncated_arrow() -> bytes:
    import pyarrow as pa

    return encode_batch(pa.RecordBatch.from_pydict({"value": ["abc"]}))[:-1]


@pytest.mark.parametrize("body", [None, b"", b"not arrow at all", "truncated"])
def test_a_body_that_is_not_arrow_gets_invalid_parameter(
        service: Service, body: bytes | str | None) -> None:
    if isinstance(body, str):  # "truncated": was SYSTEM_ERROR (an OSError from pyarrow)
        body = _truncated_arrow()
    with RemotingClient() as client:
        response = client.invoke_sync(
            service.addr, RemotingCommand.create_request(BATCH_UPPER, body=body))

    assert response.code == ResponseCode.INVALID_PARAMETER
    assert "Arrow IPC stream" in (response.remark or "")


def test_a_failing_process_batch_gets_system_error(service: Service) -> None:
    import pyarrow as pa

    body = encode_batch(pa.RecordBatch.from_pydict({"value": ["a"]}))
    with RemotingClient() as client:
        response = client.invoke_sync(service.addr,
                                      RemotingCommand.create_request(BATCH_FAIL, body=body))

    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "always fails" in (response.remark or "")


def test_decode_batch_combines_a_stream_of_several_batches() -> None:
    import pyarrow as pa

    table = pa.table({"x": [1, 2, 3, 4]})
    stream = encode_batch(pa.Table.from_batches(table.to_batches(max_chunksize=1)))

    combined = decode_batch(stream)

    assert isinstance(combined, pa.RecordBatch)
    assert combined.to_pydict() == {"x": [1, 2, 3, 4]}


def test_decode_batch_of_an_empty_stream_keeps_the_schema() -> None:
    import pyarrow as pa

    schema = pa.schema([("x", pa.int64())])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema):
        pass

    empty = decode_batch(sink.getvalue().to_pybytes())

    assert empty.num_rows == 0 and empty.schema == schema
