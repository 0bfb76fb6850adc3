"""FrameDecoder: chunking independence, limits checked on the prefix, and every rejection."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codec import (
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_MAX_HEADER_BYTES,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    CodecError,
    ForeignProtocolError,
    FrameDecoder,
    FrameTooLargeError,
    HeaderTooLargeError,
    MalformedFrameError,
    RemotingCommand,
    SerializeType,
    UnsupportedSerializeTypeError,
    decode_frame,
    encode_frame,
    encode_frame_parts,
    sniff_foreign_protocol,
)
from tests.factories import (
    HTTP1_REQUEST,
    HTTP2_PREFACE,
    TLS_CLIENT_HELLO,
    binary_header,
    bytewise,
    command_fields,
    commands,
    decode_chunks,
    encode_all,
    json_frame,
    make_command,
    raw_frame,
    rocketmq_frame,
    small_request,
    split_at,
)

STREAM = [
    small_request(SerializeType.JSON),
    make_command(code=0, flag=FLAG_RESPONSE, remark="OK", serialize_type=SerializeType.ROCKETMQ),
    make_command(code=34, flag=FLAG_ONEWAY, body=b"{}"),
    make_command(code=105, ext_fields={"topic": "T"}, serialize_type=SerializeType.ROCKETMQ,
                 body=b"x" * 1000),
]
STREAM_BYTES = encode_all(STREAM)
EXPECTED = [command_fields(decode_frame(encode_frame(c))) for c in STREAM]


def fields(commands: list[RemotingCommand]) -> list[dict[str, object]]:
    return [command_fields(c) for c in commands]


# --------------------------------------------------------------------------- chunking


def test_decoder_yields_every_frame_of_a_stream_fed_whole() -> None:
    commands, decoder = decode_chunks([STREAM_BYTES])
    assert fields(commands) == EXPECTED
    assert decoder.buffered_bytes == 0


def test_decoder_yields_the_same_commands_fed_one_byte_at_a_time() -> None:
    commands, decoder = decode_chunks(bytewise(STREAM_BYTES))
    assert fields(commands) == EXPECTED
    assert decoder.buffered_bytes == 0


@given(st.lists(st.integers(0, len(STREAM_BYTES)), max_size=40))
def test_decoder_result_does_not_depend_on_chunking(cuts: list[int]) -> None:
    commands, decoder = decode_chunks(split_at(STREAM_BYTES, cuts))
    assert fields(commands) == EXPECTED
    assert decoder.buffered_bytes == 0


@given(st.lists(commands(), min_size=1, max_size=5), st.data())
def test_decoder_splits_any_commands_at_any_points(
    cmds: list[RemotingCommand], data: st.DataObject
) -> None:
    stream = encode_all(cmds)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=20))
    expected = [command_fields(decode_frame(encode_frame(c))) for c in cmds]
    chunked, _ = decode_chunks(split_at(stream, cuts))
    whole, _ = decode_chunks([stream])
    assert fields(chunked) == expected
    assert fields(whole) == expected


@given(st.integers(1, len(encode_frame(STREAM[0])) - 1))
def test_decoder_returns_none_for_trailing_partial_frame(keep: int) -> None:
    partial = encode_frame(STREAM[0])[:keep]
    decoder = FrameDecoder()
    decoder.feed(encode_frame(STREAM[1]) + partial)
    assert decoder.next_command() is not None
    assert decoder.next_command() is None
    assert decoder.next_command() is None  # asking again changes nothing
    assert decoder.buffered_bytes == keep


def test_decoder_on_empty_input_needs_more_data() -> None:
    decoder = FrameDecoder()
    assert decoder.next_command() is None
    decoder.feed(b"")
    assert decoder.next_command() is None
    assert decoder.buffered_bytes == 0


def test_decoder_accepts_bytearray_and_memoryview_chunks() -> None:
    frame = encode_frame(STREAM[0])
    commands, _ = decode_chunks([bytearray(frame[:10]), memoryview(frame)[10:20], frame[20:]])
    assert fields(commands) == EXPECTED[:1]


def test_decoder_copies_mutable_chunks() -> None:
    # The caller may reuse its receive buffer right after feed().
    frame = encode_frame(STREAM[0])
    for split in (0, 10):
        decoder = FrameDecoder()
        decoder.feed(frame[:split])
        chunk = bytearray(frame[split:])
        decoder.feed(chunk)
        chunk[:] = bytes(len(chunk))
        view_source = bytearray(frame)
        decoder2 = FrameDecoder()
        decoder2.feed(memoryview(view_source))
        view_source[:] = bytes(len(view_source))
        first, second = decoder.next_command(), decoder2.next_command()
        assert first is not None and second is not None
        assert fields([first, second]) == EXPECTED[:1] * 2


def test_decoder_handles_a_long_stream_of_small_partial_chunks() -> None:
    # Crosses the buffer compaction threshold many times.
    cmds = [make_command(opaque=i, body=bytes([i % 256]) * 100) for i in range(2000)]
    stream = encode_all(cmds)
    commands, decoder = decode_chunks(split_at(stream, range(0, len(stream), 777)))
    assert [c.opaque for c in commands] == list(range(2000))
    assert decoder.buffered_bytes == 0


# --------------------------------------------------------------------------- size limits


def test_decoder_rejects_oversize_frame_before_body() -> None:
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">i", 1 << 30))  # only the length prefix of a 1 GiB frame
    with pytest.raises(FrameTooLargeError) as info:
        decoder.next_command()
    assert info.value.length == (1 << 30) + 4
    assert info.value.limit == DEFAULT_MAX_FRAME_BYTES
    assert decoder.buffered_bytes == 4
    assert "max_frame_bytes" in str(info.value)


def test_decoder_limit_counts_the_length_field_itself() -> None:
    # Netty compares length + 4 with the maximum: 16 MiB - 4 is the largest length accepted.
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">iI", DEFAULT_MAX_FRAME_BYTES - 4, 0))
    assert decoder.next_command() is None
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">i", DEFAULT_MAX_FRAME_BYTES - 3))
    with pytest.raises(FrameTooLargeError):
        decoder.next_command()


def test_decoder_accepts_a_frame_exactly_at_a_custom_limit() -> None:
    frame = encode_frame(make_command(serialize_type=SerializeType.ROCKETMQ, body=b"x" * 10))
    commands, _ = decode_chunks([frame], max_frame_bytes=len(frame))
    assert len(commands) == 1
    with pytest.raises(FrameTooLargeError) as info:
        decode_chunks([frame], max_frame_bytes=len(frame) - 1)
    assert (info.value.length, info.value.limit) == (len(frame), len(frame) - 1)


def test_decoder_refuses_a_limit_below_the_prefix_size() -> None:
    with pytest.raises(ValueError, match="at least 8"):
        FrameDecoder(max_frame_bytes=7)


@pytest.mark.parametrize("serialize_type", [0, 1])
def test_decoder_rejects_a_header_over_the_limit_on_the_prefix(serialize_type: int) -> None:
    """Parsing a header costs time per byte: a long one is refused before it is buffered."""
    header_length = DEFAULT_MAX_HEADER_BYTES + 1
    decoder = FrameDecoder()
    decoder.feed(raw_frame(b"", serialize_type=serialize_type, length=4 + header_length,
                           header_length=header_length))  # the 8-byte prefix alone
    assert decoder.missing_bytes == 0  # no memory is set aside for it either
    with pytest.raises(HeaderTooLargeError) as info:
        decoder.next_command()
    assert (info.value.length, info.value.limit) == (header_length, DEFAULT_MAX_HEADER_BYTES)
    assert "max_header_bytes" in str(info.value)
    assert decoder.buffered_bytes == 8
    with pytest.raises(HeaderTooLargeError):  # sticky, as every CodecError
        decoder.next_command()


def test_decoder_accepts_a_header_exactly_at_a_custom_limit() -> None:
    cmd = make_command(ext_fields={"k": "v" * 100}, body=b"x" * 1000)
    frame = encode_frame(cmd)
    header_length = struct.unpack_from(">I", frame, 4)[0] & 0xFFFFFF
    commands, _ = decode_chunks([frame[:40], frame[40:]])
    decoder = FrameDecoder(max_header_bytes=header_length)
    decoder.feed(frame)
    assert command_fields(decoder.next_command()) == command_fields(commands[0])  # type: ignore[arg-type]
    decoder = FrameDecoder(max_header_bytes=header_length - 1)
    decoder.feed(frame)
    with pytest.raises(HeaderTooLargeError):
        decoder.next_command()


def test_a_header_over_the_peers_limit_is_refused_before_it_is_sent() -> None:
    cmd = make_command(ext_fields={"k": "v" * 100})
    header = encode_frame(cmd)[8:]
    assert encode_frame_parts(cmd, header_limit=len(header))
    with pytest.raises(HeaderTooLargeError, match="not sent"):
        encode_frame_parts(cmd, header_limit=len(header) - 1)


@pytest.mark.parametrize(("limit", "error"), [(-1, ValueError), ("64K", TypeError),
                                              (True, TypeError)])
def test_a_header_limit_that_is_not_a_size_is_refused(limit: object,
                                                       error: type[Exception]) -> None:
    with pytest.raises(error, match="max_header_bytes"):
        FrameDecoder(max_header_bytes=limit)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- malformed


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 1, 3])
def test_decoder_rejects_length_below_four(length: int) -> None:
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">i", length))
    with pytest.raises(MalformedFrameError, match=f"frame length {length} is invalid"):
        decoder.next_command()


def test_decoder_rejects_header_length_beyond_frame_before_body() -> None:
    frame = raw_frame(b"{}" * 200, length=120, header_length=300)
    decoder = FrameDecoder()
    decoder.feed(frame[:8])
    with pytest.raises(MalformedFrameError, match="header length 300 exceeds frame length 120"):
        decoder.next_command()


def test_decode_frame_rejects_header_length_beyond_frame() -> None:
    frame = raw_frame(b"x" * 116, length=120, header_length=300)
    with pytest.raises(MalformedFrameError, match="header length 300 exceeds frame length 120"):
        decode_frame(frame)


@pytest.mark.parametrize("type_byte", [2, 0x7F, 0xFF])
def test_decoder_rejects_unknown_serialize_type(type_byte: int) -> None:
    frame = raw_frame(b"{}", serialize_type=type_byte)
    decoder = FrameDecoder()
    decoder.feed(frame)
    with pytest.raises(UnsupportedSerializeTypeError) as info:
        decoder.next_command()
    assert info.value.value == type_byte
    assert f"serialize type {type_byte}" in str(info.value)
    with pytest.raises(UnsupportedSerializeTypeError):
        decode_frame(frame)


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"\x00" * 20,  # one byte short of the 21-byte minimum
        binary_header(remark=b"abc", remark_length=50),  # remark past the header
        binary_header(remark_length=-1),
        binary_header(ext=[(b"k", b"v")], ext_length=100),  # ext map past the header
        binary_header(ext_length=-5),
        binary_header(ext=[(b"k", b"v")], ext_length=3),  # entry cut inside the map
        binary_header(ext=[(b"k", b"v")], ext_length=9),  # value cut inside the map
        binary_header(ext=[(b"k", b"v")])[:-1],  # last value byte missing
        binary_header(ext=[(b"k", b"v")]).replace(b"\x00\x01k", b"\xff\xffk"),  # key len -1
        binary_header(ext=[(b"k", b"v")]).replace(b"\x00\x00\x00\x01v", b"\x80\x00\x00\x01v"),
    ],
    ids=["empty", "20-bytes", "remark-overrun", "remark-negative", "ext-overrun",
         "ext-negative", "entry-cut", "value-cut", "value-truncated", "key-negative",
         "value-negative"],
)
def test_decoder_rejects_truncated_or_inconsistent_rocketmq_header(header: bytes) -> None:
    frame = rocketmq_frame(header)
    with pytest.raises(MalformedFrameError, match="ROCKETMQ header"):
        decode_chunks([frame])
    with pytest.raises(MalformedFrameError, match="ROCKETMQ header"):
        decode_frame(frame)


@pytest.mark.parametrize(
    "header",
    [binary_header(remark=b"\xff"), binary_header(ext=[(b"\xc3", b"v")]),
     binary_header(ext=[(b"k", b"\xed\xa0\x80")])],  # the last one is an encoded surrogate
    ids=["remark", "key", "value"],
)
def test_decoder_rejects_invalid_utf8_in_rocketmq_header(header: bytes) -> None:
    with pytest.raises(MalformedFrameError, match="not valid UTF-8"):
        decode_chunks([rocketmq_frame(header)])


def test_rocketmq_header_trailing_bytes_are_ignored_like_java() -> None:
    header = binary_header(code=7, ext=[(b"k", b"v")]) + b"\x00\x01"
    cmd = decode_frame(rocketmq_frame(header, b"body"))
    assert (cmd.code, cmd.ext_fields, cmd.body) == (7, {"k": "v"}, b"body")


def test_rocketmq_header_keeps_the_last_of_duplicated_keys_like_java() -> None:
    header = binary_header(ext=[(b"k", b"first"), (b"k", b"last")])
    assert decode_frame(rocketmq_frame(header)).ext_fields == {"k": "last"}


def test_rocketmq_unknown_language_byte_decodes_as_none() -> None:
    assert decode_frame(rocketmq_frame(binary_header(language=200))).language is None


def test_decoder_rejects_invalid_utf8_in_json_header() -> None:
    with pytest.raises(MalformedFrameError, match="UTF-8"):
        decode_chunks([json_frame(b'{"remark":"\xc3"}')])


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00\x00\x00", encode_frame(make_command())[:-1]],
    ids=["empty", "3-bytes", "one-short"],
)
def test_decode_frame_rejects_truncated_frames(data: bytes) -> None:
    with pytest.raises(MalformedFrameError):
        decode_frame(data)


def test_decode_frame_rejects_trailing_bytes() -> None:
    with pytest.raises(MalformedFrameError, match="bytes in all"):
        decode_frame(encode_frame(make_command()) + b"\x00")


def test_decode_frame_accepts_bytearray_and_memoryview() -> None:
    frame = encode_frame(STREAM[0])
    assert command_fields(decode_frame(bytearray(frame))) == EXPECTED[0]
    assert command_fields(decode_frame(memoryview(frame))) == EXPECTED[0]


# --------------------------------------------------------------------------- foreign protocols


@pytest.mark.parametrize(
    ("preamble", "protocol"),
    [(TLS_CLIENT_HELLO, "TLS"), (HTTP2_PREFACE, "HTTP/2"), (HTTP1_REQUEST, "HTTP/1"),
     (b"POST /x HTTP/1.0\r\n", "HTTP/1"), (b"HTTP/1.1 200 OK\r\n", "HTTP/1")],
    ids=["tls", "http2", "http1-get", "http1-post", "http1-response"],
)
def test_decoder_names_a_foreign_protocol(preamble: bytes, protocol: str) -> None:
    decoder = FrameDecoder()
    decoder.feed(preamble[:4])  # detected from the length prefix alone
    with pytest.raises(ForeignProtocolError) as info:
        decoder.next_command()
    assert info.value.protocol == protocol
    assert f"peer sent a {protocol} preamble" in str(info.value)
    assert isinstance(info.value, MalformedFrameError)
    with pytest.raises(ForeignProtocolError):
        decode_frame(preamble)
    sniffed = sniff_foreign_protocol(preamble)
    assert sniffed is not None
    assert sniffed.protocol == protocol


def test_foreign_protocol_is_named_even_with_a_huge_frame_limit() -> None:
    decoder = FrameDecoder(max_frame_bytes=2**31)
    decoder.feed(HTTP1_REQUEST)
    with pytest.raises(ForeignProtocolError) as info:
        decoder.next_command()
    assert info.value.protocol == "HTTP/1"


def test_sniffing_ignores_remoting_frames() -> None:
    for cmd in STREAM:
        assert sniff_foreign_protocol(encode_frame(cmd)) is None


# --------------------------------------------------------------------------- after an error


@pytest.mark.parametrize(
    "bad",
    [struct.pack(">i", -1), raw_frame(b"{}", serialize_type=9), TLS_CLIENT_HELLO,
     json_frame("[1]"), rocketmq_frame(b"\x00" * 5)],
    ids=["length", "serialize-type", "tls", "json", "binary"],
)
def test_decoder_keeps_raising_after_an_error(bad: bytes) -> None:
    decoder = FrameDecoder()
    decoder.feed(bad)
    with pytest.raises(CodecError) as first:
        decoder.next_command()
    decoder.feed(encode_frame(make_command()))
    for _ in range(3):
        with pytest.raises(CodecError) as again:
            decoder.next_command()
        assert again.value is first.value


def test_decoder_raises_only_after_delivering_the_good_frames_before_it() -> None:
    good = encode_frame(make_command(opaque=5))
    decoder = FrameDecoder()
    decoder.feed(good + good + struct.pack(">i", 2))
    assert decoder.next_command().opaque == 5  # type: ignore[union-attr]
    assert decoder.next_command().opaque == 5  # type: ignore[union-attr]
    with pytest.raises(MalformedFrameError):
        decoder.next_command()


@pytest.mark.parametrize("data", [12, "abc", None])
def test_data_that_is_not_bytes_is_a_type_error(data: object) -> None:
    # bytes(12) is twelve zero bytes: an int was read as an (invalid) frame
    with pytest.raises(TypeError, match="data must be bytes"):
        decode_frame(data)  # type: ignore[arg-type]
    decoder = FrameDecoder()
    with pytest.raises(TypeError, match="data must be bytes"):
        decoder.feed(data)  # type: ignore[arg-type]
    assert decoder.buffered_bytes == 0


@pytest.mark.parametrize("limit", ["1M", 1e9, True])
def test_a_frame_limit_that_is_not_an_int_is_a_type_error(limit: object) -> None:
    with pytest.raises(TypeError, match="max_frame_bytes must be an int"):
        FrameDecoder(limit)  # type: ignore[arg-type]
