"""RemotingCommand: factories, flag bits, custom headers and the opaque counter."""

from __future__ import annotations

import dataclasses
import inspect
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import pytest

import codec
import codec._command
from codec import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    HeaderFieldError,
    LanguageCode,
    RemotingCommand,
    ResponseCode,
    SerializeType,
)
from codec._command import new_command, next_opaque


@dataclass
class SendHeader:
    topic: str
    queue_id: int
    queue_offset: int | None = None
    ratio: float = 0.5
    flag_on: bool = False
    absent: str | None = None


@dataclass
class OptionalHeader:
    name: str | None = None
    count: int = 7


OpaqueFrom = Callable[[int], None]


@pytest.fixture
def opaque_from(monkeypatch: pytest.MonkeyPatch) -> OpaqueFrom:
    """Restart the process-wide opaque counter at a given value for one test."""

    def start(first: int) -> None:
        monkeypatch.setattr(codec._command, "_opaque_counter", itertools.count(first))

    return start


# --------------------------------------------------------------------------- factories


def test_create_request_gives_fresh_increasing_opaques(opaque_from: OpaqueFrom) -> None:
    opaque_from(100)
    first = RemotingCommand.create_request(10)
    second = RemotingCommand.create_request(10)
    assert (first.opaque, second.opaque) == (100, 101)


def test_create_request_opaques_differ_without_patching() -> None:
    opaques = [RemotingCommand.create_request(1).opaque for _ in range(100)]
    assert len(set(opaques)) == 100


def test_create_request_packs_a_dataclass_header_into_ext_fields() -> None:
    header = SendHeader(topic="TopicTest", queue_id=3, queue_offset=1024, flag_on=True)
    cmd = RemotingCommand.create_request(10, header, body=b"payload")
    assert cmd.ext_fields == {
        "topic": "TopicTest", "queue_id": "3", "queue_offset": "1024", "ratio": "0.5",
        "flag_on": "true",
    }  # None fields omitted, booleans as Java's Boolean.toString
    assert cmd.body == b"payload"
    assert cmd.code == 10
    assert not cmd.is_response


def test_create_request_writes_false_as_false() -> None:
    cmd = RemotingCommand.create_request(10, SendHeader(topic="t", queue_id=0))
    assert cmd.ext_fields is not None
    assert cmd.ext_fields["flag_on"] == "false"
    assert cmd.ext_fields["queue_id"] == "0"


def test_create_request_accepts_a_mapping_header_and_copies_it() -> None:
    header = {"k": "v"}
    cmd = RemotingCommand.create_request(10, header)
    assert cmd.ext_fields == {"k": "v"}
    assert cmd.ext_fields is not header


def test_create_request_without_header_has_no_ext_fields() -> None:
    cmd = RemotingCommand.create_request(10)
    assert cmd.ext_fields is None
    assert cmd.body is None
    assert cmd.flag == 0


def test_create_request_refuses_a_header_that_is_not_a_dataclass_instance() -> None:
    with pytest.raises(TypeError, match="dataclass instance"):
        RemotingCommand.create_request(10, SendHeader)
    with pytest.raises(TypeError, match="dataclass instance"):
        RemotingCommand.create_request(10, object())


def test_create_response_sets_the_response_flag() -> None:
    cmd = RemotingCommand.create_response(ResponseCode.SYSTEM_BUSY, "busy")
    assert cmd.flag & FLAG_RESPONSE
    assert cmd.is_response
    assert not cmd.is_oneway
    assert (cmd.code, cmd.remark) == (ResponseCode.SYSTEM_BUSY, "busy")


def test_create_response_packs_a_header() -> None:
    cmd = RemotingCommand.create_response(0, header=OptionalHeader(name="n"))
    assert cmd.ext_fields == {"name": "n", "count": "7"}


