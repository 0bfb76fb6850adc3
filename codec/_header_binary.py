"""ROCKETMQ binary header (SerializeType.ROCKETMQ): the `struct` fast path.

Layout (SPEC 3): int16 code, byte language, int16 version, int32 opaque, int32 flag,
int32 remark length + UTF-8, int32 ext length + entries (int16 key length + key,
int32 value length + value). A zero length decodes as None, as in Java.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from ._codes import LANGUAGE_BY_VALUE, LanguageCode, SerializeType
from ._command import RemotingCommand, new_command
from ._errors import InvalidCommandError, MalformedFrameError

if TYPE_CHECKING:
    from ._command import ExtFields

__all__ = ["decode_binary_header", "encode_binary_header"]

_FIXED: Final = struct.Struct(">hBhii")  # code, language, version, opaque, flag
_FIXED_PACK: Final = _FIXED.pack
# The fixed part plus the remark length, read in one call on decode.
_FIXED_REMARK_UNPACK: Final = struct.Struct(">hBhiii").unpack_from
_FIXED_REMARK_SIZE: Final = 17
_MIN_SIZE: Final = 21  # fixed part + remark length + extFields length (RocketMQSerializableTest)
_I32_PACK: Final = struct.Struct(">i").pack
_I32_UNPACK: Final = struct.Struct(">i").unpack_from
_I16_PACK: Final = struct.Struct(">h").pack
_I16_UNPACK: Final = struct.Struct(">h").unpack_from
_EMPTY_STRING: Final = b"\x00\x00\x00\x00"
_EMPTY_STRINGS: Final = _EMPTY_STRING * 2  # remark length 0, extFields length 0
_LANGUAGE_GET: Final = LANGUAGE_BY_VALUE.get


def _encode_ext(ext: ExtFields) -> bytes:
    parts: list[bytes] = []
    append = parts.append
    for key, value in ext.items():
        # None travels as length 0, which is also how Java's decoder produced it; Java skips
        # null values instead, and its peers read both as null.
        k = key.encode("utf-8")
        if len(k) > 0x7FFF:
            raise InvalidCommandError(f"ext_fields key of {len(k)} bytes exceeds int16")
        append(_I16_PACK(len(k)))
        append(k)
        if value:
            v = value.encode("utf-8")
            append(_I32_PACK(len(v)))
            append(v)
        elif value is None or type(value) is str:
            append(_EMPTY_STRING)
        else:
            raise InvalidCommandError(
                f"ext_fields must map str to str, got {key!r}: {type(value).__name__}"
            )
    return b"".join(parts)


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """Return the ROCKETMQ header bytes of ``cmd``.

    Raises:
        InvalidCommandError: ``code`` or ``version`` outside int16 (Java would truncate them
            silently), ``opaque``/``flag`` outside int32, a non-str remark or ext field, or a
            string that is not valid Unicode (a lone surrogate).
    """
    language = cmd.language
    try:
        fixed = _FIXED_PACK(
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
        raise InvalidCommandError(f"language={language!r} is not a LanguageCode") from None
    remark = cmd.remark
    ext = cmd.ext_fields
    if not remark and not ext:
        if remark is None or type(remark) is str:
            return fixed + _EMPTY_STRINGS
        raise InvalidCommandError(f"remark must be a str, got {type(remark).__name__}")
    try:
        r = remark.encode("utf-8") if remark else b""
        e = _encode_ext(ext) if ext else b""
    except AttributeError:
        raise InvalidCommandError("remark and ext_fields keys/values must be str") from None
    except UnicodeEncodeError as exc:
        raise InvalidCommandError(
            f"remark or ext_fields holds a string that is not valid Unicode: {exc.reason}"
        ) from None
    return b"".join((fixed, _I32_PACK(len(r)), r, _I32_PACK(len(e)), e))


def _truncated(what: str, pos: int, limit: int) -> MalformedFrameError:
    return MalformedFrameError(
        f"ROCKETMQ header truncated: {what} length at byte {pos} runs past byte {limit}"
    )


def _overrun(what: str, n: int, pos: int, limit: int) -> MalformedFrameError:
    return MalformedFrameError(
        f"ROCKETMQ header {what} length {n} at byte {pos} exceeds the header ({limit} bytes)"
    )


def decode_binary_header(
    header: bytes, body: bytes | None, serialize_type: SerializeType
) -> RemotingCommand:
    """Build a command from ROCKETMQ header bytes.

    Raises:
        MalformedFrameError: truncated header, a length past its bounds, invalid UTF-8.
    """
    # Hot path: bounds checks inline, one try block for UTF-8 (zero cost in 3.11).
    size = len(header)
    if size < _MIN_SIZE:
        raise MalformedFrameError(
            f"ROCKETMQ header truncated: {size} bytes, at least {_MIN_SIZE} needed"
        )
    code, language, version, opaque, flag, n = _FIXED_REMARK_UNPACK(header, 0)
    pos = _FIXED_REMARK_SIZE
    what = "remark"
    try:
        remark: str | None = None
        if n:
            if n < 0 or pos + n + 4 > size:
                raise _overrun("remark", n, pos - 4, size)
            remark = header[pos : pos + n].decode("utf-8")
            pos += n
        (ext_len,) = _I32_UNPACK(header, pos)
        ext: ExtFields | None = None
        if ext_len:
            if ext_len < 0 or pos + 4 + ext_len > size:
                raise _overrun("extFields", ext_len, pos, size)
            pos += 4
            ext = {}
            end = pos + ext_len
            while pos < end:
                if pos + 2 > end:
                    raise _truncated("ext key", pos, end)
                (kn,) = _I16_UNPACK(header, pos)
                if kn < 0 or pos + 2 + kn > end:
                    raise _overrun("ext key", kn, pos, end)
                pos += 2
                what = "ext key"
                key = header[pos : pos + kn].decode("utf-8")
                pos += kn
                if pos + 4 > end:
                    raise _truncated("ext value", pos, end)
                (vn,) = _I32_UNPACK(header, pos)
                if vn < 0 or pos + 4 + vn > end:
                    raise _overrun("ext value", vn, pos, end)
                pos += 4
                if vn:
                    what = "ext value"
                    ext[key] = header[pos : pos + vn].decode("utf-8")
                    pos += vn
                else:
                    ext[key] = None
    except UnicodeDecodeError:
        raise MalformedFrameError(f"ROCKETMQ header {what} is not valid UTF-8") from None
    return new_command(
        code, _LANGUAGE_GET(language), version, opaque, flag, remark, ext, body, serialize_type
    )
