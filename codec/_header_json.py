"""JSON header (SerializeType.JSON): written like fastjson, read as leniently as fastjson.

Writing (SPEC 2): keys sorted, no spaces, null fields omitted, language by name,
``serializeTypeCurrentRPC`` = ``"JSON"``. orjson produces exactly fastjson's bytes for strings
without escapes; when an escape is needed (control characters, quotes, backslash, U+007F-U+009F,
U+2028/2029), we fall back to a writer that escapes like fastjson's ``SerializeWriter``.

Reading: strict JSON through orjson first; on failure a small lenient parser that accepts what
fastjson accepts in practice (single quotes, unquoted keys). Field coercions follow SPEC 2.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import orjson

from ._codes import (
    LANGUAGE_BY_NAME,
    LANGUAGE_BY_VALUE,
    LanguageCode,
    SerializeType,
    language_error,
)
from ._command import RemotingCommand, new_command, next_opaque
from ._errors import InvalidCommandError, MalformedFrameError
from ._header_numbers import header_int
from ._lenient_json import lenient_loads
from ._native import adopt_doc, speedups

if TYPE_CHECKING:
    from ._command import ExtFields

__all__ = ["decode_json_header", "encode_json_header"]

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1

# Bytes in orjson output that mean fastjson would have written something else.
_NEEDS_FASTJSON_ESCAPE: Final = re.compile(rb"[\\\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8\xa9]")
_ESCAPED_CHARS: Final = re.compile("[\x00-\x1f\"\\\\\x7f-\x9f\u2028\u2029]")
_SHORT_ESCAPES: Final = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r",
                         '"': '\\"', "\\": "\\\\"}
_SERIALIZE_NAMES: Final = {SerializeType.JSON: "JSON", SerializeType.ROCKETMQ: "ROCKETMQ"}


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group()
    return _SHORT_ESCAPES.get(ch) or f"\\u{ord(ch):04X}"


def _fastjson_str(value: str) -> str:
    return '"' + _ESCAPED_CHARS.sub(_escape_char, value) + '"'


def _check_int32(cmd: RemotingCommand) -> None:
    for name in ("code", "version", "opaque", "flag"):
        value = getattr(cmd, name)
        if (not isinstance(value, int) or isinstance(value, bool)
                or not INT32_MIN <= value <= INT32_MAX):
            raise InvalidCommandError(f"{name}={value!r} does not fit the wire's int32")


def _checked_ext(ext: ExtFields) -> ExtFields:
    """Return ``ext`` without its None values (fastjson omits null map values).

    Raises:
        InvalidCommandError: a key or value that is not a str.
    """
    for k, v in ext.items():
        if type(k) is not str or (v is not None and type(v) is not str):
            raise InvalidCommandError(
                f"ext_fields must map str to str, got {k!r}: {type(v).__name__}"
            )
    return {k: v for k, v in ext.items() if v is not None}


def _slow_encode(d: dict[str, object]) -> bytes:
    """Write the header with fastjson's escaping rules (rare path)."""

    def value(v: object) -> str:
        if isinstance(v, str):
            return _fastjson_str(v)
        if isinstance(v, dict):
            items = sorted(v.items())
            return "{" + ",".join(f"{_fastjson_str(k)}:{value(x)}" for k, x in items) + "}"
        return str(v)

    return value(d).encode("utf-8")


_LANGUAGE_NAMES: Final[dict[LanguageCode | None, str | None]] = {
    **{m: m.name for m in LanguageCode}, None: None}  # None: unknown, the key is left out
_DUMPS: Final = orjson.dumps
_SORT_KEYS: Final = orjson.OPT_SORT_KEYS