def test_response_to_copies_the_request_opaque() -> None:
    request = RemotingCommand.create_request(10)
    response = RemotingCommand.response_to(request, ResponseCode.SUCCESS, remark="OK")
    assert response.opaque == request.opaque
    assert response.is_response
    assert response.remark == "OK"


def test_new_commands_default_to_python_json_version_0() -> None:
    cmd = RemotingCommand()
    assert cmd.language is LanguageCode.PYTHON
    assert cmd.serialize_type is SerializeType.JSON
    assert (cmd.code, cmd.version, cmd.flag) == (0, 0, 0)


# --------------------------------------------------------------------------- flag bits


def test_is_response_and_is_oneway_are_properties() -> None:
    assert isinstance(inspect.getattr_static(RemotingCommand, "is_response"), property)
    assert isinstance(inspect.getattr_static(RemotingCommand, "is_oneway"), property)


def test_mark_response_and_mark_oneway_set_their_bit_only() -> None:
    cmd = RemotingCommand(flag=0x10)
    cmd.mark_oneway()
    assert cmd.flag == 0x10 | FLAG_ONEWAY
    assert cmd.is_oneway and not cmd.is_response
    cmd.mark_response()
    assert cmd.flag == 0x10 | FLAG_ONEWAY | FLAG_RESPONSE
    assert cmd.is_response
    cmd.mark_response()  # idempotent
    assert cmd.flag == 0x13


def test_flag_bits_match_rocketmq() -> None:
    assert (FLAG_RESPONSE, FLAG_ONEWAY) == (0x1, 0x2)


# --------------------------------------------------------------------------- ext fields


def test_add_ext_field_creates_the_map() -> None:
    cmd = RemotingCommand()
    cmd.add_ext_field("a", "1")
    cmd.add_ext_field("a", "2")
    assert cmd.ext_fields == {"a": "2"}


def test_write_custom_header_overwrites_existing_keys() -> None:
    cmd = RemotingCommand(ext_fields={"topic": "old", "extra": "x"})
    cmd.write_custom_header(SendHeader(topic="new", queue_id=1))
    assert cmd.ext_fields is not None
    assert cmd.ext_fields["topic"] == "new"
    assert cmd.ext_fields["extra"] == "x"


# --------------------------------------------------------------------------- decode_header


def test_decode_header_converts_each_field_to_its_type() -> None:
    cmd = RemotingCommand(ext_fields={
        "topic": "T", "queue_id": "3", "queue_offset": "1024", "ratio": "0.618",
        "flag_on": "true", "unknown": "ignored",
    })
    assert cmd.decode_header(SendHeader) == SendHeader(
        topic="T", queue_id=3, queue_offset=1024, ratio=0.618, flag_on=True,
    )


def test_decode_header_round_trips_a_packed_header() -> None:
    header = SendHeader(topic="t", queue_id=-5, queue_offset=2**40, ratio=1e-3, flag_on=False)
    assert RemotingCommand.create_request(1, header).decode_header(SendHeader) == header


def test_decode_header_leaves_missing_optional_fields_at_their_defaults() -> None:
    cmd = RemotingCommand(ext_fields={"topic": "t", "queue_id": "1", "absent": None})
    header = cmd.decode_header(SendHeader)
    assert (header.queue_offset, header.ratio, header.flag_on, header.absent) == (
        None, 0.5, False, None
    )
    assert RemotingCommand().decode_header(OptionalHeader) == OptionalHeader()


@pytest.mark.parametrize("ext_fields", [None, {}, {"topic": "t"}, {"topic": "t", "queue_id": None}])
def test_decode_header_names_a_missing_required_field(
    ext_fields: dict[str, str | None] | None,
) -> None:
    cmd = RemotingCommand(ext_fields=ext_fields)
    with pytest.raises(HeaderFieldError) as info:
        cmd.decode_header(SendHeader)
    missing = "topic" if not ext_fields else "queue_id"
    assert info.value.field == missing
    assert info.value.header == "SendHeader"
    assert f"SendHeader.{missing}" in str(info.value)
    assert "missing" in str(info.value)


