"""Commands the wire cannot carry raise InvalidCommandError with a message that says why."""

from __future__ import annotations

import pytest

from codec import (
    CodecError,
    InvalidCommandError,
    LanguageCode,
    RemotingCommand,
    RequestCode,
    SerializeType,
    encode_frame,
)
from tests.factories import make_command

JSON = SerializeType.JSON
ROCKETMQ = SerializeType.ROCKETMQ


def test_rocketmq_refuses_a_code_outside_int16() -> None:
    # Java truncates silently ((short) 40000 == -25536); we refuse and say what to do.
    with pytest.raises(InvalidCommandError, match=r"code=40000 .*-32768\.\.32767.*JSON"):
        encode_frame(make_command(code=40000, serialize_type=ROCKETMQ))


def test_rocketmq_refuses_pop_message_code() -> None:
    with pytest.raises(InvalidCommandError, match="code="):
        encode_frame(make_command(code=RequestCode.POP_MESSAGE, serialize_type=ROCKETMQ))


@pytest.mark.parametrize(
    ("field", "value"),
    [("version", 40000), ("version", -32769), ("opaque", 2**31), ("flag", -(2**31) - 1)],
)
def test_rocketmq_refuses_other_fields_out_of_range(field: str, value: int) -> None:
    with pytest.raises(InvalidCommandError, match=f"{field}={value}"):
        encode_frame(make_command(serialize_type=ROCKETMQ, **{field: value}))


@pytest.mark.parametrize("field", ["code", "version", "opaque", "flag"])
@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**64])
def test_json_refuses_int_fields_outside_int32(field: str, value: int) -> None:
    with pytest.raises(InvalidCommandError, match=f"{field}={value} does not fit"):
        encode_frame(make_command(serialize_type=JSON, **{field: value}))


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_int32_limits_themselves_encode(serialize_type: SerializeType) -> None:
    for opaque in (2**31 - 1, -(2**31)):
        encode_frame(make_command(opaque=opaque, flag=opaque, serialize_type=serialize_type))


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize(
    "ext_fields",
    [{"k": 5}, {"k": b"v"}, {"k": ["v"]}, {"k": True}, {"k": 0}, {5: "v"}, {b"k": "v"}],
    ids=["int", "bytes", "list", "bool", "zero", "int-key", "bytes-key"],
)
def test_non_str_ext_field_is_refused(
    serialize_type: SerializeType, ext_fields: dict[object, object]
) -> None:
    cmd = make_command(ext_fields=ext_fields, serialize_type=serialize_type)
    with pytest.raises(InvalidCommandError, match="str"):
        encode_frame(cmd)


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize("remark", [5, 0, b"bytes", b"", ["x"]])
@pytest.mark.parametrize("ext_fields", [None, {"k": "v"}])
def test_non_str_remark_is_refused(
    serialize_type: SerializeType, remark: object, ext_fields: dict[str, str] | None
) -> None:
    cmd = make_command(remark=remark, ext_fields=ext_fields, serialize_type=serialize_type)
    with pytest.raises(InvalidCommandError, match="str"):
        encode_frame(cmd)


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize(
    "fields",
    [{"remark": "a\ud800b"}, {"ext_fields": {"k": "\udfff"}}, {"ext_fields": {"\ud800": "v"}}],
    ids=["remark", "value", "key"],
)
def test_lone_surrogates_are_refused(
    serialize_type: SerializeType, fields: dict[str, object]
) -> None:
    # Regression: the ROCKETMQ path let UnicodeEncodeError escape the codec.
    with pytest.raises(InvalidCommandError, match="surrogate|Unicode"):
        encode_frame(make_command(serialize_type=serialize_type, **fields))


def test_rocketmq_refuses_an_ext_key_longer_than_int16() -> None:
    cmd = make_command(ext_fields={"k" * 0x8000: "v"}, serialize_type=ROCKETMQ)
    with pytest.raises(InvalidCommandError, match="int16"):
        encode_frame(cmd)
    encode_frame(make_command(ext_fields={"k" * 0x7FFF: "v"}, serialize_type=ROCKETMQ))


def test_unknown_serialize_type_is_refused() -> None:
    with pytest.raises(InvalidCommandError, match="serialize_type"):
        encode_frame(make_command(serialize_type=2))


def test_rocketmq_refuses_a_language_that_is_not_a_language_code() -> None:
    with pytest.raises(InvalidCommandError, match="language"):
        encode_frame(make_command(language="JAVA", serialize_type=ROCKETMQ))


def test_header_over_24_bits_is_refused() -> None:
    cmd = make_command(remark="x" * (1 << 24), serialize_type=ROCKETMQ)
    with pytest.raises(InvalidCommandError, match="too large"):
        encode_frame(cmd)


def test_encode_errors_are_codec_errors_and_leave_the_command_unchanged() -> None:
    cmd = make_command(code=40000, ext_fields={"k": "v"}, serialize_type=ROCKETMQ)
    with pytest.raises(CodecError):
        encode_frame(cmd)
    assert (cmd.code, cmd.ext_fields) == (40000, {"k": "v"})
    cmd.serialize_type = JSON
    assert encode_frame(cmd)  # the same command is fine as JSON


@pytest.mark.parametrize("st", list(SerializeType))
@pytest.mark.parametrize("fields", [
    {"body": "a str body"}, {"body": 5}, {"flag": 1.5}, {"ext_fields": ["a", "list"]},
], ids=["str-body", "int-body", "float-flag", "list-ext"])
def test_wrong_field_types_are_invalid_command_errors(
    st: SerializeType, fields: dict[str, object]
) -> None:
    with pytest.raises(InvalidCommandError):
        encode_frame(RemotingCommand(serialize_type=st, **fields))  # type: ignore[arg-type]  # hostile input on purpose


def test_json_rejects_a_bool_where_an_int_goes() -> None:
    with pytest.raises(InvalidCommandError, match="version=True"):
        encode_frame(RemotingCommand(version=True))  # a bool is an int to mypy


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize("language", ["JAVA", 99, [], -1], ids=["name", "99", "list", "-1"])
def test_a_language_that_is_not_a_language_code_is_refused_by_both_headers(
        serialize_type: SerializeType, language: object) -> None:
    # JSON left "JAVA" and 99 out of the header silently, [] raised a bare TypeError;
    # ROCKETMQ sent 99 as a byte no peer knows
    cmd = make_command(language=language, serialize_type=serialize_type)
    with pytest.raises(InvalidCommandError, match=r"language=.* is not a LanguageCode"):
        encode_frame(cmd)


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_language_codes_their_ints_and_none_still_encode(serialize_type: SerializeType) -> None:
    for language in (*LanguageCode, 3, None):
        encode_frame(make_command(language=language, serialize_type=serialize_type))


@pytest.mark.parametrize("field", ["code", "version", "opaque", "flag"])
@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_a_bool_int_field_is_refused_by_both_headers(serialize_type: SerializeType,
                                                     field: str) -> None:
    with pytest.raises(InvalidCommandError, match=field):  # ROCKETMQ sent them as 1
        encode_frame(make_command(serialize_type=serialize_type, **{field: True}))


@pytest.mark.parametrize(("field", "value"), [("opaque", 2**31), ("flag", -(2**31) - 1)])
def test_rocketmq_does_not_send_int32_fields_to_json(field: str, value: int) -> None:
    with pytest.raises(InvalidCommandError, match=f"{field}={value}") as info:
        encode_frame(make_command(serialize_type=ROCKETMQ, **{field: value}))
    assert "JSON" not in str(info.value)  # JSON refuses them too
