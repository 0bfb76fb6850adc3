"""ACL signing compatible with RocketMQ's AclClientRPCHook, and the verifying server hook."""

from __future__ import annotations

import re

import pytest
import trio

from codec import RemotingCommand, ResponseCode, decode_frame
from processors import AsyncEchoProcessor
from remoting import (
    AclClientRPCHook,
    AclServerRPCHook,
    Credential,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting._security._acl import sign, signed_content

from ..factories import GOLDEN_VECTORS_PATH
from ..logs import capture_logs

ECHO, ADMIN = 1, 2
VECTORS = GOLDEN_VECTORS_PATH  # produced by the real Java RocketMQ code, kept in the repository


def test_known_answers_from_rocketmq() -> None:
    assert sign("12345678", b"RocketMQ") == "IUc8rrO/0gDch8CjObLQsW2rsiA="
    content = signed_content({"topic": "TopicTest", "AccessKey": "RocketMQ"}, b"hi")
    assert content == b"RocketMQTopicTesthi"
    assert sign("12345678", content) == "4FFNii/mJO1nEIhgXDnIXaOGnog="
    content = signed_content({"topic": "TopicTest", "AccessKey": "RocketMQ",
                              "SecurityToken": "tok"}, None)
    assert content == b"RocketMQtokTopicTest"
    assert sign("12345678", content) == "03bqovdVZTUgndKShXbb0I+ihgE="


def test_keys_sort_like_java_strings() -> None:
    # U+FB01 sorts after U+1F600 by code point, before it by UTF-16 code unit (Java's order)
    content = signed_content({"\U0001f600": "b", "\ufb01": "a"}, None)
    assert content == b"ba"


def test_golden_vectors_with_a_signature_verify() -> None:
    text = VECTORS.read_text()
    frames = re.findall(r"\[(\w*acl\w*)\][^\[]*?frame_hex: ([0-9a-f]+)", text)
    assert len(frames) == 2
    hook = AclServerRPCHook({"RocketMQ": "12345678"})
    for _name, frame_hex in frames:
        cmd = decode_frame(bytes.fromhex(frame_hex))
        hook.do_before_request("1.2.3.4:5", cmd)  # raises if the signature does not verify


def test_client_hook_signs_like_rocketmq() -> None:
    cmd = RemotingCommand.create_request(105, header={"topic": "TopicTest"}, body=b"hi")
    AclClientRPCHook("RocketMQ", "12345678").do_before_request("x:1", cmd)
    assert cmd.ext_fields == {"topic": "TopicTest", "AccessKey": "RocketMQ",
                              "Signature": "4FFNii/mJO1nEIhgXDnIXaOGnog="}


def test_secrets_never_show_in_reprs() -> None:
    assert "12345678" not in repr(AclClientRPCHook("ak", "12345678"))
    assert "12345678" not in repr(AclServerRPCHook({"ak": "12345678"}))


@pytest.fixture
async def acl_server(nursery: trio.Nursery) -> TrioRemotingServer:
    server = TrioRemotingServer()
    server.register_processor(ECHO, AsyncEchoProcessor())
    server.register_processor(ADMIN, AsyncEchoProcessor())
    server.register_rpc_hook(AclServerRPCHook({
        "alice": "alice-secret",
        "bob": Credential("bob-secret", allowed_codes=frozenset({ECHO})),
    }))
    await nursery.start(server.serve)
    return server


async def call(nursery: trio.Nursery, server: TrioRemotingServer, code: int,
               hook: AclClientRPCHook | None) -> RemotingCommand:
    client = TrioRemotingClient()
    if hook is not None:
        client.register_rpc_hook(hook)
    await nursery.start(client.serve)
    request = RemotingCommand.create_request(code, header={"k": "v"}, body=b"payload")
    return await client.invoke_sync(f"127.0.0.1:{server.port}", request, 5)


async def test_signed_requests_pass(nursery: trio.Nursery, acl_server: TrioRemotingServer
                                    ) -> None:
    response = await call(nursery, acl_server, ADMIN, AclClientRPCHook("alice", "alice-secret"))
    assert response.code == ResponseCode.SUCCESS
    assert response.body == b"payload"


@pytest.mark.parametrize(("hook", "reason"), [
    (None, "no AccessKey"),
    (AclClientRPCHook("alice", "wrong-secret"), "signature mismatch"),
    (AclClientRPCHook("mallory", "x"), "unknown AccessKey"),
])
async def test_bad_or_missing_signatures_get_no_permission(
    nursery: trio.Nursery, acl_server: TrioRemotingServer, hook: AclClientRPCHook | None,
    reason: str,
) -> None:
    with capture_logs() as logs:
        response = await call(nursery, acl_server, ECHO, hook)
    assert response.code == ResponseCode.NO_PERMISSION
    assert response.remark is not None and reason in response.remark
    refusals = [e for e in logs if e["event"] == "acl.refused"]
    assert len(refusals) == 1
    assert "alice-secret" not in repr(logs) and "wrong-secret" not in repr(logs)
    assert "mallory" not in repr(logs)  # a key the server does not know is the peer's text
    if reason == "signature mismatch":
        assert refusals[0]["access_key"] == "alice"  # one it knows is named


async def test_a_connection_repeating_refused_requests_cannot_flood_the_log(
        nursery: trio.Nursery, acl_server: TrioRemotingServer) -> None:
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    addr = f"127.0.0.1:{acl_server.port}"
    with capture_logs() as logs:
        answers = await client.invoke_many(
            addr, [RemotingCommand.create_request(ECHO, body=b"x") for _ in range(100)], 10)
        other = TrioRemotingClient()  # another connection is counted on its own
        await nursery.start(other.serve)
        elsewhere = await other.invoke_sync(addr, RemotingCommand.create_request(ECHO), 5)
    assert [getattr(a, "code", a) for a in answers] == [ResponseCode.NO_PERMISSION] * 100  # all
    assert elsewhere.code == ResponseCode.NO_PERMISSION
    refusals = [e["refused_on_connection"] for e in logs if e["event"] == "acl.refused"]
    assert refusals == [1, 2, 4, 8, 16, 32, 64, 1]


async def test_permissions_limit_request_codes(nursery: trio.Nursery,
                                               acl_server: TrioRemotingServer) -> None:
    bob = AclClientRPCHook("bob", "bob-secret")
    assert (await call(nursery, acl_server, ECHO, bob)).code == ResponseCode.SUCCESS
    refused = await call(nursery, acl_server, ADMIN, bob)
    assert refused.code == ResponseCode.NO_PERMISSION
    assert refused.remark is not None and "may not call request code 2" in refused.remark


async def test_tampered_body_is_refused(nursery: trio.Nursery,
                                        acl_server: TrioRemotingServer) -> None:
    class Tamper:
        def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
            request.body = b"changed after signing"

        def do_after_response(self, *args: object) -> None:
            pass

    client = TrioRemotingClient()
    client.register_rpc_hook(AclClientRPCHook("alice", "alice-secret"))
    client.register_rpc_hook(Tamper())
    await nursery.start(client.serve)
    response = await client.invoke_sync(f"127.0.0.1:{acl_server.port}",
                                        RemotingCommand.create_request(ECHO, body=b"x"), 5)
    assert response.code == ResponseCode.NO_PERMISSION


@pytest.mark.parametrize("field", ["Signature", "k"])
async def test_a_lone_surrogate_from_the_peer_is_a_signature_mismatch(
        acl_server: TrioRemotingServer, field: str) -> None:
    # Signing encoded the values strictly as UTF-8: a lone surrogate (the lenient JSON reader
    # lets a peer send one) raised UnicodeEncodeError inside the hook, so the peer got
    # SYSTEM_ERROR naming our file and line, and the server logged a traceback per request.
    from ..factories import json_frame

    ext = {"AccessKey": "alice", "Signature": "c2lnbmF0dXJl", "k": "v"}
    ext[field] = "\\ud800"
    fields = ",".join(f'"{k}":"{v}"' for k, v in ext.items())
    frame = json_frame('{"code":1,"flag":0,"opaque":7,"version":0,"extFields":{' + fields + "}}")
    with capture_logs() as logs:
        with trio.fail_after(5):
            stream = await trio.open_tcp_stream("127.0.0.1", acl_server.port)
            await stream.send_all(frame)
            data = b""
            while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
                chunk = await stream.receive_some()
                assert chunk, "the server closed the connection"
                data += chunk
            await stream.aclose()
    response = decode_frame(data)
    assert response.code == ResponseCode.NO_PERMISSION
    assert response.remark == "[ACL] signature mismatch"
    warnings = [e["event"] for e in logs if e["log_level"] in ("warning", "error")]
    assert warnings == ["acl.refused"]  # no processor.failed traceback
