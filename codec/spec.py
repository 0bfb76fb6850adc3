"""The wire layout, declared once with construct: a readable specification you can import.

``codec.spec.FRAME`` parses and builds a whole frame; ``BINARY_HEADER`` the ROCKETMQ header.
They need construct, which the transport does not: ``pip install 'trio-remoting[spec]'``.
The codec's own hot path (`_encoder`, `_decoder`, `_header_binary`) is precompiled `struct`
code that property tests prove byte-identical to these declarations on valid input. construct
never sees peer bytes in the transport: its compiled parsers return short fields instead of
raising on truncated input, so every length check of the codec is its own, made before parsing.
"""

from __future__ import annotations

from typing import Any, Final

try:
    import construct  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "codec.spec needs construct: pip install 'trio-remoting[spec]'") from exc

from construct import (
    Bytes,
    GreedyBytes,
    GreedyRange,
    Int8ub,
    Int16sb,
    Int24ub,
    Int32sb,
    PascalString,
    Prefixed,
    Struct,
    this,
)

__all__ = ["BINARY_HEADER", "FRAME"]

# Frame: int32 length (bytes after this field), serialize type byte, 24-bit header length,
# header, body (the rest). RemotingCommand.encode / markProtocolType.
FRAME: Final[Any] = Struct(
    "length" / Int32sb,
    "serialize_type" / Int8ub,
    "header_length" / Int24ub,
    "header" / Bytes(this.header_length),
    "body" / Bytes(this.length - 4 - this.header_length),
)

# ROCKETMQ binary header: RocketMQSerializable.rocketMQProtocolEncode.
EXT_FIELD: Final[Any] = Struct(
    "key" / PascalString(Int16sb, "utf8"),
    "value" / PascalString(Int32sb, "utf8"),
)

BINARY_HEADER: Final[Any] = Struct(
    "code" / Int16sb,
    "language" / Int8ub,
    "version" / Int16sb,
    "opaque" / Int32sb,
    "flag" / Int32sb,
    "remark" / Prefixed(Int32sb, GreedyBytes),
    "ext_fields" / Prefixed(Int32sb, GreedyRange(EXT_FIELD)),
)