@pytest.mark.parametrize(
    ("field", "raw"),
    [("queue_id", "abc"), ("queue_id", "1.5"), ("queue_offset", ""), ("ratio", "fast"),
     ("flag_on", "yes"), ("flag_on", "1"),
     # what Java's parseInt / parseDouble refuse, though Python's int() / float() take it
     ("queue_id", "4_2"), ("queue_id", " 42 "), ("queue_id", "\u0661\u0662"), ("ratio", "1_0.5")],
)
def test_decode_header_names_a_field_that_does_not_parse(field: str, raw: str) -> None:
    ext: dict[str, str | None] = {"topic": "t", "queue_id": "1", field: raw}
    with pytest.raises(HeaderFieldError) as info:
        RemotingCommand(ext_fields=ext).decode_header(SendHeader)
    assert info.value.field == field
    assert repr(raw) in str(info.value)
    assert isinstance(info.value, codec.CodecError)


def test_decode_header_refuses_unsupported_field_types() -> None:
    @dataclass
    class Bad:
        items: list[str]

    with pytest.raises(TypeError, match="unsupported header field type"):
        RemotingCommand(ext_fields={"items": "a"}).decode_header(Bad)


# --------------------------------------------------------------------------- opaque counter


def test_next_opaque_wraps_to_negative_int32_like_java(opaque_from: OpaqueFrom) -> None:
    opaque_from(2**31 - 1)
    assert [next_opaque() for _ in range(3)] == [2**31 - 1, -(2**31), -(2**31) + 1]


def test_next_opaque_keeps_wrapping_past_two_to_the_32(opaque_from: OpaqueFrom) -> None:
    opaque_from(2**32 - 1)
    assert [next_opaque() for _ in range(2)] == [-1, 0]


def test_default_opaque_comes_from_the_counter(opaque_from: OpaqueFrom) -> None:
    opaque_from(2**31 - 1)
    assert RemotingCommand().opaque == 2**31 - 1
    assert RemotingCommand.create_request(1).opaque == -(2**31)
    assert RemotingCommand(opaque=5).opaque == 5  # an explicit opaque does not consume one
    assert next_opaque() == -(2**31) + 1


# --------------------------------------------------------------------------- internals


def test_new_command_sets_every_field_like_the_constructor() -> None:
    names = [f.name for f in dataclasses.fields(RemotingCommand)]
    assert list(inspect.signature(new_command).parameters) == names
    values = {
        "code": 1, "language": LanguageCode.GO, "version": 2, "opaque": 3, "flag": 4,
        "remark": "r", "ext_fields": {"k": "v"}, "body": b"b",
        "serialize_type": SerializeType.ROCKETMQ,
    }
    built = new_command(**values)  # type: ignore[arg-type]
    assert built == RemotingCommand(**values)  # type: ignore[arg-type]
    assert [getattr(built, n) for n in names] == list(values.values())


def test_repr_shows_fields_but_not_the_body_bytes() -> None:
    cmd = RemotingCommand(code=10, opaque=3, remark="r", body=b"secret" * 10)
    text = repr(cmd)
    assert text.startswith("RemotingCommand(code=10, language=PYTHON")
    assert "<60 bytes>" in text
    assert "secret" not in text


@pytest.mark.parametrize(
    "name",
    ["RemotingCommand", "CodecError", "MalformedFrameError", "FrameTooLargeError",
     "UnsupportedSerializeTypeError", "ForeignProtocolError", "InvalidCommandError",
     "HeaderFieldError"],
)
def test_public_classes_report_the_codec_module(name: str) -> None:
    assert getattr(codec, name).__module__ == "codec"


def test_public_api_is_exported() -> None:
    for name in codec.__all__:
        assert hasattr(codec, name)
    assert codec.encode_command is codec.encode_frame
