"""encode_frame -> decode gives the command back, up to the wire's documented normalisations."""

from __future__ import annotations

import pytest
from hypothesis import example, given

from codec import (
    LanguageCode,
    RemotingCommand,
    RequestCode,
    SerializeType,
    decode_frame,
    encode_frame,
)
from tests.factories import (
    after_round_trip,
    command_fields,
    commands,
    decode_chunks,
    make_command,
)

JSON = SerializeType.JSON
ROCKETMQ = SerializeType.ROCKETMQ


@given(commands(JSON))
@example(make_command(remark="", ext_fields={}, body=b"", serialize_type=JSON))
@example(make_command(remark="\x00\x1f\x7f\u2028\U0001f600", ext_fields={"\n": "\\"}))
@example(make_command(ext_fields={"a": None, "b": ""}, serialize_type=JSON))
def test_json_round_trip_preserves_the_command(cmd: RemotingCommand) -> None:
    decoded = decode_frame(encode_frame(cmd))
    assert command_fields(decoded) == after_round_trip(cmd)


@given(commands(ROCKETMQ))
@example(make_command(remark="", ext_fields={}, body=b"", serialize_type=ROCKETMQ))
@example(make_command(remark="x", ext_fields={"": "", "k": None}, serialize_type=ROCKETMQ))
@example(make_command(code=-(2**15), version=2**15 - 1, opaque=-(2**31), flag=2**31 - 1,
                      serialize_type=ROCKETMQ))
def test_rocketmq_round_trip_preserves_the_command(cmd: RemotingCommand) -> None:
    decoded = decode_frame(encode_frame(cmd))
    assert command_fields(decoded) == after_round_trip(cmd)


@given(commands())
def test_frame_decoder_and_decode_frame_agree(cmd: RemotingCommand) -> None:
    frame = encode_frame(cmd)
    streamed, decoder = decode_chunks([frame])
    assert [command_fields(c) for c in streamed] == [command_fields(decode_frame(frame))]
    assert decoder.buffered_bytes == 0


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_empty_body_decodes_as_none(serialize_type: SerializeType) -> None:
    frame = encode_frame(make_command(body=b"", serialize_type=serialize_type))
    assert decode_frame(frame).body is None


def test_rocketmq_empty_strings_decode_as_none() -> None:
    cmd = make_command(remark="", ext_fields={"empty": "", "full": "x"}, serialize_type=ROCKETMQ)
    decoded = decode_frame(encode_frame(cmd))
    assert decoded.remark is None
    assert decoded.ext_fields == {"empty": None, "full": "x"}


def test_rocketmq_empty_ext_map_decodes_as_none() -> None:
    decoded = decode_frame(encode_frame(make_command(ext_fields={}, serialize_type=ROCKETMQ)))
    assert decoded.ext_fields is None


def test_json_keeps_empty_strings_and_drops_null_ext_values() -> None:
    cmd = make_command(remark="", ext_fields={"empty": "", "gone": None}, serialize_type=JSON)
    decoded = decode_frame(encode_frame(cmd))
    assert decoded.remark == ""
    assert decoded.ext_fields == {"empty": ""}


def test_json_carries_codes_wider_than_int16() -> None:
    cmd = make_command(code=RequestCode.POP_MESSAGE, serialize_type=JSON)
    assert decode_frame(encode_frame(cmd)).code == 200050


@pytest.mark.parametrize("language", list(LanguageCode))
@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_every_language_code_survives_the_wire(
    language: LanguageCode, serialize_type: SerializeType
) -> None:
    cmd = make_command(language=language, serialize_type=serialize_type)
    assert decode_frame(encode_frame(cmd)).language is language


def test_decoded_command_takes_the_frames_serialize_type() -> None:
    for st in SerializeType:
        assert decode_frame(encode_frame(make_command(serialize_type=st))).serialize_type is st


def test_serialize_type_as_plain_int_encodes_like_the_enum() -> None:
    for st in SerializeType:
        cmd = make_command(ext_fields={"k": "v"}, serialize_type=st)
        plain = make_command(ext_fields={"k": "v"}, serialize_type=int(st))
        assert encode_frame(plain) == encode_frame(cmd)


def test_large_body_round_trips() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    for st in SerializeType:
        decoded = decode_frame(encode_frame(make_command(body=body, serialize_type=st)))
        assert decoded.body == body
