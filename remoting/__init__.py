"""trio-remoting: RocketMQ-compatible RPC remoting on trio.

Blocking faces (threads, scripts, Spark): `RemotingClient`, `RemotingServer`.
trio-native faces: `open_client`, `open_server` (`TrioRemotingClient`, `TrioRemotingServer`).
Handlers by address across processes (Vert.x's event bus): `remoting.bus`.
Importing this package never imports pyspark; `remoting.spark` does.
"""

from __future__ import annotations

# first: it says which file of yours shadows codec or processors, before an import fails on it
from . import _shadowing  # noqa: F401

# isort: split

from codec import RemotingCommand as RemotingCommand
from codec import RequestCode as RequestCode
from codec import ResponseCode as ResponseCode
from codec import SerializeType as SerializeType
from codec._module_metadata import fixup_module_metadata as _fixup_module_metadata

from ._config import ClientConfig as ClientConfig
from ._config import ServerConfig as ServerConfig
from ._core._calling._future import ResponseFuture as ResponseFuture
from ._core._events import ChannelEventListener as ChannelEventListener
from ._core._receiving._channel_handle import ChannelHandle as ChannelHandle
from ._core._receiving._dispatch import PING_REQUEST_CODE as PING_REQUEST_CODE
from ._core._receiving._held import HeldRequests as HeldRequests
from ._errors import RemotingCommandError as RemotingCommandError
from ._errors import RemotingConnectError as RemotingConnectError
from ._errors import RemotingError as RemotingError
from ._errors import RemotingResponseError as RemotingResponseError
from ._errors import RemotingSendRequestError as RemotingSendRequestError
from ._errors import RemotingStartError as RemotingStartError
from ._errors import RemotingStreamError as RemotingStreamError
from ._errors import RemotingTimeoutError as RemotingTimeoutError
from ._errors import RemotingTooManyRequestsError as RemotingTooManyRequestsError
from ._errors import raise_for_code as raise_for_code
from ._faces._streams import BlockingStream as BlockingStream
from ._faces._streams import TrioStream as TrioStream
from ._faces._trio import TrioRemotingClient as TrioRemotingClient
from ._faces._trio import TrioRemotingServer as TrioRemotingServer
from ._faces._trio import open_client as open_client
from ._faces._trio import open_server as open_server
from ._hooks import AbortProcessError as AbortProcessError
from ._hooks import RPCHook as RPCHook
from ._interceptors import ClientCall as ClientCall
from ._interceptors import ClientInterceptor as ClientInterceptor
from ._interceptors import ServerCall as ServerCall
from ._interceptors import ServerInterceptor as ServerInterceptor
from ._messaging._codes import StreamCode as StreamCode
from ._observability._statistics import EndpointStatistics as EndpointStatistics
from ._observability._stats_processor import STATS_REQUEST_CODE as STATS_REQUEST_CODE
from ._observability._stats_processor import StatsProcessor as StatsProcessor
from ._security._acl import AclClientRPCHook as AclClientRPCHook
from ._security._acl import AclServerRPCHook as AclServerRPCHook
from ._security._acl import Credential as Credential
from ._version import __version__ as __version__
from .blocking import RemotingClient as RemotingClient
from .blocking import RemotingServer as RemotingServer

__all__ = [
    "PING_REQUEST_CODE",
    "STATS_REQUEST_CODE",
    "__version__",
    "AbortProcessError",
    "AclClientRPCHook",
    "AclServerRPCHook",
    "BlockingStream",
    "Credential",
    "ChannelEventListener",
    "ChannelHandle",
    "ClientCall",
    "ClientConfig",
    "ClientInterceptor",
    "EndpointStatistics",
    "HeldRequests",
    "RPCHook",
    "RemotingClient",
    "RemotingCommand",
    "RemotingCommandError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingResponseError",
    "RemotingSendRequestError",
    "RemotingServer",
    "RemotingStartError",
    "RemotingStreamError",
    "RemotingTimeoutError",
    "RemotingTooManyRequestsError",
    "RequestCode",
    "ResponseCode",
    "ResponseFuture",
    "SerializeType",
    "ServerCall",
    "ServerConfig",
    "ServerInterceptor",
    "StatsProcessor",
    "StreamCode",
    "TrioRemotingClient",
    "TrioRemotingServer",
    "TrioStream",
    "open_client",
    "open_server",
    "raise_for_code",
]

# reprs, tracebacks, pickles and the API reference name remoting.X, not the private module
_fixup_module_metadata("remoting", globals())
