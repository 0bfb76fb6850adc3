"""The event bus: handlers by address across processes, as Vert.x's event bus (docs/bus.md).

A server's `EventBus` (``bus.attach(server)``) holds the address table; `BusClient` (over a
blocking `RemotingClient`) and `TrioBusClient` (over a `TrioRemotingClient`) register
consumers there and send, publish and request through it. Messages are delivered at most
once. The bus's request codes are 32300-32399 (docs/protocol.md).
"""

from __future__ import annotations

from codec._module_metadata import fixup_module_metadata as _fixup_module_metadata

from ._bus._blocking_client import BusClient as BusClient
from ._bus._consumer import Consumer as Consumer
from ._bus._event_bus import EventBus as EventBus
from ._bus._failure import BusPermissionError as BusPermissionError
from ._bus._failure import FailureKind as FailureKind
from ._bus._failure import ReplyFailure as ReplyFailure
from ._bus._interceptors import BusInterceptor as BusInterceptor
from ._bus._message import Message as Message
from ._bus._message import OutboundMessage as OutboundMessage
from ._bus._permissions import AddressPermissions as AddressPermissions
from ._bus._statistics import BusStatistics as BusStatistics
from ._bus._trio_client import TrioBusClient as TrioBusClient
from ._bus._wire import DEFAULT_MAX_BUFFERED as DEFAULT_MAX_BUFFERED
from ._bus._wire import DEFAULT_MAX_BUFFERED_BYTES as DEFAULT_MAX_BUFFERED_BYTES
from ._bus._wire import DEFAULT_MAX_CONSUMERS as DEFAULT_MAX_CONSUMERS
from ._bus._wire import DEFAULT_MAX_HELD as DEFAULT_MAX_HELD
from ._bus._wire import DEFAULT_MAX_HELD_BYTES as DEFAULT_MAX_HELD_BYTES
from ._bus._wire import DEFAULT_MAX_QUEUED as DEFAULT_MAX_QUEUED
from ._bus._wire import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from ._bus._wire import MAX_ADDRESS_BYTES as MAX_ADDRESS_BYTES
from ._bus._wire import BusCode as BusCode

__all__ = [
    "DEFAULT_MAX_BUFFERED",
    "DEFAULT_MAX_BUFFERED_BYTES",
    "DEFAULT_MAX_CONSUMERS",
    "DEFAULT_MAX_HELD",
    "DEFAULT_MAX_HELD_BYTES",
    "DEFAULT_MAX_QUEUED",
    "DEFAULT_TIMEOUT",
    "MAX_ADDRESS_BYTES",
    "AddressPermissions",
    "BusClient",
    "BusCode",
    "BusInterceptor",
    "BusPermissionError",
    "BusStatistics",
    "Consumer",
    "EventBus",
    "FailureKind",
    "Message",
    "OutboundMessage",
    "ReplyFailure",
    "TrioBusClient",
]

# reprs, tracebacks, pickles and the API reference name remoting.bus.X, not the private module
_fixup_module_metadata("remoting.bus", globals())
