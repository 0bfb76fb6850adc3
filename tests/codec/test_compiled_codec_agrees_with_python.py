"""The compiled fast path (codec/_speedups.c) gives exactly what its Python specification gives.

Each C function is held to the Python function it stands for, on the same inputs: the same
command (every field, and its type), the same bytes, or the same exception with the same
message. Inputs are what the wire carries (frames both encoders write), near misses (escapes,
odd JSON shapes, values out of range, wrong types) and arbitrary bytes. The extension is
imported and bound here directly, so this runs wherever it was built, also under
TRIO_REMOTING_PURE_PYTHON=1 (which only keeps the codec from using it).
"""

from __future__ import annotations

import importlib
import itertools
import struct
from types import ModuleType
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from codec import (
    CodecError,
    FrameDecoder,
    LanguageCode,
    RemotingCommand,
    ResponseCode,
    SerializeType,
    _command,
    _decoder,
    _encoder,
    _header_binary,
    _header_json,
)
from codec._codes import LANGUAGE_BY_NAME, LANGUAGE_BY_VALUE, LANGUAGE_BYTE


def _compiled() -> ModuleType:
    try:
        sp = importlib.import_module("codec._speedups")
    except ImportError:
        pytest.skip("the compiled fast path is not built here (no C compiler at install)")
    sp.bind_command(RemotingCommand)
    sp.bind_json(_header_json.python_decode_json_header, _header_json.python_encode_json_header,
                 LANGUAGE_BY_NAME, _header_json._LANGUAGE_NAMES, SerializeType.JSON)
    sp.bind_binary(_header_binary.python_decode_binary_header,
                   _header_binary.python_encode_binary_header, LANGUAGE_BY_VALUE,
                   LANGUAGE_BYTE, SerializeType.ROCKETMQ)
    sp.bind_frames(_encoder.python_encode_frame_parts, _encoder.LARGE_BODY_BYTES)
    sp.bind_decoder(FrameDecoder, CodecError, _decoder.python_next_command)
    return sp


@pytest.fixture(scope="module")
def sp() -> ModuleType:
    return _compiled()


FIELDS = ("code", "language", "version", "opaque", "flag", "remark", "ext_fields", "body",
          "serialize_type")


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """What a call gives: ("ok", a comparable value) or ("raised", (class, message))."""
    try:
        value = fn(*args)
    except Exception as exc:
        return "raised", (type(exc), str(exc))
    if isinstance(value, RemotingCommand):
        return "ok", tuple((getattr(value, f), type(getattr(value, f))) for f in FIELDS)
    return "ok", (value, type(value))


def fixed_outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """`outcome`, a header with no opaque taking the same fresh one every time."""
    counter = _command._opaque_counter
    try:
        _command._opaque_counter = itertools.count(1_000_000)
        return outcome(fn, *args)
    finally:
        _command._opaque_counter = counter


def same(c_fn: Any, py_fn: Any, *args: Any) -> None:
    assert fixed_outcome(c_fn, *args) == fixed_outcome(py_fn, *args)


# ------------------------------------------------------------------ strategies

TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "a", "topic", 'q"uote', "back\\slash", "tab\there", "\x7f", "\x85",
                     "\u2028", "\ud800", "é", "日本", "\x00", "line\nbreak"]),
)
INT = st.one_of(
    st.integers(-(2**31), 2**31 - 1), st.integers(-(2**40), 2**40),
    st.sampled_from([0, 1, -1, 2**15 - 1, 2**15, -(2**15) - 1, 2**31, -(2**31) - 1]),
)
ODD = st.sampled_from([True, False, 1.0, "7", None, ResponseCode.SYSTEM_ERROR, b"x"])
EXT = st.one_of(
    st.none(),
    st.dictionaries(TEXT, st.one_of(TEXT, st.none()), max_size=5),
    st.sampled_from([{}, {1: "x"}, {"k": 1}, {"k": None}, ["k"], "k"]),
)
BODY = st.one_of(st.none(), st.binary(max_size=40), st.sampled_from([b"", bytearray(b"ba"),
                                                                       memoryview(b"mv")]))
LANGUAGE = st.one_of(st.sampled_from(list(LanguageCode)), st.sampled_from([None, 3, 99, "GO",
                                                                          [1]]))


