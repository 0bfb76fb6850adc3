"""encode_frame_parts (large bodies left uncopied) and the decoder's in-place receive API."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codec import (
    LARGE_BODY_BYTES,
    FrameDecoder,
    FrameTooLargeError,
    InvalidCommandError,
    MalformedFrameError,
    RemotingCommand,
    SerializeType,
    UnsupportedSerializeTypeError,
    encode_frame,
    encode_frame_parts,
)
from tests.factories import (
    command_fields,
    commands,
    decode_chunks,
    encode_all,
    make_command,
    raw_frame,
    split_at,
)

EDGES = [0, 1, 1000, LARGE_BODY_BYTES - 1, LARGE_BODY_BYTES, LARGE_BODY_BYTES + 1, 1 << 20]


def joined(frame: bytes | tuple[bytes, bytes]) -> bytes:
    return frame if isinstance(frame, bytes) else b"".join(frame)


def big_command(size: int, serialize_type: SerializeType, opaque: int = 1) -> RemotingCommand:
    body = bytes(i % 251 for i in range(size)) if size else None
    return make_command(opaque=opaque, body=body, serialize_type=serialize_type,
                        ext_fields={"k": "v"}, remark="r")


# --------------------------------------------------------------------------- encoder


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize("size", EDGES)
def test_parts_concatenate_to_encode_frame(size: int, serialize_type: SerializeType) -> None:
    cmd = big_command(size, serialize_type)
    parts = encode_frame_parts(cmd)
    assert joined(parts) == encode_frame(cmd)
    if size >= LARGE_BODY_BYTES:
        assert isinstance(parts, tuple)
        head, body = parts
        assert body is cmd.body  # not copied
        assert len(head) == len(encode_frame(cmd)) - size
    else:
        assert type(parts) is bytes


@given(cmd=commands(), extra=st.sampled_from([0, LARGE_BODY_BYTES - 300, LARGE_BODY_BYTES]))
def test_parts_equal_encode_frame_for_any_command(cmd: RemotingCommand, extra: int) -> None:
    if extra:
        cmd.body = (cmd.body or b"") + b"\x07" * extra
    assert joined(encode_frame_parts(cmd)) == encode_frame(cmd)


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_a_mutable_large_body_is_copied(kind: type) -> None:
    """Changing a bytearray body after encoding cannot change the frame."""
    source = bytearray(b"a" * (LARGE_BODY_BYTES + 10))
    cmd = make_command(body=kind(source))
    frame = encode_frame_parts(cmd)
    assert type(frame) is bytes
    expected = encode_frame(make_command(body=bytes(source)))
    source[:3] = b"zzz"
    assert frame == expected


@pytest.mark.parametrize("view", [
    memoryview(array("i", range(8))),  # items of 4 bytes: len() counts 8, the body is 32
    memoryview(bytes(range(24))).cast("B", (4, 6)),  # two dimensions: len() counts rows
    memoryview(bytes(range(24)))[::2],  # strided: not one run of bytes
], ids=["wide-items", "two-dimensions", "strided"])
def test_a_memoryview_body_travels_as_its_bytes(view: memoryview) -> None:
    # The length field counted len(view) while the frame carried every byte: the peer
    # read a truncated body and then garbage as the next frame.
    frames = encode_frame(make_command(code=1, body=view)) + encode_frame(make_command(code=2))

    commands, decoder = decode_chunks([frames])

    assert [c.code for c in commands] == [1, 2]
    assert commands[0].body == view.tobytes()
    assert decoder.buffered_bytes == 0


@pytest.mark.parametrize("encode", [encode_frame, encode_frame_parts])
def test_parts_raise_what_encode_frame_raises(encode: object) -> None:
    with pytest.raises(InvalidCommandError, match="body must be bytes"):
        encode(make_command(body="text"))  # type: ignore[operator]
    with pytest.raises(InvalidCommandError, match="serialize_type"):
        encode(make_command(serialize_type=9))  # type: ignore[operator]


# --------------------------------------------------------------------------- decoder


def decode_in_place(stream: bytes, cuts: list[int], take: list[bool],
                    memory: bytearray | None = None) -> tuple[list[RemotingCommand],
                                                              FrameDecoder]:
    """Decode ``stream`` mixing feed() and get_buffer()/buffer_updated() as ``take`` says."""
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    pos = 0
    step = 0
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    sizes = [s for s in sizes if s > 0] or [len(stream)]
    while pos < len(stream):
        size = sizes[step % len(sizes)]
        use_buffer = take[step % len(take)] and decoder.missing_bytes > 0
        step += 1
        if use_buffer:
            into = decoder.get_buffer(memory)
            n = min(size, len(into))
            into[:n] = stream[pos : pos + n]
            decoder.buffer_updated(n)
            pos += n
        else:
            decoder.feed(stream[pos : pos + size])
            pos += size
        while (cmd := decoder.next_command()) is not None:
            out.append(cmd)
    return out, decoder


def large_stream() -> tuple[list[RemotingCommand], bytes]:
    cmds = [big_command(size, st, opaque=i)
            for i, (size, st) in enumerate(
                [(s, t) for s in (100, LARGE_BODY_BYTES, 0, 300_000, LARGE_BODY_BYTES - 1, 5)
                 for t in SerializeType])]
    return cmds, encode_all(cmds)


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(1, 400_000), min_size=1, max_size=8),
       take=st.lists(st.booleans(), min_size=1, max_size=5))
def test_any_mix_of_feed_and_get_buffer_gives_the_same_commands(
    cuts: list[int], take: list[bool],
) -> None:
    cmds, stream = large_stream()
    got, decoder = decode_in_place(stream, sorted(set(cuts)), take)
    assert [command_fields(c) for c in got] == [command_fields(c) for c in cmds]
    assert decoder.buffered_bytes == 0
    assert decoder.missing_bytes == 0


@settings(max_examples=30, deadline=None)
@given(cmd=commands(), cut=st.integers(8, 200), pad=st.integers(0, 1000))
def test_in_place_decoding_equals_feeding_for_any_command(
    cmd: RemotingCommand, cut: int, pad: int,
) -> None:
    cmd.body = (cmd.body or b"") + bytes(range(256)) * 300
    frame = encode_frame(cmd)
    [expected], _ = decode_chunks([frame])
    decoder = FrameDecoder()
    decoder.feed(frame[:cut])
    assert decoder.next_command() is None
    assert decoder.missing_bytes == len(frame) - cut
    memory = bytearray(b"\xee" * (len(frame) - cut + pad))  # stale bytes beyond the frame
    into = decoder.get_buffer(memory)
    assert len(into) == len(frame) - cut
    into[:] = frame[cut:]
    decoder.buffer_updated(len(into))
    assert decoder.missing_bytes == 0
    assert command_fields(decoder.next_command()) == command_fields(expected)  # type: ignore[arg-type]
    assert decoder.next_command() is None
    del into
    memory.append(0)  # resizable: the decoder let go of the caller's memory


def test_header_split_between_the_head_and_the_buffer() -> None:
    cmd = big_command(LARGE_BODY_BYTES, SerializeType.JSON)
    frame = encode_frame(cmd)
    for cut in (8, 9, 20, len(frame) - LARGE_BODY_BYTES - 1, len(frame) - LARGE_BODY_BYTES,
                len(frame) - LARGE_BODY_BYTES + 1):
        decoder = FrameDecoder()
        decoder.feed(frame[:cut])
        assert decoder.next_command() is None
        into = decoder.get_buffer()
        into[:] = frame[cut:]
        decoder.buffer_updated(len(into))
        assert command_fields(decoder.next_command()) == command_fields(cmd)  # type: ignore[arg-type]


def test_bytes_fed_past_the_frame_wait_for_the_next_one() -> None:
    first = big_command(200_000, SerializeType.ROCKETMQ, opaque=1)
    second = big_command(10, SerializeType.JSON, opaque=2)
    stream = encode_frame(first) + encode_frame(second)
    decoder = FrameDecoder()
    decoder.feed(stream[:1000])
    decoder.next_command()
    into = decoder.get_buffer()
    into[:5000] = stream[1000:6000]
    decoder.buffer_updated(5000)
    decoder.feed(stream[6000:])  # the rest of the first frame and all of the second
    assert decoder.buffered_bytes == len(stream)
    assert decoder.next_command().opaque == 1  # type: ignore[union-attr]
    assert decoder.next_command().opaque == 2  # type: ignore[union-attr]
    assert decoder.next_command() is None
    assert decoder.buffered_bytes == 0


def test_missing_bytes_is_zero_until_the_prefix_is_known() -> None:
    frame = encode_frame(big_command(1000, SerializeType.JSON))
    decoder = FrameDecoder()
    for n in range(8):
        assert decoder.missing_bytes == 0
        decoder.feed(frame[n : n + 1])
    assert decoder.missing_bytes == len(frame) - 8
    with pytest.raises(RuntimeError):
        FrameDecoder().get_buffer()


def test_oversize_prefix_is_rejected_before_any_buffer() -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    decoder.feed(raw_frame(b"h" * 10, length=4096)[:8])
    assert decoder.missing_bytes == 0  # never an allocation for it
    with pytest.raises(RuntimeError):
        decoder.get_buffer()
    with pytest.raises(FrameTooLargeError):
        decoder.next_command()
    assert decoder.missing_bytes == 0


@pytest.mark.parametrize(("word", "error"), [
    ((0 << 24) | 0xFFFFF, MalformedFrameError),  # header longer than the frame
    ((7 << 24) | 10, UnsupportedSerializeTypeError),
])
def test_bad_header_word_gives_no_buffer_and_the_usual_error(word: int,
                                                             error: type[Exception]) -> None:
    decoder = FrameDecoder()
    decoder.feed((200_000).to_bytes(4, "big") + word.to_bytes(4, "big"))
    assert decoder.missing_bytes == 0
    with pytest.raises(error):
        decoder.next_command()


def test_buffer_misuse_is_refused() -> None:
    frame = encode_frame(big_command(1000, SerializeType.JSON))
    decoder = FrameDecoder()
    decoder.feed(frame[:100])
    with pytest.raises(ValueError, match="cannot hold"):
        decoder.get_buffer(bytearray())
    with pytest.raises(ValueError, match="buffer_updated"):
        decoder.buffer_updated(1)  # no buffer in use yet
    into = decoder.get_buffer()
    with pytest.raises(ValueError, match="buffer_updated"):
        decoder.buffer_updated(len(into) + 1)
    into[:] = frame[100:]
    decoder.buffer_updated(len(into))
    with pytest.raises(RuntimeError):
        decoder.get_buffer()  # complete: next_command's turn
    assert decoder.next_command() is not None


def test_memory_shorter_than_the_rest_is_filled_then_replaced_by_larger_memory() -> None:
    """A caller may commit memory as bytes arrive: each new memory starts with the old bytes."""
    first = big_command(300_000, SerializeType.ROCKETMQ, opaque=1)
    second = big_command(10, SerializeType.JSON, opaque=2)
    stream = encode_frame(first) + encode_frame(second)
    decoder = FrameDecoder()
    decoder.feed(stream[:100])
    rest = len(encode_frame(first)) - 100
    pos = 100
    size = 1000
    memories = []
    while decoder.missing_bytes:
        assert decoder.next_command() is None
        assert decoder.buffer_room == 0
        memories.append(bytearray(b"\xee" * (size + 3)))  # stale bytes, past what is used
        into = decoder.get_buffer(memories[-1])
        assert len(into) == min(size + 3, rest) - (pos - 100)
        with pytest.raises(ValueError, match="buffer_updated"):  # more than it holds
            decoder.buffer_updated(len(into) + 1)
        n = len(into) // 2
        into[:n] = stream[pos : pos + n]
        decoder.buffer_updated(n)
        assert decoder.buffer_room == len(into) - n
        assert decoder.get_buffer(bytearray(1)) is not None  # room left: memory ignored
        into = decoder.get_buffer()
        into[:] = stream[pos + n : pos + n + len(into)]
        decoder.buffer_updated(len(into))
        pos += n + len(into)
        size *= 2
    assert pos == len(encode_frame(first))
    decoder.feed(stream[pos:])
    assert command_fields(decoder.next_command()) == command_fields(first)  # type: ignore[arg-type]
    assert decoder.next_command().opaque == 2  # type: ignore[union-attr]
    del into
    for memory in memories:
        memory.append(0)  # resizable: the decoder let go of each


def test_feeding_past_short_memory_grows_it() -> None:
    cmd = big_command(500_000, SerializeType.JSON)
    frame = encode_frame(cmd)
    decoder = FrameDecoder()
    decoder.feed(frame[:50])
    decoder.get_buffer(bytearray(100))
    for pos in range(50, len(frame), 70_000):
        decoder.feed(frame[pos : pos + 70_000])
    assert decoder.buffered_bytes == len(frame)
    assert command_fields(decoder.next_command()) == command_fields(cmd)  # type: ignore[arg-type]
    assert decoder.buffered_bytes == 0
    # and get_buffer() allocates the whole rest once the caller's memory is full
    decoder.feed(frame[:50])
    into = decoder.get_buffer(bytearray(100))
    into[:] = frame[50:150]
    decoder.buffer_updated(100)
    into = decoder.get_buffer()
    assert len(into) == len(frame) - 150
    into[:] = frame[150:]
    decoder.buffer_updated(len(into))
    assert command_fields(decoder.next_command()) == command_fields(cmd)  # type: ignore[arg-type]


def test_a_bad_header_in_a_frame_received_in_place_is_sticky() -> None:
    header = b"{not json" + b" " * 20
    frame = raw_frame(header, b"b" * LARGE_BODY_BYTES)
    decoder = FrameDecoder()
    decoder.feed(frame[:16])
    into = decoder.get_buffer()
    into[:] = frame[16:]
    decoder.buffer_updated(len(into))
    with pytest.raises(MalformedFrameError):
        decoder.next_command()
    with pytest.raises(MalformedFrameError):
        decoder.next_command()


def test_split_points_do_not_matter_for_large_frames_fed_normally() -> None:
    cmds, stream = large_stream()
    for cuts in ([7], [8, 9], [70_000, 70_001], list(range(0, len(stream), 99_999))):
        got, _ = decode_chunks(split_at(stream, cuts))
        assert [command_fields(c) for c in got] == [command_fields(c) for c in cmds]


def test_a_frame_over_the_limit_is_refused_and_one_at_it_is_not() -> None:
    cmd = RemotingCommand.create_request(1, body=b"x" * 1000)
    length = len(encode_frame(cmd))  # the whole frame, as max_frame_bytes counts it
    assert encode_frame_parts(cmd, length) is not None
    with pytest.raises(FrameTooLargeError) as info:
        encode_frame_parts(cmd, length - 1)
    assert (info.value.length, info.value.limit) == (length, length - 1)
