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

from ._codes import LANGUAGE_BY_NAME, LANGUAGE_BY_VALUE, LanguageCode, SerializeType
from ._command import RemotingCommand, next_opaque
from ._errors import InvalidCommandError, MalformedFrameError

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
        if not INT32_MIN <= value <= INT32_MAX:
            raise InvalidCommandError(f"{name}={value} does not fit the wire's int32")


def _header_dict(cmd: RemotingCommand, ext: ExtFields | None) -> dict[str, object]:
    d: dict[str, object] = {"code": cmd.code}
    if ext is not None:
        d["extFields"] = ext
    d["flag"] = cmd.flag
    if cmd.language is not None:
        d["language"] = cmd.language.name
    d["opaque"] = cmd.opaque
    if cmd.remark is not None:
        d["remark"] = cmd.remark
    d["serializeTypeCurrentRPC"] = "JSON"
    d["version"] = cmd.version
    return d


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


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """Return the JSON header bytes of ``cmd`` exactly as fastjson would write them.

    Raises:
        InvalidCommandError: an int field outside int32, or a non-str ext field key/value.
    """
    ext = cmd.ext_fields
    if ext is not None and None in ext.values():
        ext = {k: v for k, v in ext.items() if v is not None}  # fastjson omits null map values
    d = _header_dict(cmd, ext)
    try:
        out = orjson.dumps(d, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        _check_int32(cmd)
        raise InvalidCommandError(f"ext_fields must map str to str: {exc}") from None
    if _NEEDS_FASTJSON_ESCAPE.search(out) is not None:
        out = _slow_encode(d)
    if ext:
        for k, v in ext.items():
            if type(k) is not str or type(v) is not str:
                raise InvalidCommandError(
                    f"ext_fields must map str to str, got {k!r}: {type(v).__name__}"
                )
    if not (INT32_MIN <= cmd.code <= INT32_MAX and INT32_MIN <= cmd.opaque <= INT32_MAX
            and INT32_MIN <= cmd.flag <= INT32_MAX and INT32_MIN <= cmd.version <= INT32_MAX):
        _check_int32(cmd)
    return out


# --------------------------------------------------------------------------- decoding


def _as_int(obj: dict[str, object], key: str, default: int | None) -> int | None:
    value = obj.get(key)
    if value is None:
        return default
    if type(value) is int:
        result = value
    elif isinstance(value, str):
        try:
            result = int(value.strip())
        except ValueError:
            raise MalformedFrameError(
                f"JSON header field {key!r} is not a number: {value[:40]!r}"
            ) from None
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
    return orjson.dumps(value).decode("utf-8")


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


def decode_json_header(
    header: bytes, body: bytes | None, serialize_type: SerializeType
) -> RemotingCommand:
    """Build a command from JSON header bytes.

    Raises:
        MalformedFrameError: invalid UTF-8 or JSON, not an object, or a field of a wrong type.
    """
    try:
        obj = orjson.loads(header)
    except orjson.JSONDecodeError:
        obj = _lenient_loads(header)
    if type(obj) is not dict:
        raise MalformedFrameError(f"JSON header must be an object, got {type(obj).__name__}")
    remark = obj.get("remark")
    if remark is not None and type(remark) is not str:
        remark = _stringify(remark)
    ext = obj.get("extFields")
    opaque = _as_int(obj, "opaque", None)
    return RemotingCommand(
        code=_as_int(obj, "code", 0),  # type: ignore[arg-type]
        language=_as_language(obj.get("language")),
        version=_as_int(obj, "version", 0),  # type: ignore[arg-type]
        opaque=next_opaque() if opaque is None else opaque,
        flag=_as_int(obj, "flag", 0),  # type: ignore[arg-type]
        remark=remark,
        ext_fields=None if ext is None else _as_ext_fields(ext),
        body=body,
        serialize_type=serialize_type,
    )


# --------------------------------------------------------------------------- lenient JSON

_MAX_DEPTH: Final = 64
_WS: Final = " \t\r\n"
_NUMBER: Final = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_BAREWORD: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_ESCAPES: Final = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f",
                   "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class _Lenient:
    """Recursive-descent reader for fastjson's relaxed JSON (single quotes, bare keys)."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def fail(self, what: str) -> MalformedFrameError:
        return MalformedFrameError(f"invalid JSON header at offset {self.i}: {what}")

    def ws(self) -> None:
        s, i = self.s, self.i
        while i < len(s) and s[i] in _WS:
            i += 1
        self.i = i

    def value(self, depth: int) -> object:
        if depth > _MAX_DEPTH:
            raise self.fail(f"nesting deeper than {_MAX_DEPTH}")
        self.ws()
        if self.i >= len(self.s):
            raise self.fail("unexpected end")
        ch = self.s[self.i]
        if ch == "{":
            return self.obj(depth)
        if ch == "[":
            return self.arr(depth)
        if ch in "\"'":
            return self.string()
        m = _NUMBER.match(self.s, self.i)
        if m:
            self.i = m.end()
            text = m.group()
            return float(text) if any(c in text for c in ".eE") else int(text)
        m = _BAREWORD.match(self.s, self.i)
        if m:
            self.i = m.end()
            word = m.group()
            if word in ("true", "false", "null"):
                return {"true": True, "false": False, "null": None}[word]
            raise self.fail(f"unexpected word {word[:20]!r}")
        raise self.fail(f"unexpected character {ch!r}")

    def string(self) -> str:
        quote = self.s[self.i]
        self.i += 1
        out: list[str] = []
        s = self.s
        while True:
            if self.i >= len(s):
                raise self.fail("unterminated string")
            ch = s[self.i]
            self.i += 1
            if ch == quote:
                return "".join(out)
            if ch != "\\":
                out.append(ch)
                continue
            if self.i >= len(s):
                raise self.fail("unterminated escape")
            esc = s[self.i]
            self.i += 1
            if esc == "u":
                digits = s[self.i : self.i + 4]
                if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                    raise self.fail("bad \\u escape")
                out.append(chr(int(digits, 16)))
                self.i += 4
            elif esc in _ESCAPES:
                out.append(_ESCAPES[esc])
            else:
                raise self.fail(f"bad escape \\{esc}")

    def key(self) -> str:
        self.ws()
        if self.i < len(self.s) and self.s[self.i] in "\"'":
            return self.string()
        m = _BAREWORD.match(self.s, self.i)
        if not m:
            raise self.fail("expected a key")
        self.i = m.end()
        return m.group()

    def expect(self, ch: str) -> None:
        self.ws()
        if self.i >= len(self.s) or self.s[self.i] != ch:
            raise self.fail(f"expected {ch!r}")
        self.i += 1

    def peek(self, ch: str) -> bool:
        self.ws()
        if self.i < len(self.s) and self.s[self.i] == ch:
            self.i += 1
            return True
        return False

    def obj(self, depth: int) -> dict[str, object]:
        self.i += 1
        result: dict[str, object] = {}
        if self.peek("}"):
            return result
        while True:
            k = self.key()
            self.expect(":")
            result[k] = self.value(depth + 1)
            if self.peek("}"):
                return result
            self.expect(",")

    def arr(self, depth: int) -> list[object]:
        self.i += 1
        result: list[object] = []
        if self.peek("]"):
            return result
        while True:
            result.append(self.value(depth + 1))
            if self.peek("]"):
                return result
            self.expect(",")


def _lenient_loads(header: bytes) -> object:
    try:
        text = header.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedFrameError(
            f"JSON header is not valid UTF-8 (byte {exc.start} of the header)"
        ) from None
    parser = _Lenient(text)
    result = parser.value(0)
    parser.ws()
    if parser.i != len(text):
        raise parser.fail("trailing characters after the JSON value")
    return result
