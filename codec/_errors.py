"""The codec's exceptions: `CodecError` is the only root that escapes the codec."""

from __future__ import annotations

from typing import Any

__all__ = [
    "CodecError",
    "ForeignProtocolError",
    "FrameTooLargeError",
    "HeaderFieldError",
    "HeaderTooLargeError",
    "InvalidCommandError",
    "MalformedFrameError",
    "UnsupportedSerializeTypeError",
]


class CodecError(Exception):
    """Bytes or a command that cannot be translated; the stream it came from is unusable."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take other arguments than their message: rebuild from the message and
        # the attributes, not through __init__, so that every one survives pickling.
        return _rebuild, (type(self), self.args), self.__dict__


def _rebuild(cls: type[CodecError], args: tuple[Any, ...]) -> CodecError:
    error = cls.__new__(cls, *args)
    error.args = args
    return error


class FrameTooLargeError(CodecError):
    """A length prefix announced a frame over the configured limit (checked before buffering)."""

    def __init__(self, length: int, limit: int, hint: str = "") -> None:
        self.length = length
        self.limit = limit
        msg = (
            f"frame of {length} bytes exceeds the limit of {limit} bytes "
            "(raise max_frame_bytes on both sides if such frames are expected)"
        )
        super().__init__(msg + hint)


class HeaderTooLargeError(CodecError):
    """A frame's header is longer than the configured limit (checked on the 8-byte prefix,
    before the header is buffered or parsed).

    Parsing a header costs the event loop time in proportion to its bytes, so one frame with
    a huge header could hold up every connection; RocketMQ's own headers are small.

    Attributes:
        length: the header length the frame announced (or the header about to be sent).
        limit: the limit (``max_header_bytes``).
    """

    def __init__(self, length: int, limit: int, hint: str = "") -> None:
        self.length = length
        self.limit = limit
        msg = (
            f"header of {length} bytes exceeds the limit of {limit} bytes "
            "(raise max_header_bytes on both sides if such headers are expected)"
        )
        super().__init__(msg + hint)


class MalformedFrameError(CodecError):
    """The bytes are not a well-formed frame (bad lengths, truncated or invalid header)."""



class ForeignProtocolError(MalformedFrameError):
    """The peer speaks another protocol (TLS, HTTP/1.x, HTTP/2) on our plaintext port.

    Attributes:
        protocol: ``"TLS"``, ``"HTTP/1"`` or ``"HTTP/2"``.
    """

    def __init__(self, protocol: str, advice: str) -> None:
        self.protocol = protocol
        super().__init__(f"peer sent a {protocol} preamble, not a remoting frame: {advice}")


class UnsupportedSerializeTypeError(CodecError):
    """The frame's serialize-type byte is neither JSON (0) nor ROCKETMQ (1)."""

    def __init__(self, value: int) -> None:
        self.value = value
        super().__init__(
            f"unsupported serialize type {value} in header word (expected 0=JSON or 1=ROCKETMQ)"
        )


class InvalidCommandError(CodecError):
    """A command cannot be encoded (a field out of its wire range, a non-str ext field...)."""



class HeaderFieldError(CodecError):
    """A typed custom header could not be built from a command's ``ext_fields``.

    Attributes:
        header: the header class name.
        field: the field that is missing or does not parse.
    """

    def __init__(self, header: str, field: str, problem: str) -> None:
        self.header = header
        self.field = field
        super().__init__(f"{header}.{field}: {problem}")
