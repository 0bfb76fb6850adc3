"""The ACL signature covers the ext fields as they travel: a None value is never sent, so it is
not signed, and an empty value in a ROCKETMQ header, which arrives as null, is signed as the
broker counts it ("null"). Before, the client signed None as "null" while the codec left it
off the wire, and both our server and RocketMQ's refused the request ("signature mismatch")."""

from __future__ import annotations

import pytest
import trio

from codec import RemotingCommand, ResponseCode, SerializeType, decode_frame, encode_frame
from processors import AsyncEchoProcessor
from remoting import AclClientRPCHook, AclServerRPCHook, TrioRemotingClient, TrioRemotingServer
from remoting._security._acl import as_received, sign, signed_content

ECHO = 1
SERIALIZATIONS = [SerializeType.JSON, SerializeType.ROCKETMQ]
HEADERS = [
    {"topic": "T", "k": None},
    {"topic": "T", "k": ""},
    {"a": None, "b": "", "c": "x"},
]


def signed_request(header: dict[str, str | None], serialize_type: SerializeType
                   ) -> RemotingCommand:
    request = RemotingCommand.create_request(ECHO, header=header, body=b"body")
    request.serialize_type = serialize_type
    AclClientRPCHook("RocketMQ", "12345678").do_before_request("127.0.0.1:1", request)
    return request


@pytest.mark.parametrize("serialize_type", SERIALIZATIONS)
@pytest.mark.parametrize("header", HEADERS)
def test_a_signed_request_verifies_after_the_wire(
        header: dict[str, str | None], serialize_type: SerializeType) -> None:
    received = decode_frame(encode_frame(signed_request(header, serialize_type)))
    AclServerRPCHook({"RocketMQ": "12345678"}).do_before_request("127.0.0.1:1", received)


def test_the_signature_matches_what_the_broker_computes() -> None:
    # The broker (PlainAccessValidator + AclUtils.combineRequestContent) appends each value
    # it decoded, a null as "null", in key order, then the body.
    json = signed_request({"topic": "T", "k": None, "e": ""}, SerializeType.JSON)
    assert json.ext_fields is not None
    assert json.ext_fields["Signature"] == sign("12345678", b"RocketMQ" b"T" b"body")
    binary = signed_request({"topic": "T", "k": None, "e": ""}, SerializeType.ROCKETMQ)
    assert binary.ext_fields is not None
    assert binary.ext_fields["Signature"] == sign("12345678", b"RocketMQnullT" b"body")


def test_as_received_drops_none_and_reads_an_empty_rocketmq_value_as_null() -> None:
    ext: dict[str, str | None] = {"n": None, "e": "", "v": "x"}
    assert as_received(ext, SerializeType.JSON) == {"e": "", "v": "x"}
    assert as_received(ext, SerializeType.ROCKETMQ) == {"e": None, "v": "x"}
    assert signed_content({"e": None, "v": "x"}, None) == b"nullx"


@pytest.mark.parametrize("serialize_type", SERIALIZATIONS)
async def test_python_to_python_with_none_and_empty_values(
        nursery: trio.Nursery, serialize_type: SerializeType) -> None:
    server = TrioRemotingServer()
    server.register_processor(ECHO, AsyncEchoProcessor())
    server.register_rpc_hook(AclServerRPCHook({"RocketMQ": "12345678"}))
    await nursery.start(server.serve)
    client = TrioRemotingClient()
    client.register_rpc_hook(AclClientRPCHook("RocketMQ", "12345678"))
    await nursery.start(client.serve)
    for header in HEADERS:
        request = RemotingCommand.create_request(ECHO, header=header, body=b"body")
        request.serialize_type = serialize_type
        response = await client.invoke_sync(f"127.0.0.1:{server.port}", request, 5)
        assert (response.code, response.remark) == (ResponseCode.SUCCESS, None), header