@st.composite
def commands(draw: st.DrawFn, odd: bool = True) -> RemotingCommand:
    values = {
        "code": draw(st.one_of(INT, ODD) if odd else INT),
        "language": draw(LANGUAGE if odd else st.sampled_from(list(LanguageCode))),
        "version": draw(st.one_of(INT, ODD) if odd else INT),
        "opaque": draw(st.one_of(INT, ODD) if odd else INT),
        "flag": draw(st.one_of(INT, ODD) if odd else INT),
        "remark": draw(st.one_of(st.none(), TEXT, st.sampled_from([5, b"r"]) if odd
                                 else st.none())),
        "ext_fields": draw(EXT),
        "body": draw(BODY),
        "serialize_type": draw(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ, 0, 1,
                                                2] if odd else list(SerializeType))),
    }
    return _command.python_new_command(**values)  # type: ignore[arg-type]


JSON_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), INT, st.floats(allow_nan=False), TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=6,
)
KEYS = st.sampled_from(["code", "opaque", "flag", "version", "language", "remark", "extFields",
                        "serializeTypeCurrentRPC", "other", "co\\u0064e"])


@st.composite
def json_headers(draw: st.DrawFn) -> bytes:
    """JSON headers near the fast path's shape: its keys with right or wrong values, spaces."""
    obj: dict[str, Any] = {
        "code": draw(INT), "flag": draw(st.sampled_from([0, 1, 2])),
        "language": draw(st.sampled_from(["JAVA", "PYTHON", "GO", "KLINGON"])),
        "opaque": draw(INT), "version": draw(INT),
    }
    for _ in range(draw(st.integers(0, 3))):
        key = draw(KEYS)
        obj[key] = draw(st.one_of(JSON_VALUE, EXT.filter(lambda e: not isinstance(e, list))))
    for key in draw(st.lists(st.sampled_from(sorted(obj)), max_size=2)):
        obj.pop(key, None)
    try:
        text = orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        text = b"{}"
    how = draw(st.integers(0, 4))
    if how == 1:  # spaces where JSON allows them
        text = text.replace(b",", b" ,\n ").replace(b":", b" : ")
    elif how == 2:  # a key twice
        text = text[:-1] + b',"code":5}'
    elif how == 3:  # cut, or trailing bytes
        text = text[: draw(st.integers(0, len(text)))] + draw(st.binary(max_size=3))
    return text


# ------------------------------------------------------------------ the properties

SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(cmd=commands())
def test_encoders_agree(sp: ModuleType, cmd: RemotingCommand) -> None:
    same(sp.encode_json_header, _header_json.python_encode_json_header, cmd)
    same(sp.encode_binary_header, _header_binary.python_encode_binary_header, cmd)
    same(sp.encode_frame_parts, _encoder.python_encode_frame_parts, cmd)
    for limit, header_limit in ((60, 0xFFFFFF), (2**31 + 3, 10), (2**40, 2**40)):
        same(sp.encode_frame_parts, _encoder.python_encode_frame_parts, cmd, limit,
             header_limit)