def _header_dict(cmd: RemotingCommand, code: int, opaque: int, flag: int, version: int,
                 remark: str | None, ext: ExtFields | None) -> dict[str, object]:
    """Check the fields and return the header as fastjson writes it (null fields omitted).

    Raises:
        InvalidCommandError: an int field outside int32, or a non-str ext key or value.
    """
    try:
        in_range = (-0x80000000 <= code <= 0x7FFFFFFF and -0x80000000 <= opaque <= 0x7FFFFFFF
                    and -0x80000000 <= flag <= 0x7FFFFFFF
                    and -0x80000000 <= version <= 0x7FFFFFFF)
    except TypeError:
        in_range = False
    if not in_range or not (type(code) is int and type(opaque) is int and type(flag) is int
                            and type(version) is int):
        _check_int32(cmd)
    if ext is not None:
        if type(ext) is not dict:
            raise InvalidCommandError(f"ext_fields must be a dict, got {type(ext).__name__}")
        for v in ext.values():
            if type(v) is not str:
                ext = _checked_ext(ext)
                break
    try:
        language = _LANGUAGE_NAMES[cmd.language]
    except (KeyError, TypeError):  # not a LanguageCode (TypeError: unhashable)
        raise language_error(cmd.language) from None
    # fastjson omits null properties; keys are written sorted.
    d: dict[str, object]
    if remark is None and language is not None:
        d = {"code": code, "extFields": ext, "flag": flag, "language": language,
             "opaque": opaque, "serializeTypeCurrentRPC": "JSON", "version": version}
        if ext is None:
            del d["extFields"]
    else:
        if remark is not None and type(remark) is not str:
            raise InvalidCommandError(f"remark must be a str, got {type(remark).__name__}")
        d = {"code": code}
        if ext is not None:
            d["extFields"] = ext
        d["flag"] = flag
        if language is not None:
            d["language"] = language
        d["opaque"] = opaque
        if remark is not None:
            d["remark"] = remark
        d["serializeTypeCurrentRPC"] = "JSON"
        d["version"] = version
    return d


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """Return the JSON header bytes of ``cmd`` exactly as fastjson would write them.

    Raises:
        InvalidCommandError: an int field outside int32, a non-str ext field key/value, or a
            string that is not valid Unicode (a lone surrogate).
    """
    # Hot path (bench/codec.py): one pass over the ext values, one orjson call, and byte
    # searches that rule out the fastjson escape cases. Range limits are literals on purpose:
    # a LOAD_CONST is cheaper than a global lookup, and this runs per frame.
    code = cmd.code
    opaque = cmd.opaque
    flag = cmd.flag
    version = cmd.version
    remark = cmd.remark
    ext = cmd.ext_fields
    # Fastest path: no ext fields and no remark (most requests and responses). The header then
    # differs from one with the same code/flag/language/version only by the opaque, so it is
    # a cached template around the opaque's digits. Templates are made below, by this same
    # function, so they hold exactly what it writes; exact int types keep 1.0 and True out.
    if (ext is None and remark is None and type(opaque) is int and type(code) is int
            and type(flag) is int and type(version) is int
            and -0x80000000 <= opaque <= 0x7FFFFFFF):
        try:
            template = _TEMPLATES.get((code, flag, cmd.language, version))
        except TypeError:  # an unhashable language: _header_dict refuses it
            template = None
        if template is not None:
            return b"%b%d%b" % (template[0], opaque, template[1])
    d = _header_dict(cmd, code, opaque, flag, version, remark, ext)
    try:
        out = _DUMPS(d, option=_SORT_KEYS)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise InvalidCommandError(
            f"cannot write the JSON header: {exc} (remark and ext_fields must be str, "
            "without lone surrogates)"
        ) from None
    # `int in bytes` is a memchr (~25 ns); the regex costs microseconds, so it only runs when a
    # lead byte of U+0080..U+009F (C2) or U+2028/2029 (E2) is present.
    if 92 in out or 127 in out or (  # backslash: orjson escaped something; DEL
        (0xC2 in out or 0xE2 in out) and _NEEDS_FASTJSON_ESCAPE.search(out) is not None
    ):
        out = _slow_encode(d)
    elif ext is None and remark is None and len(_TEMPLATES) < _MAX_TEMPLATES:
        marker = b'"opaque":%d,' % opaque  # keys are sorted: "serializeTypeCurrentRPC" follows
        at = out.index(marker) + 9
        _TEMPLATES[(code, flag, cmd.language, version)] = (out[:at], out[at + len(marker) - 10:])
    return out


# (code, flag, language, version) -> the header bytes before and after the opaque's digits
_TEMPLATES: Final[dict[tuple[object, ...], tuple[bytes, bytes]]] = {}
_MAX_TEMPLATES: Final = 4096  # a few per request code in practice; beyond, the normal path


# --------------------------------------------------------------------------- decoding


def _as_int(obj: dict[str, object], key: str, default: int | None) -> int | None:
    value = obj.get(key)
    if value is None:
        return default
    if type(value) is int:
        result = value
    elif isinstance(value, str):
        # a number sent as a string (fastjson reads one); surrounding spaces are forgiven,
        # anything else but an optional "-" and ASCII digits is not (header_int)
        try:
            result = header_int(key, value.strip(), INT32_MIN, INT32_MAX)
        except ValueError as exc:
            raise MalformedFrameError(f"JSON header field {exc}") from None
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    else:
        raise MalformedFrameError(
            f"JSON header field {key!r} must be an integer, got {type(value).__name__}"
        )
    if not INT32_MIN <= result <= INT32_MAX:
        raise MalformedFrameError(f"JSON header field {key!r}={result} does not fit int32")
    return result


