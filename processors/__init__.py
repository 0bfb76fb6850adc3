"""Processor base classes that services subclass, and the built-in processors.

`BatchProcessor` (Arrow record batches) needs pyarrow only when it runs, not at import.
"""

from __future__ import annotations

from codec._module_metadata import fixup_module_metadata as _fixup_module_metadata

from ._base import AsyncRequestProcessor as AsyncRequestProcessor
from ._base import Channel as Channel
from ._base import RequestContext as RequestContext
from ._base import RequestProcessor as RequestProcessor
from ._base import ServerStream as ServerStream
from ._base import StreamProcessor as StreamProcessor
from .batch import BatchProcessor as BatchProcessor
from .echo import AsyncEchoProcessor as AsyncEchoProcessor
from .echo import EchoProcessor as EchoProcessor

__all__ = [
    "AsyncEchoProcessor",
    "AsyncRequestProcessor",
    "BatchProcessor",
    "Channel",
    "EchoProcessor",
    "RequestContext",
    "RequestProcessor",
    "ServerStream",
    "StreamProcessor",
]

# reprs, tracebacks, pickles and the API reference name processors.X, not the private module
_fixup_module_metadata("processors", globals())