@SETTINGS
@given(cmd=commands(odd=False), body=st.one_of(st.none(), st.binary(max_size=20)))
def test_decoders_agree_on_what_the_encoders_write(sp: ModuleType, cmd: RemotingCommand,
                                                   body: bytes | None) -> None:
    for encode, decode, py_decode, serialize_type in (
        (_header_json.python_encode_json_header, sp.decode_json_header,
         _header_json.python_decode_json_header, SerializeType.JSON),
        (_header_binary.python_encode_binary_header, sp.decode_binary_header,
         _header_binary.python_decode_binary_header, SerializeType.ROCKETMQ),
    ):
        try:
            header = encode(cmd)
        except Exception:
            continue
        same(decode, py_decode, header, body, serialize_type)
        # and every cut of it (a header ends where its length says)
        for cut in (0, 1, len(header) // 2, len(header) - 1):
            same(decode, py_decode, header[:cut], body, serialize_type)


@SETTINGS
@given(header=json_headers(), body=st.one_of(st.none(), st.binary(max_size=8)))
@example(header=b'{"code":1,"flag":0,"language":"JAVA","opaque":-0,"version":0}', body=None)
@example(header=b'{"code":01,"flag":0,"language":"JAVA","opaque":1,"version":0}', body=None)
@example(header=b'{"code":1,"flag":0,"language":"JAVA","opaque":1,"version":0,"\xff":1}',
         body=None)
@example(header=b'{"code":1,"flag":0,"language":"JAVA","opaque":1,"version":0,'
                b'"extFields":{"a":"1","a":"2"}}', body=None)
@example(header=b'{"code":1e2,"flag":0,"language":"JAVA","opaque":1,"version":0}', body=None)
@example(header=b' {"code":1,"flag":0,"language":"JAVA","opaque":1,"version":0} ', body=b"x")
def test_json_decoders_agree_on_near_misses(sp: ModuleType, header: bytes,
                                            body: bytes | None) -> None:
    same(sp.decode_json_header, _header_json.python_decode_json_header, header, body,
         SerializeType.JSON)


@SETTINGS
@given(header=st.binary(max_size=64), body=st.one_of(st.none(), st.binary(max_size=4)))
def test_decoders_agree_on_arbitrary_bytes(sp: ModuleType, header: bytes,
                                           body: bytes | None) -> None:
    same(sp.decode_json_header, _header_json.python_decode_json_header, header, body,
         SerializeType.JSON)
    same(sp.decode_binary_header, _header_binary.python_decode_binary_header, header, body,
         SerializeType.ROCKETMQ)


@SETTINGS
@given(values=st.tuples(INT, LANGUAGE, INT, INT, INT, TEXT, EXT, BODY, st.sampled_from(
    list(SerializeType))))
def test_new_command_agrees(sp: ModuleType, values: tuple[Any, ...]) -> None:
    same(sp.new_command, _command.python_new_command, *values)


def frame_of(cmd: RemotingCommand) -> bytes:
    parts = _encoder.python_encode_frame_parts(cmd)
    return parts if isinstance(parts, bytes) else b"".join(parts)


PREFIX = struct.Struct(">iI")
FOREIGN = [b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"GET / HTTP/1.1\r\n",
           b"POST /x HTTP/1.1\r\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"]
# UTF-8 of "é" (in the remark and an ext value below) and bytes that are not UTF-8 in its place
E_ACUTE = "é".encode()
EXT_WITH_E_ACUTE: list[dict[str, str | None] | None] = [
    None, {"k": "é"}, {"topic": "T", "é": "v"}]
NOT_UTF8 = [b"\xff\xfe", b"\xc3\x28", b"\xed\xa0", b"\xc3\xa9"[:1] + b"\x80"]


@st.composite
def hostile_frames(draw: st.DrawFn) -> bytes:
    """One frame as a hostile or broken peer sends it: a bad or huge length prefix, a header
    length past the frame or over the limit, an unknown serialize type, another protocol,
    header strings that are not UTF-8, or a frame cut short."""
    cmd = _command.python_new_command(
        draw(st.integers(-(2**15), 2**15 - 1)), LanguageCode.JAVA, 0,
        draw(st.integers(0, 2**31 - 1)), draw(st.integers(0, 3)),
        draw(st.sampled_from([None, "é", "réé"])),
        draw(st.sampled_from(EXT_WITH_E_ACUTE)),
        draw(st.one_of(st.none(), st.binary(max_size=16))),
        draw(st.sampled_from(list(SerializeType))))
    frame = frame_of(cmd)
    length, word = PREFIX.unpack_from(frame)
    kind = draw(st.integers(0, 6))
    if kind == 0:  # the length prefix: negative, under 4, at or past a limit, the largest
        length = draw(st.one_of(st.sampled_from([-(2**31), -1, 0, 3, 4, 2**31 - 1, 2**31 - 5,
                                                 2**31 - 4, 196, 197, 36, 37]),
                                st.integers(-(2**31), 2**31 - 1)))
        return PREFIX.pack(length, word) + frame[8:]
    if kind == 1:  # the header length: past the frame, at its end, huge, over max_header_bytes
        header_length = draw(st.one_of(st.sampled_from([length - 4, length - 3, 0xFFFFFF, 11,
                                                        65, 64 << 10, (64 << 10) + 1]),
                                       st.integers(0, 0xFFFFFF)))
        return PREFIX.pack(length, (word & 0xFF000000) | header_length) + frame[8:]
    if kind == 2:  # the serialize type byte
        st_byte = draw(st.integers(0, 255))
        return PREFIX.pack(length, (st_byte << 24) | (word & 0xFFFFFF)) + frame[8:]
    if kind == 3:  # another protocol on the port
        return draw(st.sampled_from(FOREIGN))
    if kind == 4 and E_ACUTE in frame:  # a header string that is not UTF-8 (same length)
        at = frame.index(E_ACUTE, 8)
        return frame[:at] + draw(st.sampled_from(NOT_UTF8)) + frame[at + 2:]
    if kind == 5:  # cut short: the stream ends (or goes on) mid-frame
        return frame[: draw(st.integers(0, len(frame) - 1))]
    return frame


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """Frames both encoders write, now and then a damaged one, a hostile one or garbage, and
    how the stream is cut into reads."""
    parts = []
    for _ in range(draw(st.integers(1, 5))):
        damage = draw(st.integers(0, 7))
        if damage == 3:
            parts.append(draw(hostile_frames()))
            continue
        try:
            frame = frame_of(draw(commands(odd=False)))
        except Exception:
            continue
        if damage == 1:  # a byte changed (a length, the type, the header)
            at = draw(st.integers(0, len(frame) - 1))
            frame = frame[:at] + bytes([draw(st.integers(0, 255))]) + frame[at + 1:]
        elif damage == 2:
            frame = draw(st.binary(min_size=1, max_size=12))
        parts.append(frame)
    data = b"".join(parts)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=4)))
    return data, cuts


