"""Encrypted private keys (RocketMQ's ``tls.server.keyPassword`` / ``tls.client.keyPassword``):
``tls_key_password`` on both configs, for PBES2/AES and for PBE-SHA1-3DES (the one Netty 4.1.48
reads). A missing or wrong password is a `RemotingStartError` saying the key is encrypted, and
OpenSSL never prompts for it: under a terminal it did, and the server start hung there."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time

import pytest
import trio

from codec import RemotingCommand
from processors import AsyncEchoProcessor
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingServer,
    RemotingStartError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from .conftest import KEY_PASSWORD, EncryptedKeys, Pki

ECHO = 1


def server_config(pki: Pki, keys: EncryptedKeys, password: str | None) -> ServerConfig:
    return ServerConfig(tls_mode="enforcing", tls_cert_file=pki.server_cert,
                        tls_key_file=keys.server_key, tls_key_password=password,
                        tls_ca_file=pki.ca_file)


def client_config(pki: Pki, keys: EncryptedKeys, password: str | None) -> ClientConfig:
    return ClientConfig(use_tls=True, tls_ca_file=pki.ca_file, tls_cert_file=pki.client_cert,
                        tls_key_file=keys.client_key, tls_key_password=password)


async def test_encrypted_keys_with_their_password_serve_mutual_tls(
        nursery: trio.Nursery, pki: Pki, encrypted_keys: EncryptedKeys) -> None:
    server = TrioRemotingServer(server_config(pki, encrypted_keys, KEY_PASSWORD))
    server.register_processor(ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    client = TrioRemotingClient(client_config(pki, encrypted_keys, KEY_PASSWORD))
    await nursery.start(client.serve)
    response = await client.invoke_sync(f"127.0.0.1:{server.port}",
                                        RemotingCommand.create_request(ECHO, body=b"k"), 5)
    assert response.body == b"k"


@pytest.mark.parametrize(("password", "words"), [
    (None, "is encrypted: give its password as tls_key_password"),
    ("wrong", "is encrypted and tls_key_password does not decrypt it"),
])
def test_a_missing_or_wrong_password_is_a_start_error(
        pki: Pki, encrypted_keys: EncryptedKeys, password: str | None, words: str) -> None:
    with pytest.raises(RemotingStartError, match=words) as info:
        RemotingServer(server_config(pki, encrypted_keys, password))
    assert encrypted_keys.server_key in str(info.value)
    with pytest.raises(RemotingStartError, match=words) as info:
        RemotingClient(client_config(pki, encrypted_keys, password))
    assert encrypted_keys.client_key in str(info.value)


def test_a_password_never_shows_in_a_config_repr_or_error(pki: Pki,
                                                          encrypted_keys: EncryptedKeys) -> None:
    assert KEY_PASSWORD not in repr(server_config(pki, encrypted_keys, KEY_PASSWORD))
    assert KEY_PASSWORD not in repr(client_config(pki, encrypted_keys, KEY_PASSWORD))
    with pytest.raises(TypeError, match="tls_key_password must be a str or None, got bytes"):
        ClientConfig(tls_key_password=b"secret bytes")  # type: ignore[arg-type]


def test_a_key_of_another_certificate_is_still_named_so(pki: Pki,
                                                       encrypted_keys: EncryptedKeys) -> None:
    with pytest.raises(RemotingStartError, match="does not match"):
        RemotingServer(ServerConfig(tls_mode="enforcing", tls_cert_file=pki.server_cert,
                                    tls_key_file=encrypted_keys.client_key,
                                    tls_key_password=KEY_PASSWORD))


START_UNDER_A_TERMINAL = """
import os, sys
os.open(sys.argv[1], os.O_RDWR)  # a session leader opening a terminal makes it its own
from remoting import RemotingServer, RemotingStartError, ServerConfig
try:
    RemotingServer(ServerConfig(tls_mode="enforcing", tls_cert_file=sys.argv[2],
                                tls_key_file=sys.argv[3]))
except RemotingStartError as exc:
    print("START ERROR", exc, flush=True)
"""


def test_a_server_under_a_terminal_never_prompts_for_the_password(
        pki: Pki, encrypted_keys: EncryptedKeys) -> None:
    # OpenSSL reads a pass phrase from the controlling terminal when no password is given.
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", START_UNDER_A_TERMINAL, os.ttyname(slave), pki.server_cert,
             encrypted_keys.server_key],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            deadline = time.monotonic() + 1
            prompt = b""
            while time.monotonic() < deadline and b":" not in prompt:
                prompt += os.read(master, 1000)
            pytest.fail(f"the server start waited on the terminal: {prompt!r}")
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 0, err
    assert b"START ERROR" in out and b"is encrypted" in out
