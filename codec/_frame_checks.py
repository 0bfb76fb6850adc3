"""What a frame's prefix may be, and the error for one that is not (or for another protocol
that reached a remoting port)."""

from __future__ import annotations

from typing import Final

from ._errors import (
    CodecError,
    ForeignProtocolError,
    FrameTooLargeError,
    MalformedFrameError,
    UnsupportedSerializeTypeError,
)

__all__ = ["header_word_error", "length_error", "sniff_foreign_protocol"]

_HTTP1_METHODS: Final = (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC",
                         b"CONN", b"TRAC", b"HTTP")


def sniff_foreign_protocol(prefix: bytes) -> ForeignProtocolError | None:
    """Return an error naming the protocol if ``prefix`` starts like TLS or HTTP, else None."""
    if prefix[:1] == b"\x16" and prefix[1:2] == b"\x03":
        return ForeignProtocolError(
            "TLS", "a TLS ClientHello reached a plaintext port; enable TLS on the server "
            "or disable use_tls on the client"
        )
    if prefix[:4] == b"PRI ":
        return ForeignProtocolError(
            "HTTP/2", "an HTTP/2 (gRPC?) client connected to the remoting port"
        )
    if prefix[:4] in _HTTP1_METHODS:
        return ForeignProtocolError(
            "HTTP/1", "an HTTP client connected to the remoting port"
        )
    return None


def length_error(length: int, prefix: bytes, max_frame_bytes: int) -> CodecError:
    """Return the error for a length prefix that failed ``4 <= length <= max - 4``."""
    foreign = sniff_foreign_protocol(prefix)
    if foreign is not None:
        return foreign
    if length < 4:
        return MalformedFrameError(
            f"frame length {length} is invalid (at least 4 for the header word)"
        )
    return FrameTooLargeError(length + 4, max_frame_bytes)


def header_word_error(word: int, length: int, prefix: bytes) -> CodecError:
    """Return the error for a header word with a bad header length or serialize type."""
    header_length = word & 0xFFFFFF
    if header_length > length - 4:
        return MalformedFrameError(
            f"header length {header_length} exceeds frame length {length}"
        )
    foreign = sniff_foreign_protocol(prefix)  # reachable with a large max_frame_bytes
    if foreign is not None:
        return foreign
    return UnsupportedSerializeTypeError(word >> 24)