def _as_language(value: object) -> LanguageCode | None:
    if value is None:
        return LanguageCode.JAVA  # Java's field default when the key is missing
    if isinstance(value, str):
        return LANGUAGE_BY_NAME.get(value)
    if type(value) is int:
        return LANGUAGE_BY_VALUE.get(value)  # fastjson reads a number as the enum ordinal
    raise MalformedFrameError(f"JSON header field 'language' has type {type(value).__name__}")


def _stringify(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return str(value)
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError as exc:  # defensive: loads output always dumps
        raise MalformedFrameError(f"JSON header value cannot be read: {exc}") from None


def _as_ext_fields(value: object) -> ExtFields | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedFrameError(
            f"JSON header field 'extFields' must be an object, got {type(value).__name__}"
        )
    ext: ExtFields = {}
    for k, v in value.items():
        ext[k] = v if type(v) is str else _stringify(v)
    return ext


def _decode_slow(obj: dict[str, object], body: bytes | None,
                 serialize_type: SerializeType) -> RemotingCommand:
    """Apply fastjson's coercions field by field (strings as numbers, ordinals, null...)."""
    remark = obj.get("remark")
    if remark is not None and type(remark) is not str:
        remark = _stringify(remark)
    ext = obj.get("extFields")
    opaque = _as_int(obj, "opaque", None)
    return new_command(
        _as_int(obj, "code", 0),  # type: ignore[arg-type]
        _as_language(obj.get("language")),
        _as_int(obj, "version", 0),  # type: ignore[arg-type]
        next_opaque() if opaque is None else opaque,
        _as_int(obj, "flag", 0),  # type: ignore[arg-type]
        remark,
        None if ext is None else _as_ext_fields(ext),
        body,
        serialize_type,
    )


def decode_json_header(
    header: bytes, body: bytes | None, serialize_type: SerializeType
) -> RemotingCommand:
    """Build a command from JSON header bytes.

    Raises:
        MalformedFrameError: invalid UTF-8 or JSON, not an object, or a field of a wrong type.
    """
    try:
        obj = _LOADS(header)
    except orjson.JSONDecodeError:
        obj = lenient_loads(header)
    if type(obj) is not dict:
        raise MalformedFrameError(f"JSON header must be an object, got {type(obj).__name__}")
    # Fast path: what fastjson and we write (ints in range, language by name, str values).
    # Anything else goes through the field-by-field coercions of _decode_slow.
    try:  # subscripts are cheaper than .get(); fastjson always writes these five keys
        code = obj["code"]
        opaque = obj["opaque"]
        flag = obj["flag"]
        version = obj["version"]
        language = obj["language"]
    except KeyError:
        return _decode_slow(obj, body, serialize_type)
    remark = obj.get("remark")
    ext = obj.get("extFields")
    if not (  # int32 limits as literals: see encode_json_header
        type(code) is int and type(opaque) is int and type(flag) is int
        and type(version) is int and type(language) is str
        and (remark is None or type(remark) is str)
        and -0x80000000 <= code <= 0x7FFFFFFF and -0x80000000 <= opaque <= 0x7FFFFFFF
        and -0x80000000 <= flag <= 0x7FFFFFFF and -0x80000000 <= version <= 0x7FFFFFFF
    ):
        return _decode_slow(obj, body, serialize_type)
    if ext is not None:
        if type(ext) is not dict:
            return _decode_slow(obj, body, serialize_type)
        for v in ext.values():
            if type(v) is not str:
                ext = _as_ext_fields(ext)
                break
    # new_command inlined (hot path); tests compare every field after a round trip.
    cmd: RemotingCommand = _new(RemotingCommand)
    cmd.code = code
    cmd.language = _LANGUAGE_BY_NAME_GET(language)
    cmd.version = version
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.remark = remark
    cmd.ext_fields = ext
    cmd.body = body
    cmd.serialize_type = serialize_type
    return cmd


_new: Final = object.__new__
_LOADS: Final = orjson.loads
_LANGUAGE_BY_NAME_GET: Final = LANGUAGE_BY_NAME.get


# The compiled fast path (codec/_native.py): the shapes fastjson and we write, in C; every
# other case, errors included, goes to the Python functions above, which stay the
# specification (tests compare the two).
python_decode_json_header: Final = decode_json_header
python_encode_json_header: Final = encode_json_header
if speedups is not None:
    speedups.bind_json(decode_json_header, encode_json_header, LANGUAGE_BY_NAME,
                       _LANGUAGE_NAMES, SerializeType.JSON)
    decode_json_header = speedups.decode_json_header
    encode_json_header = speedups.encode_json_header
    adopt_doc(decode_json_header, python_decode_json_header)
    adopt_doc(encode_json_header, python_encode_json_header)
