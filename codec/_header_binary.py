"""ROCKETMQ binary header (SerializeType.ROCKETMQ): the `struct` fast path.

Layout (SPEC 3): int16 code, byte language, int16 version, int32 opaque, int32 flag,
int32 remark length + UTF-8, int32 ext length + entries (int16 key length + key,
int32 value length + value). A zero length decodes as None, as in Java.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from ._codes import LANGUAGE_BY_VALUE, LANGUAGE_BYTE, SerializeType, language_error
from ._command import RemotingCommand
from ._errors import InvalidCommandError, MalformedFrameError
from ._native import adopt_doc, speedups

if TYPE_CHECKING:
    from ._command import ExtFields

__all__ = ["decode_binary_header", "encode_binary_header"]

_FIXED_PACK: Final = struct.Struct(">hBhii").pack  # code, language, version, opaque, flag
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
_LANGUAGE_BYTE: Final = LANGUAGE_BYTE
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
_new: Final = object.__new__
_SHORT_I16: Final = [_I16_PACK(n) for n in range(256)]
_SHORT_I32: Final = [_I32_PACK(n) for n in range(256)]


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """Return the ROCKETMQ header bytes of ``cmd``.

    Raises:
        InvalidCommandError: ``code`` or ``version`` outside int16 (Java would truncate them
            silently), ``opaque``/``flag`` outside int32, a non-str remark or ext field, or a
            string that is not valid Unicode (a lone surrogate).
    """
    code = cmd.code
    try:
        fixed = _FIXED_PACK(code, _LANGUAGE_BYTE[cmd.language], cmd.version, cmd.opaque,
                            cmd.flag)
    except (struct.error, KeyError, TypeError):  # Key/TypeError: not a LanguageCode
        raise _fixed_error(cmd) from None
    if (type(code) is bool or type(cmd.opaque) is bool or type(cmd.flag) is bool
            or type(cmd.version) is bool):  # struct packs True as 1, JSON refuses it
        raise _fixed_error(cmd)
    remark = cmd.remark
    ext = cmd.ext_fields
    if not remark and not ext:
        if remark is None or type(remark) is str:
            return fixed + _EMPTY_STRINGS
        raise InvalidCommandError(f"remark must be a str, got {type(remark).__name__}")
    if not remark and remark is not None and type(remark) is not str:
        raise InvalidCommandError(f"remark must be a str, got {type(remark).__name__}")
    try:
        r = remark.encode() if remark else b""
        parts = [fixed, _I32_PACK(len(r)), r, _EMPTY_STRING]
        if ext:
            ext_length = 0
            for key, value in ext.items():
                if value is None:  # skipped, as Java's RocketMQSerializable.mapSerialize does
                    continue
                k = key.encode()
                v = value.encode()
                kn = len(k)
                vn = len(v)
                # Short lengths come from tables: a list index is ~3x cheaper than a pack call.
                parts += (_SHORT_I16[kn] if kn < 256 else _I16_PACK(kn), k,
                          _SHORT_I32[vn] if vn < 256 else _I32_PACK(vn), v)
                ext_length += 6 + kn + vn
            parts[3] = _I32_PACK(ext_length)
    except AttributeError:
        raise InvalidCommandError("remark and ext_fields keys/values must be str") from None
    except UnicodeEncodeError as exc:
        raise InvalidCommandError(
            f"remark or ext_fields holds a string that is not valid Unicode: {exc.reason}"
        ) from None
    except struct.error:  # a key of more than 32767 bytes
        raise InvalidCommandError(
            f"an ext_fields key exceeds the int16 length limit ({0x7FFF} bytes)"
        ) from None
    return b"".join(parts)


def _fixed_error(cmd: RemotingCommand) -> InvalidCommandError:
    for name, lo, hi in (("code", -(2**15), 2**15 - 1), ("version", -(2**15), 2**15 - 1),
                         ("opaque", -(2**31), 2**31 - 1), ("flag", -(2**31), 2**31 - 1)):
        value = getattr(cmd, name)
        if isinstance(value, bool) or not isinstance(value, int):
            return InvalidCommandError(f"{name} must be an int, got {value!r}")
        if not lo <= value <= hi:
            wider = ("; SerializeType.JSON takes int32 values" if hi < 2**31 - 1
                     and INT32_MIN <= value <= INT32_MAX else "")
            return InvalidCommandError(
                f"{name}={value!r} does not fit the ROCKETMQ header ({lo}..{hi}){wider}")
    return language_error(cmd.language)


def _truncated(what: str, pos: int, limit: int) -> MalformedFrameError:
    return MalformedFrameError(
        f"ROCKETMQ header truncated: {what} length at byte {pos} runs past byte {limit}"
    )


def _overrun(what: str, n: int, pos: int, limit: int) -> MalformedFrameError:
    return MalformedFrameError(
        f"ROCKETMQ header {what} length {n} at byte {pos} runs past byte {limit} "
        "(the end of its section)"
    )


def _decode_ext(header: bytes, pos: int, end: int) -> ExtFields:
    """Decode the ext fields at ``header[pos:end]`` (2-byte key and 4-byte value lengths).

    Raises:
        MalformedFrameError: an entry runs past ``end``.
        UnicodeDecodeError: a key or value is not UTF-8 (the caller reports where).
    """
    ext: ExtFields = {}
    while pos < end:
        if pos + 6 > end:
            raise _truncated("ext entry", pos, end)
        (n,) = _I16_UNPACK(header, pos)
        key_end = pos + 2 + n
        if n < 0 or key_end + 4 > end:
            raise _overrun("ext key", n, pos, end)
        key = header[pos + 2 : key_end].decode()
        (n,) = _I32_UNPACK(header, key_end)
        pos = key_end + 4 + n
        if n < 0 or pos > end:
            raise _overrun("ext value", n, key_end, end)
        ext[key] = header[key_end + 4 : pos].decode() if n else None
    return ext


def decode_binary_header(
    header: bytes, body: bytes | None, serialize_type: SerializeType
) -> RemotingCommand:
    """Build a command from ROCKETMQ header bytes.

    Raises:
        MalformedFrameError: truncated header, a length past its bounds, invalid UTF-8.
    """
    # Hot path: bounds checks inline, one try block for UTF-8 (zero cost in 3.11). Lengths are
    # signed, as Java reads them; each string must end inside its section.
    size = len(header)
    if size < _MIN_SIZE:
        raise MalformedFrameError(
            f"ROCKETMQ header truncated: {size} bytes, at least {_MIN_SIZE} needed"
        )
    code, language, version, opaque, flag, n = _FIXED_REMARK_UNPACK(header, 0)
    pos = _FIXED_REMARK_SIZE
    try:
        remark: str | None = None
        if n:
            if n < 0 or pos + n + 4 > size:
                raise _overrun("remark", n, pos - 4, size)
            remark = header[pos : pos + n].decode()
            pos += n
        (n,) = _I32_UNPACK(header, pos)
        ext: ExtFields | None = None
        if n:
            if n < 0 or pos + 4 + n > size:
                raise _overrun("extFields", n, pos, size)
            ext = _decode_ext(header, pos + 4, pos + 4 + n)
    except UnicodeDecodeError:
        raise MalformedFrameError(
            f"ROCKETMQ header: a string near byte {pos} is not valid UTF-8"
        ) from None
    # new_command inlined (hot path); tests compare every field after a round trip.
    cmd: RemotingCommand = _new(RemotingCommand)
    cmd.code = code
    cmd.language = _LANGUAGE_GET(language)
    cmd.version = version
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.remark = remark
    cmd.ext_fields = ext
    cmd.body = body
    cmd.serialize_type = serialize_type
    return cmd


# The compiled fast path (codec/_native.py): well-formed headers of exact types, in C; every
# other case, errors included, goes to the Python functions above, which stay the
# specification (tests compare the two).
python_decode_binary_header: Final = decode_binary_header
python_encode_binary_header: Final = encode_binary_header
if speedups is not None:
    speedups.bind_binary(decode_binary_header, encode_binary_header, LANGUAGE_BY_VALUE,
                         LANGUAGE_BYTE, SerializeType.ROCKETMQ)
    decode_binary_header = speedups.decode_binary_header
    encode_binary_header = speedups.encode_binary_header
    adopt_doc(decode_binary_header, python_decode_binary_header)
    adopt_doc(encode_binary_header, python_encode_binary_header)
