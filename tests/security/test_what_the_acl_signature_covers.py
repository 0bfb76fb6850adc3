"""What RocketMQ's ACL signature covers, and what it does not (docs/security.md, "What the
signature covers").

It is HMAC-SHA1 over the ext field values in key order, then the body: not the request code,
the flags, the key names, nor where one value ends and the next begins. Interop with RocketMQ
needs exactly this, so these tests pin it: each tampering below is accepted by the server
hook (as by a RocketMQ broker), and each change to what is covered is refused."""

from __future__ import annotations

import pytest

from codec import FLAG_ONEWAY, RemotingCommand, SerializeType, decode_frame, encode_frame
from remoting import AbortProcessError, AclClientRPCHook, AclServerRPCHook

SECRET = "12345678"


def signed(header: dict[str, str | None], code: int = 1, body: bytes | None = b"body",
           serialize_type: SerializeType = SerializeType.JSON) -> RemotingCommand:
    request = RemotingCommand.create_request(code, header=header, body=body)
    request.serialize_type = serialize_type
    AclClientRPCHook("RocketMQ", SECRET).do_before_request("127.0.0.1:1", request)
    return decode_frame(encode_frame(request))  # as the server receives it


def accepted(request: RemotingCommand) -> bool:
    try:
        AclServerRPCHook({"RocketMQ": SECRET}).do_before_request("127.0.0.1:1", request)
    except AbortProcessError:
        return False
    return True


def tampered(request: RemotingCommand, **changes: object) -> RemotingCommand:
    copy = decode_frame(encode_frame(request))
    for name, value in changes.items():
        setattr(copy, name, value)
    return copy


def with_ext(request: RemotingCommand, ext: dict[str, str | None]) -> RemotingCommand:
    assert request.ext_fields is not None
    return tampered(request, ext_fields={**request.ext_fields, **ext})


def test_the_request_code_is_not_covered() -> None:
    assert accepted(tampered(signed({"topic": "T"}, code=1), code=2))


def test_the_oneway_flag_and_the_remark_are_not_covered() -> None:
    request = signed({"topic": "T"})
    assert accepted(tampered(request, flag=request.flag | FLAG_ONEWAY, remark="added"))


def test_an_extra_key_with_an_empty_value_is_not_covered_in_json() -> None:
    assert accepted(with_ext(signed({"topic": "T"}), {"injected": ""}))


def test_an_extra_empty_key_is_covered_in_rocketmq_where_it_arrives_as_null() -> None:
    request = signed({"topic": "T"}, serialize_type=SerializeType.ROCKETMQ)
    assert not accepted(with_ext(request, {"injected": None}))  # counts as "null"


def test_where_one_value_ends_and_the_next_begins_is_not_covered() -> None:
    request = signed({"a": "xy", "b": ""})
    assert accepted(with_ext(request, {"a": "x", "b": "y"}))


def test_key_names_are_not_covered_while_the_order_of_values_holds() -> None:
    request = signed({"a": "1", "c": "3"})
    assert request.ext_fields is not None
    renamed = dict(request.ext_fields)
    renamed["b"] = renamed.pop("c")  # still after "a" and "AccessKey"
    assert accepted(tampered(request, ext_fields=renamed))


@pytest.mark.parametrize("change", [
    {"ext": {"topic": "U"}}, {"body": b"other"}, {"body": None}, {"ext": {"extra": "v"}},
])
def test_values_and_the_body_are_covered(change: dict[str, object]) -> None:
    request = signed({"topic": "T"})
    if "ext" in change:
        request = with_ext(request, change["ext"])  # type: ignore[arg-type]
    else:
        request = tampered(request, body=change["body"])
    assert not accepted(request)
