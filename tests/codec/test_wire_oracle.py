"""The construct declarations in codec/spec.py and the struct fast path agree on valid frames.

construct is the readable specification (the oracle); production encodes and decodes with
`struct`. Both the interpreted and the compiled construct parsers are checked, in both
directions.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from codec import RemotingCommand, SerializeType, decode_frame, encode_frame
from codec.spec import BINARY_HEADER, FRAME
from tests.factories import after_round_trip, command_fields, commands, make_command

FRAMES = {"interpreted": FRAME, "compiled": FRAME.compile()}
BINARY_HEADERS = {"interpreted": BINARY_HEADER, "compiled": BINARY_HEADER.compile()}
KINDS = list(FRAMES)


def frame_fields(cmd: RemotingCommand, header: bytes) -> dict[str, Any]:
    body = cmd.body or b""
    return {
        "length": 4 + len(header) + len(body), "serialize_type": int(cmd.serialize_type),
        "header_length": len(header), "header": header, "body": body,
    }


def binary_header_fields(cmd: RemotingCommand) -> dict[str, Any]:
    assert cmd.language is not None
    return {
        "code": cmd.code, "language": int(cmd.language), "version": cmd.version,
        "opaque": cmd.opaque, "flag": cmd.flag,
        "remark": (cmd.remark or "").encode("utf-8"),
        # None values are skipped on the wire, as Java's mapSerialize skips null ones
        "ext_fields": [{"key": k, "value": v} for k, v in (cmd.ext_fields or {}).items()
                       if v is not None],
    }


def header_of(frame: bytes) -> bytes:
    return frame[8 : 8 + (int.from_bytes(frame[4:8], "big") & 0xFFFFFF)]


@pytest.mark.parametrize("kind", KINDS)
@given(cmd=commands())
def test_construct_frame_parses_what_encode_frame_writes(kind: str, cmd: RemotingCommand) -> None:
    frame = encode_frame(cmd)
    parsed = FRAMES[kind].parse(frame)
    expected = frame_fields(cmd, header_of(frame))
    assert {name: parsed[name] for name in expected} == expected


@pytest.mark.parametrize("kind", KINDS)
@given(cmd=commands())
def test_construct_frame_builds_what_encode_frame_writes(kind: str, cmd: RemotingCommand) -> None:
    frame = encode_frame(cmd)
    assert FRAMES[kind].build(frame_fields(cmd, header_of(frame))) == frame


@pytest.mark.parametrize("kind", KINDS)
@given(cmd=commands(SerializeType.ROCKETMQ))
def test_construct_binary_header_parses_what_the_struct_path_writes(
    kind: str, cmd: RemotingCommand
) -> None:
    parsed = BINARY_HEADERS[kind].parse(header_of(encode_frame(cmd)))
    expected = binary_header_fields(cmd)
    assert {
        "code": parsed.code, "language": parsed.language, "version": parsed.version,
        "opaque": parsed.opaque, "flag": parsed.flag, "remark": parsed.remark,
        "ext_fields": [{"key": e.key, "value": e.value} for e in parsed.ext_fields],
    } == expected


@pytest.mark.parametrize("kind", KINDS)
@given(cmd=commands(SerializeType.ROCKETMQ))
def test_construct_binary_header_builds_what_the_struct_path_writes(
    kind: str, cmd: RemotingCommand
) -> None:
    header = BINARY_HEADERS[kind].build(binary_header_fields(cmd))
    assert header == header_of(encode_frame(cmd))


@pytest.mark.parametrize("kind", KINDS)
@given(cmd=commands(SerializeType.ROCKETMQ))
def test_struct_path_decodes_what_construct_builds(kind: str, cmd: RemotingCommand) -> None:
    header = BINARY_HEADERS[kind].build(binary_header_fields(cmd))
    frame = FRAMES[kind].build(frame_fields(cmd, header))
    assert command_fields(decode_frame(frame)) == after_round_trip(cmd)


def test_construct_agrees_on_the_fixed_header_size() -> None:
    # RocketMQSerializableTest: 21 bytes bare, 34 with remark "Sample Remark", 35 with key=value.
    bare = make_command(serialize_type=SerializeType.ROCKETMQ)
    remark = make_command(remark="Sample Remark", serialize_type=SerializeType.ROCKETMQ)
    entry = make_command(ext_fields={"key": "value"}, serialize_type=SerializeType.ROCKETMQ)
    for cmd, size in ((bare, 21), (remark, 34), (entry, 35)):
        assert len(header_of(encode_frame(cmd))) == size
        for header_struct in BINARY_HEADERS.values():
            assert len(header_struct.build(binary_header_fields(cmd))) == size
