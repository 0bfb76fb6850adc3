"""Encode a `RemotingCommand` into one whole frame (length prefix included)."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final, TypeAlias

from ._codes import SerializeType
from ._errors import FrameTooLargeError, HeaderTooLargeError, InvalidCommandError
from ._header_binary import encode_binary_header
from ._header_json import encode_json_header
from ._native import adopt_doc, speedups

if TYPE_CHECKING:
    from ._command import RemotingCommand

__all__ = ["LARGE_BODY_BYTES", "MAX_HEADER_BYTES", "EncodedFrame", "encode_frame",
           "encode_frame_parts"]

MAX_HEADER_BYTES: Final = 0xFFFFFF  # 24-bit header length field
# Bodies this big are not copied next to their header by `encode_frame_parts`. Measured on
# loopback TCP (CPU time of the sender, join + send vs sendmsg of the two pieces): no
# difference up to 64 KiB, then sendmsg wins by 7 us at 128 KiB and 75 us at 1 MiB, the
# joined copy being fresh memory that page-faults (docs/performance.md).
LARGE_BODY_BYTES: Final = 64 * 1024
_MAX_LENGTH_FIELD: Final = 2**31 - 1
_PREFIX_PACK: Final = struct.Struct(">II").pack  # length, serialize type << 24 | header length

# A frame as `encode_frame_parts` returns it: whole, or (length prefix + header, body) to be
# written one after the other.
EncodedFrame: TypeAlias = "bytes | tuple[bytes, bytes]"


def encode_frame(cmd: RemotingCommand) -> bytes:
    """Return the frame bytes for ``cmd``, as ``RemotingCommand.encode()`` would.

    Raises:
        InvalidCommandError: a field cannot be represented on the wire.
    """
    frame = encode_frame_parts(cmd)
    if isinstance(frame, tuple):
        return b"".join(frame)  # a large body: the one copy encode_frame_parts avoided
    return frame


def encode_frame_parts(cmd: RemotingCommand, limit: int = 0x7FFFFFFF + 4,
                       header_limit: int = MAX_HEADER_BYTES) -> EncodedFrame:
    """Return the frame for ``cmd``, leaving a large body uncopied.

    ``limit`` is the largest frame the peer accepts (its ``max_frame_bytes``, the length
    field included; by default what the length field can describe), ``header_limit`` the
    largest header (its ``max_header_bytes``): a larger one is refused here, before anything
    is sent, rather than by the peer, which would close the connection and fail every call
    on it.

    Returns:
        The frame as one ``bytes`` (what `encode_frame` returns), except when the body is
        immutable ``bytes`` of at least `LARGE_BODY_BYTES`: then ``(head, body)`` where
        ``head`` is the length prefix and header and ``body`` is ``cmd.body`` itself. The
        concatenation is always ``encode_frame(cmd)``. A ``bytearray`` or ``memoryview`` body
        is always copied, so changing it after this call cannot change what is sent.

    Raises:
        InvalidCommandError: a field cannot be represented on the wire.
        FrameTooLargeError: the frame would be longer than ``limit`` bytes.
        HeaderTooLargeError: the header would be longer than ``header_limit`` bytes.
    """
    st = cmd.serialize_type
    if st is _JSON:
        header = encode_json_header(cmd)
    elif st is _ROCKETMQ:
        header = encode_binary_header(cmd)
    else:
        header = _header_for_int_type(cmd, st)
    header_length = len(header)
    body: bytes | bytearray | memoryview | None = cmd.body
    if body is not None and type(body) is not bytes:
        body = _flat_body(body)
    length = 4 + header_length + (len(body) if body else 0)
    # Literals, not the module constants: this runs per frame (see _header_json).
    if header_length > 0xFFFFFF or length > 0x7FFFFFFF:
        raise InvalidCommandError(
            f"command too large for a frame: header {header_length} bytes "
            f"(max {MAX_HEADER_BYTES}), frame {length} bytes"
        )
    if length + 4 > limit:  # the whole frame, its length field too, as FrameDecoder counts
        raise FrameTooLargeError(length + 4, limit, ": not sent")
    if header_length > header_limit:
        raise HeaderTooLargeError(header_length, header_limit, ": not sent")
    prefix = _PREFIX_PACK(length, (st << 24) | header_length)
    if body:
        if type(body) is bytes and len(body) >= LARGE_BODY_BYTES:
            return prefix + header, body
        return b"".join((prefix, header, body))
    return prefix + header


def _flat_body(body: object) -> bytes | bytearray | memoryview:
    """Return a body that is not ``bytes`` as one run of bytes whose ``len`` is its size.

    A memoryview of wider items (``array('i')``, numpy), of several dimensions or with
    strides is copied into ``bytes``: its ``len`` counts items or rows, not bytes.

    Raises:
        InvalidCommandError: the body is not bytes, a bytearray or a memoryview.
    """
    if isinstance(body, bytearray):
        return body
    if isinstance(body, memoryview):
        if body.itemsize == 1 and body.ndim == 1 and body.c_contiguous:
            return body
        return body.tobytes()
    raise InvalidCommandError(f"body must be bytes, got {type(body).__name__}")


def _header_for_int_type(cmd: RemotingCommand, st: object) -> bytes:
    """Encode the header when ``serialize_type`` is not an enum member (a plain 0 or 1)."""
    if st == 0:
        return encode_json_header(cmd)
    if st == 1:
        return encode_binary_header(cmd)
    raise InvalidCommandError(f"unknown serialize_type {st!r}")


_JSON: Final = SerializeType.JSON
_ROCKETMQ: Final = SerializeType.ROCKETMQ


# The compiled fast path (codec/_native.py): a JSON or ROCKETMQ command with a small bytes body
# (or none), written in one piece in C; every other case, errors included, goes to the Python
# function above, which stays the specification (tests compare the two).
python_encode_frame_parts: Final = encode_frame_parts
if speedups is not None:
    speedups.bind_frames(encode_frame_parts, LARGE_BODY_BYTES)
    encode_frame_parts = speedups.encode_frame_parts
    adopt_doc(encode_frame_parts, python_encode_frame_parts)
