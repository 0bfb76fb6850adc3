"""A lenient JSON reader for what strict JSON rejects but fastjson writes or accepts in
practice (single quotes, unquoted keys, numbers as keys: ``{0:"127.0.0.1:10911"}``): what
`decode_json_header` falls back to, and how RocketMQ clients read a name server's bodies."""

from __future__ import annotations

import re
from typing import Final

from ._errors import MalformedFrameError

__all__ = ["lenient_loads"]

# Deeper nesting is refused: recursion per level, so a hostile header of brackets would
# otherwise reach Python's recursion limit (a RecursionError is not a CodecError). No header
# of RocketMQ's nests beyond two.
_MAX_DEPTH: Final = 64
_WS: Final = " \t\r\n"
_NUMBER: Final = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_SPACES: Final = re.compile(r"[ \t\r\n]*")
_BAREWORD: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
# fastjson's escapes: JSON's, plus \' (inside single quotes) and \v
_ESCAPES: Final = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f",
                   "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _number(text: str) -> int | float:
    """Convert a JSON number as orjson does: int64 stays int, anything wider becomes a float.

    Never ``int()`` of a long digit string: past 4300 digits Python raises ValueError.
    """
    if len(text) <= 20 and "." not in text and "e" not in text and "E" not in text:
        n = int(text)
        if _INT64_MIN <= n <= _INT64_MAX:
            return n
    return float(text)


_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


class _Lenient:
    """Recursive-descent reader for fastjson's relaxed JSON (single quotes, bare keys)."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def fail(self, what: str) -> MalformedFrameError:
        return MalformedFrameError(f"invalid JSON header at offset {self.i}: {what}")

    def ws(self) -> None:
        s, i = self.s, self.i
        if i < len(s) and s[i] in _WS:  # most tokens follow one another directly
            m = _SPACES.match(s, i)
            assert m is not None
            self.i = m.end()

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
            return _number(m.group())
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
        start = self.i
        out: list[str] = []
        s = self.s
        while True:
            if self.i >= len(s):
                raise self.fail("unterminated string")
            ch = s[self.i]
            self.i += 1
            if ch == quote:
                text = "".join(out)
                if "\\u" in s[start:self.i]:  # \uD83D\uDE00 is one character, as in JSON
                    text = text.encode("utf-16-le", "surrogatepass").decode(
                        "utf-16-le", "surrogatepass")
                return text
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
        m = _BAREWORD.match(self.s, self.i) or _NUMBER.match(self.s, self.i)
        if not m:
            raise self.fail("expected a key")
        self.i = m.end()
        return m.group()  # a number as written: fastjson writes Map<Long, V> keys bare

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


def lenient_loads(header: bytes) -> object:
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
