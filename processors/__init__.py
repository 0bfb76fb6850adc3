"""Processor base classes that services subclass, and the built-in processors."""

from __future__ import annotations

from ._base import AsyncRequestProcessor as AsyncRequestProcessor
from ._base import Channel as Channel
from ._base import RequestContext as RequestContext
from ._base import RequestProcessor as RequestProcessor
from .echo import AsyncEchoProcessor as AsyncEchoProcessor
from .echo import EchoProcessor as EchoProcessor

__all__ = [
    "AsyncEchoProcessor",
    "AsyncRequestProcessor",
    "Channel",
    "EchoProcessor",
    "RequestContext",
    "RequestProcessor",
]
