"""Encode a `RemotingCommand` into one whole frame (length prefix included)."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from ._codes import SerializeType
from ._errors import InvalidCommandError
from ._header_binary import encode_binary_header
from ._header_json import encode_json_header

if TYPE_CHECKING:
    from ._command import RemotingCommand

__all__ = ["MAX_HEADER_BYTES", "encode_frame"]

MAX_HEADER_BYTES: Final = 0xFFFFFF  # 24-bit header length field
_MAX_LENGTH_FIELD: Final = 2**31 - 1
_PREFIX_PACK: Final = struct.Struct(">II").pack  # length, serialize type << 24 | header length


def encode_frame(cmd: RemotingCommand) -> bytes:
    """Return the frame bytes for ``cmd``, as ``RemotingCommand.encode()`` would.

    Raises:
        InvalidCommandError: a field cannot be represented on the wire.
    """
    st = cmd.serialize_type
    if st is _JSON:
        header = encode_json_header(cmd)
    elif st is _ROCKETMQ:
        header = encode_binary_header(cmd)
    elif st == 0:  # a plain int instead of the enum member
        header = encode_json_header(cmd)
    elif st == 1:
        header = encode_binary_header(cmd)
    else:
        raise InvalidCommandError(f"unknown serialize_type {st!r}")
    header_length = len(header)
    body = cmd.body
    if body is not None and type(body) is not bytes and not isinstance(
            body, bytearray | memoryview):
        raise InvalidCommandError(f"body must be bytes, got {type(body).__name__}")
    length = 4 + header_length + (len(body) if body else 0)
    # Literals, not the module constants: this runs per frame (see _header_json).
    if header_length > 0xFFFFFF or length > 0x7FFFFFFF:
        raise InvalidCommandError(
            f"command too large for a frame: header {header_length} bytes "
            f"(max {MAX_HEADER_BYTES}), frame {length} bytes"
        )
    prefix = _PREFIX_PACK(length, (st << 24) | header_length)
    if body:
        return b"".join((prefix, header, body))
    return prefix + header


_JSON: Final = SerializeType.JSON
_ROCKETMQ: Final = SerializeType.ROCKETMQ
