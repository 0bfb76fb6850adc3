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

Streaming, `register_data_source`: the ``remoting`` data source reads a topic of the queue
service (`remoting.queue`) in a Structured Streaming query or a batch read, and publishes a
stream to one; `decode_bodies` turns message bodies (JSON or Arrow) into columns.
"""

from __future__ import annotations

try:  # the ``spark`` extra: say so when it is missing, not just which module is
    import pandas as _pandas  # noqa: F401
    import pyarrow as _pyarrow  # noqa: F401
    import pyspark as _pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a venv without the extra
    raise ImportError(
        f"remoting.spark needs the spark extra ({exc.name} is missing): "
        "pip install 'trio-remoting[spark]'"
    ) from exc

from codec._module_metadata import fixup_module_metadata as _fixup_module_metadata

from ._batch_udf import remote_batch_udf as remote_batch_udf
from ._batch_udf import remote_map_in_arrow as remote_map_in_arrow
from ._client import get_client as get_client
from ._client import shutdown_clients as shutdown_clients
from ._columns import ERROR_TYPE as ERROR_TYPE
from ._columns import BatchStats as BatchStats
from ._columns import OnError as OnError
from ._columns import RemoteCallError as RemoteCallError
from ._columns import RemoteUDF as RemoteUDF
from ._columns import result_type as result_type
from ._columns import with_remote_column as with_remote_column
from ._row_udf import remote_udf as remote_udf
from ._serde import DefaultSerializer as DefaultSerializer
from ._serde import Serializer as Serializer
from ._streaming import MessagesLostError as MessagesLostError
from ._streaming import RocketMQMessagesLostError as RocketMQMessagesLostError
from ._streaming import decode_bodies as decode_bodies
from ._streaming import register_data_source as register_data_source

__all__ = [
    "ERROR_TYPE",
    "BatchStats",
    "DefaultSerializer",
    "MessagesLostError",
    "OnError",
    "RemoteCallError",
    "RemoteUDF",
    "RocketMQMessagesLostError",
    "Serializer",
    "decode_bodies",
    "get_client",
    "remote_batch_udf",
    "remote_map_in_arrow",
    "register_data_source",
    "remote_udf",
    "result_type",
    "shutdown_clients",
    "with_remote_column",
]

# reprs, tracebacks, pickles and the API reference name remoting.spark.X, not the private module
_fixup_module_metadata("remoting.spark", globals())
