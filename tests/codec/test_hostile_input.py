"""Garbage in gives commands, None or a CodecError, and nothing else (h11's fuzz invariant)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codec import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    CodecError,
    FrameDecoder,
    RemotingCommand,
    SerializeType,
    decode_frame,
)
from tests.factories import (
    HTTP1_REQUEST,
    TLS_CLIENT_HELLO,
    binary_header,
    encode_all,
    json_frame,
    make_command,
    rocketmq_frame,
    small_request,
    split_at,
)

# Small limit: a mutated length prefix then fails fast instead of waiting for megabytes.
MAX_FRAME_BYTES = 64 * 1024

SEEDS = [
    encode_all([small_request(SerializeType.JSON), small_request(SerializeType.ROCKETMQ)]),
    encode_all([
        make_command(code=0, flag=FLAG_RESPONSE, remark="héllo ✓\n", ext_fields={"k": "v", "e": ""},
                     body=b"hello", serialize_type=st)
        for st in SerializeType
    ]),
    json_frame("{code:1,'opaque':2,extFields:{'a':5,'b':[true,null,{'c':1.5e3}]}}"),
    rocketmq_frame(binary_header(remark=b"OK", ext=[(b"key", b"value"), (b"k2", b"")])),
    encode_all([make_command(code=34, flag=FLAG_ONEWAY, body=b"{}"),
                make_command(remark="\x7f\u2028")]),
]


def drain(decoder: FrameDecoder) -> list[RemotingCommand]:
    """Return the commands the decoder yields until it needs data or raises a CodecError."""
    out: list[RemotingCommand] = []
    try:
        while (cmd := decoder.next_command()) is not None:
            assert isinstance(cmd, RemotingCommand)
            out.append(cmd)
    except CodecError:
        pass
    return out


def feed_all(chunks: list[bytes]) -> None:
    decoder = FrameDecoder(MAX_FRAME_BYTES)
    for chunk in chunks:
        decoder.feed(chunk)
        drain(decoder)


def try_decode_frame(data: bytes) -> None:
    try:
        assert isinstance(decode_frame(data), RemotingCommand)
    except CodecError:
        pass


mutations = st.lists(
    st.tuples(st.sampled_from(["flip", "set", "insert", "delete"]),
              st.integers(0, 2**16), st.integers(0, 255)),
    min_size=1, max_size=6,
)


def mutate(data: bytes, ops: list[tuple[str, int, int]]) -> bytes:
    buf = bytearray(data)
    for op, where, value in ops:
        i = where % (len(buf) + 1)
        if op == "insert":
            buf.insert(i, value)
        elif buf and i < len(buf):
            if op == "flip":
                buf[i] ^= 1 << (value % 8)
            elif op == "set":
                buf[i] = value
            else:
                del buf[i]
    return bytes(buf)


@settings(max_examples=10_000, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SEEDS), mutations, st.integers(0, 2**16))
def test_mutated_frames_give_only_commands_none_or_codec_errors(
    seed: bytes, ops: list[tuple[str, int, int]], cut: int
) -> None:
    data = mutate(seed, ops)
    feed_all(split_at(data, [cut % (len(data) + 1)]))
    try_decode_frame(data)


@given(st.binary(max_size=512), st.lists(st.integers(0, 512), max_size=8))
def test_random_bytes_give_only_commands_none_or_codec_errors(
    data: bytes, cuts: list[int]
) -> None:
    feed_all(split_at(data, cuts))


@given(st.binary(max_size=256))
def test_decode_frame_on_random_bytes_raises_only_codec_errors(data: bytes) -> None:
    try_decode_frame(data)


@given(st.binary(max_size=200), st.sampled_from([0, 1]), st.binary(max_size=8))
def test_random_headers_in_valid_frames_raise_only_codec_errors(
    header: bytes, type_byte: int, body: bytes
) -> None:
    frame = (json_frame if type_byte == 0 else rocketmq_frame)(header, body)
    feed_all([frame])
    try_decode_frame(frame)


@given(st.text(max_size=200))
def test_random_text_as_json_header_raises_only_codec_errors(text: str) -> None:
    try_decode_frame(json_frame(text))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=20,
)
header_objects = st.fixed_dictionaries(
    {},
    optional={
        "code": json_values, "opaque": json_values, "flag": json_values, "version": json_values,
        "language": json_values, "remark": json_values, "extFields": json_values,
    },
)


@given(st.one_of(header_objects, json_values))
def test_any_json_value_as_header_gives_a_command_or_codec_error(value: object) -> None:
    try_decode_frame(json_frame(json.dumps(value)))


def test_foreign_preambles_and_their_tails_raise_codec_errors() -> None:
    for preamble in (TLS_CLIENT_HELLO, HTTP1_REQUEST):
        for start in range(len(preamble)):
            feed_all([preamble[start:]])
            try_decode_frame(preamble[start:])