LIMITS = st.sampled_from([(16 << 20, 64 << 10), (200, 64), (40, 10), (8, 0),
                          (2**31 + 4, 0xFFFFFF), (2**70, 2**70)])


def deliver(decoder: FrameDecoder, chunk: bytes, as_bytearray: bool, in_place: bool) -> None:
    """Hand a read to the decoder: fed, or (``in_place``, while a frame is missing bytes)
    received into `get_buffer` memory as a large frame is, the remainder fed."""
    view = memoryview(chunk)
    while in_place and view and decoder.missing_bytes:
        memory = decoder.get_buffer()
        n = min(len(memory), len(view))
        memory[:n] = view[:n]
        memory.release()
        decoder.buffer_updated(n)
        view = view[n:]
    if view:
        decoder.feed(bytearray(view) if as_bytearray else bytes(view))


@SETTINGS
@given(stream=streams(), limits=LIMITS, as_bytearray=st.booleans(), in_place=st.booleans())
@example(stream=(PREFIX.pack(2**31 - 1, 0) + b"{}", []), limits=(2**70, 2**70),
         as_bytearray=False, in_place=False)
@example(stream=(PREFIX.pack(-5, 0) + b"{}", []), limits=(16 << 20, 64 << 10),
         as_bytearray=False, in_place=False)
@example(stream=(PREFIX.pack(12, 9) + b"{}", [5]), limits=(16 << 20, 64 << 10),
         as_bytearray=True, in_place=False)
def test_frame_decoders_agree(sp: ModuleType, stream: tuple[bytes, list[int]],
                              limits: tuple[int, int], as_bytearray: bool,
                              in_place: bool) -> None:
    """The compiled `FrameDecoder.next_command` and the Python method, on the same stream
    delivered the same way, give the same commands and the same errors (raised again on every
    call after), and hold the same bytes; the stream may end mid-frame."""
    data, cuts = stream
    compiled, python = FrameDecoder(*limits), FrameDecoder(*limits)
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        chunk = data[start:end]
        assert compiled.missing_bytes == python.missing_bytes
        for decoder in (compiled, python):
            deliver(decoder, chunk, as_bytearray, in_place)
        for _ in range(10):
            got = fixed_outcome(sp.next_command, compiled)
            assert got == fixed_outcome(_decoder.python_next_command, python)
            assert compiled.buffered_bytes == python.buffered_bytes
            if got[0] == "raised":  # sticky: the same error, the same object, every call
                first = compiled._error
                assert first is not None and isinstance(first, CodecError)
                assert fixed_outcome(sp.next_command, compiled) == got
                assert compiled._error is first
                return
            if got[1][0] is None:
                break
