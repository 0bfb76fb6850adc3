"""ROCKETMQ binary header (SerializeType.ROCKETMQ): the `struct` fast path.

Layout (SPEC 3): int16 code, byte language, int16 version, int32 opaque, int32 flag,
int32 remark length + UTF-8, int32 ext length + entries (int16 key length + key,
int32 value length + value). A zero length decodes as None, as in Java.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from ._codes import LANGUAGE_BY_VALUE, LanguageCode, SerializeType
from ._command import RemotingCommand
from ._errors import InvalidCommandError, MalformedFrameError

if TYPE_CHECKING:
    from ._command import ExtFields

__all__ = ["decode_binary_header", "encode_binary_header"]

_FIXED: Final = struct.Struct(">hBhii")  # code, language, version, opaque, flag
_FIXED_SIZE: Final = _FIXED.size  # 13
_I32: Final = struct.Struct(">i")
_I16: Final = struct.Struct(">h")
_EMPTY_STRINGS: Final = b"\x00\x00\x00\x00"


def _encode_ext(ext: ExtFields) -> bytes:
    parts: list[bytes] = []
    for key, value in ext.items():
        # None travels as length 0, which is also how Java's decoder produced it; Java skips
        # null values instead, and its peers read both as null.
        k = key.encode("utf-8")
        v = value.encode("utf-8") if value is not None else b""
        if len(k) > 0x7FFF:
            raise InvalidCommandError(f"ext_fields key of {len(k)} bytes exceeds int16")
        parts.append(_I16.pack(len(k)) + k + _I32.pack(len(v)) + v)
    return b"".join(parts)


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """Return the ROCKETMQ header bytes of ``cmd``.

    Raises:
        InvalidCommandError: ``code`` or ``version`` outside int16 (Java would truncate them
            silently), ``opaque``/``flag`` outside int32, or a non-str ext field.
    """
    language = cmd.language
    try:
        fixed = _FIXED.pack(
            cmd.code, LanguageCode.OTHER if language is None else language,
            cmd.version, cmd.opaque, cmd.flag,
        )
    except struct.error:
        for name, lo, hi in (("code", -(2**15), 2**15 - 1), ("version", -(2**15), 2**15 - 1),
                             ("opaque", -(2**31), 2**31 - 1), ("flag", -(2**31), 2**31 - 1)):
            value = getattr(cmd, name)
            if not isinstance(value, int) or not lo <= value <= hi:
                raise InvalidCommandError(
                    f"{name}={value!r} does not fit the ROCKETMQ header ({lo}..{hi}); "
                    "use SerializeType.JSON for wider codes"
                ) from None
        raise
    remark = cmd.remark
    ext = cmd.ext_fields
    if not remark and not ext:
        return fixed + _EMPTY_STRINGS + _EMPTY_STRINGS
    try:
        r = remark.encode("utf-8") if remark else b""
        e = _encode_ext(ext) if ext else b""
    except AttributeError:
        raise InvalidCommandError("remark and ext_fields keys/values must be str") from None
    return b"".join((fixed, _I32.pack(len(r)), r, _I32.pack(len(e)), e))


def _text(data: bytes, start: int, length: int, what: str) -> str:
    try:
        return data[start : start + length].decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedFrameError(f"ROCKETMQ header {what} is not valid UTF-8") from None


def _length(data: bytes, pos: int, fmt: struct.Struct, what: str, limit: int) -> int:
    if pos + fmt.size > limit:
        raise MalformedFrameError(
            f"ROCKETMQ header truncated: {what} length at byte {pos} runs past byte {limit}"
        )
    (n,) = fmt.unpack_from(data, pos)
    if n < 0 or pos + fmt.size + n > limit:
        raise MalformedFrameError(
            f"ROCKETMQ header {what} length {n} at byte {pos} exceeds the header ({limit} bytes)"
        )
    return n


def decode_binary_header(
    header: bytes, body: bytes | None, serialize_type: SerializeType
) -> RemotingCommand:
    """Build a command from ROCKETMQ header bytes.

    Raises:
        MalformedFrameError: truncated header, a length past its bounds, invalid UTF-8.
    """
    size = len(header)
    if size < _FIXED_SIZE + 8:
        raise MalformedFrameError(
            f"ROCKETMQ header truncated: {size} bytes, at least {_FIXED_SIZE + 8} needed"
        )
    code, language, version, opaque, flag = _FIXED.unpack_from(header, 0)
    pos = _FIXED_SIZE
    n = _length(header, pos, _I32, "remark", size)
    pos += 4
    remark = _text(header, pos, n, "remark") if n else None
    pos += n
    ext_len = _length(header, pos, _I32, "extFields", size)
    pos += 4
    ext: ExtFields | None = None
    if ext_len:
        ext = {}
        end = pos + ext_len
        while pos < end:
            kn = _length(header, pos, _I16, "ext key", end)
            pos += 2
            key = _text(header, pos, kn, "ext key")
            pos += kn
            vn = _length(header, pos, _I32, "ext value", end)
            pos += 4
            ext[key] = _text(header, pos, vn, "ext value") if vn else None
            pos += vn
    return RemotingCommand(
        code=code,
        language=LANGUAGE_BY_VALUE.get(language),
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        body=body,
        serialize_type=serialize_type,
    )
