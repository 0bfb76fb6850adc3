"""Sans-I/O codec for the Apache RocketMQ remoting wire protocol.

No sockets, no trio, no logging, no clock: bytes in, `RemotingCommand` out, and back.
"""

from __future__ import annotations

from ._codes import (
    FLAG_ONEWAY as FLAG_ONEWAY,
)
from ._codes import (
    FLAG_RESPONSE as FLAG_RESPONSE,
)
from ._codes import (
    LanguageCode as LanguageCode,
)
from ._codes import (
    RequestCode as RequestCode,
)
from ._codes import (
    ResponseCode as ResponseCode,
)
from ._codes import (
    SerializeType as SerializeType,
)
from ._command import ExtFields as ExtFields
from ._command import RemotingCommand as RemotingCommand
from ._command import next_opaque as next_opaque
from ._decoder import DEFAULT_MAX_FRAME_BYTES as DEFAULT_MAX_FRAME_BYTES
from ._decoder import DEFAULT_MAX_HEADER_BYTES as DEFAULT_MAX_HEADER_BYTES
from ._decoder import FrameDecoder as FrameDecoder
from ._decoder import decode_frame as decode_frame
from ._encoder import LARGE_BODY_BYTES as LARGE_BODY_BYTES
from ._encoder import EncodedFrame as EncodedFrame
from ._encoder import encode_frame as encode_frame
from ._encoder import encode_frame_parts as encode_frame_parts
from ._errors import CodecError as CodecError
from ._errors import ForeignProtocolError as ForeignProtocolError
from ._errors import FrameTooLargeError as FrameTooLargeError
from ._errors import HeaderFieldError as HeaderFieldError
from ._errors import HeaderTooLargeError as HeaderTooLargeError
from ._errors import InvalidCommandError as InvalidCommandError
from ._errors import MalformedFrameError as MalformedFrameError
from ._errors import UnsupportedSerializeTypeError as UnsupportedSerializeTypeError
from ._frame_checks import sniff_foreign_protocol as sniff_foreign_protocol
from ._module_metadata import fixup_module_metadata as _fixup_module_metadata

# The sans-I/O name for it: bytes out of a command (h11/h2 style).
encode_command = encode_frame

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_MAX_HEADER_BYTES",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "LARGE_BODY_BYTES",
    "CodecError",
    "EncodedFrame",
    "ExtFields",
    "ForeignProtocolError",
    "FrameDecoder",
    "FrameTooLargeError",
    "HeaderFieldError",
    "HeaderTooLargeError",
    "InvalidCommandError",
    "LanguageCode",
    "MalformedFrameError",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "UnsupportedSerializeTypeError",
    "decode_frame",
    "encode_command",
    "encode_frame",
    "encode_frame_parts",
    "next_opaque",
    "sniff_foreign_protocol",
]

# reprs, tracebacks, pickles and the API reference name codec.X, not the private module
_fixup_module_metadata("codec", globals())
