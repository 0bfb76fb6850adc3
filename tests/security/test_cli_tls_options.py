"""The command line's TLS options: ``call``, ``ping`` and ``stats`` reach TLS servers (CA,
client certificate, encrypted key, server name, no verification, RocketMQ's tls.properties);
``serve`` serves TLS, on its worker processes too (started and stopped by these tests)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from codec import RemotingCommand
from processors import AsyncEchoProcessor
from remoting import (
    STATS_REQUEST_CODE,
    ClientConfig,
    RemotingClient,
    RemotingServer,
    ServerConfig,
    StatsProcessor,
)
from remoting.cli import main

from ..processes import Proc
from .conftest import KEY_PASSWORD, EncryptedKeys, Pki, SelfSigned

ECHO = 1


def serving(config: ServerConfig) -> Iterator[RemotingServer]:
    with RemotingServer(config) as server:
        server.register_processor(ECHO, AsyncEchoProcessor())
        server.register_processor(STATS_REQUEST_CODE, StatsProcessor(server.statistics))
        yield server


@pytest.fixture
def mutual_tls_server(pki: Pki) -> Iterator[RemotingServer]:
    yield from serving(ServerConfig(
        tls_mode="enforcing", tls_cert_file=pki.server_cert, tls_key_file=pki.server_key,
        tls_ca_file=pki.ca_file, tls_client_auth="optional"))


def test_call_ping_and_stats_reach_a_tls_server(
        mutual_tls_server: RemotingServer, pki: Pki, encrypted_keys: EncryptedKeys,
        capsys: pytest.CaptureFixture[str]) -> None:
    addr = mutual_tls_server.addr
    assert main(["call", addr, "1", "--body", "tls", "--json", "--tls-ca", pki.ca_file]) == 0
    assert json.loads(capsys.readouterr().out)["body"] == "tls"
    with_cert = ["--tls-ca", pki.ca_file, "--tls-cert", pki.client_cert,
                 "--tls-key", encrypted_keys.client_key, "--tls-key-password", KEY_PASSWORD,
                 "--tls-server-name", "localhost"]
    assert main(["ping", addr, "--count", "2", *with_cert]) == 0
    assert "2 answered" in capsys.readouterr().out
    assert main(["stats", addr, "--json", "--tls-ca", pki.ca_file]) == 0
    assert json.loads(capsys.readouterr().out)["connections"] >= 1


def test_without_tls_options_an_enforcing_server_is_not_reached(
        mutual_tls_server: RemotingServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", mutual_tls_server.addr, "1", "--timeout", "3"]) == 2
    assert "it may require TLS" in capsys.readouterr().err


def test_no_verify_reaches_a_self_signed_server(self_signed: SelfSigned,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    for server in serving(ServerConfig(tls_mode="enforcing", tls_cert_file=self_signed.cert,
                                       tls_key_file=self_signed.key)):
        assert main(["call", server.addr, "1", "--tls"]) == 2
        assert "CERTIFICATE_VERIFY_FAILED" in capsys.readouterr().err
        assert main(["call", server.addr, "1", "--body", "x", "--tls-no-verify"]) == 0
        assert "body: x" in capsys.readouterr().out


def test_tls_properties_configure_a_client_command(
        mutual_tls_server: RemotingServer, pki: Pki, encrypted_keys: EncryptedKeys,
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    properties = tmp_path / "tls.properties"
    properties.write_text(
        f"tls.client.certPath={pki.client_cert}\ntls.client.keyPath={encrypted_keys.client_key}\n"
        f"tls.client.keyPassword={KEY_PASSWORD}\ntls.client.trustCertPath={pki.ca_file}\n"
        "tls.test.mode.enable=false\ntls.client.authServer=true\n")
    assert main(["call", mutual_tls_server.addr, "1", "--body", "p",
                 "--tls-properties", str(properties)]) == 0
    assert "body: p" in capsys.readouterr().out


def test_a_wrong_key_password_is_one_line_and_exit_2(
        pki: Pki, encrypted_keys: EncryptedKeys, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", "127.0.0.1:1", "1", "--tls-cert", pki.client_cert,
                 "--tls-key", encrypted_keys.client_key, "--tls-key-password", "wrong"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("remoting call: ") and "is encrypted" in err
    assert "Traceback" not in err


def echo(addr: str, pki: Pki) -> bytes | None:
    with RemotingClient(ClientConfig(use_tls=True, tls_ca_file=pki.ca_file)) as client:
        return client.invoke_sync(addr, RemotingCommand.create_request(2, body=b"s"), 10).body


def test_serve_serves_tls_with_an_encrypted_key(pki: Pki, encrypted_keys: EncryptedKeys
                                                ) -> None:
    proc = Proc("serve", "examples.echo_service:processors", "--tls-mode", "enforcing",
                "--tls-cert", pki.server_cert, "--tls-key", encrypted_keys.server_key,
                "--tls-key-password", KEY_PASSWORD)
    try:
        port = proc.expect(r"on 127\.0\.0\.1:(\d+)").group(1)
        assert echo(f"127.0.0.1:{port}", pki) == b"s"
    finally:
        assert proc.stop() == 0


@pytest.mark.skipif(not hasattr(__import__("socket"), "SO_REUSEPORT"),
                    reason="SO_REUSEPORT is not available on this platform")
def test_serve_workers_get_the_tls_options(pki: Pki, encrypted_keys: EncryptedKeys,
                                           tmp_path: Path) -> None:
    properties = tmp_path / "tls.properties"
    properties.write_text(
        f"tls.server.mode=enforcing\ntls.server.certPath={pki.server_cert}\n"
        f"tls.server.keyPath={encrypted_keys.server_key}\n"
        f"tls.server.keyPassword={KEY_PASSWORD}\n")
    proc = Proc("serve", "examples.echo_service:processors", "--workers", "2",
                "--tls-properties", str(properties))
    pids: list[int] = []
    try:
        port = proc.expect(r"on 127\.0\.0\.1:(\d+) with 2 workers").group(1)
        pids = [int(m.group(1)) for m in proc.expect_all(r"worker (\d+) started", 2)]
        proc.expect_all(r"serving .*? \(pid \d+\)", 2)
        for _ in range(4):  # new connections land on either worker
            assert echo(f"127.0.0.1:{port}", pki) == b"s"
    finally:
        assert proc.stop() == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_serve_refuses_a_certificate_without_a_tls_mode(
        pki: Pki, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "examples.echo_service:processors", "--tls-cert", pki.server_cert,
                 "--tls-key", pki.server_key]) == 2
    assert "give --tls-mode permissive or enforcing" in capsys.readouterr().err


def test_serve_says_why_client_auth_needs_a_ca(pki: Pki,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "examples.echo_service:processors", "--tls-mode", "enforcing",
                 "--tls-cert", pki.server_cert, "--tls-key", pki.server_key,
                 "--tls-client-auth", "optional"]) == 2
    assert "tls_client_auth='optional' needs tls_ca_file" in capsys.readouterr().err


@pytest.mark.default_io  # the command line's own client: the drivers' TLS is tested elsewhere
def test_queue_serves_tls_says_so_and_its_tools_reach_it(
        pki: Pki, capsys: pytest.CaptureFixture[str]) -> None:
    proc = Proc("queue", "--tls-mode", "enforcing", "--tls-cert", pki.server_cert,
                "--tls-key", pki.server_key, "--tls-ca", pki.ca_file,
                "--tls-client-auth", "optional")
    try:
        assert proc.expect(r"queue tls: .*").group(0) == (
            "queue tls: enforcing (TLS only; client certificates optional)")
        addr = proc.expect(r"serving queue on (\S+) \(pid").group(1)
        assert main(["queue", "pub", addr, "t", "secret", "--tls-ca", pki.ca_file]) == 0
        assert capsys.readouterr().out == "published t@0\n"
        assert main(["queue", "tail", addr, "t", "--from", "earliest", "-n", "1",
                     "--tls-ca", pki.ca_file, "--tls-cert", pki.client_cert,
                     "--tls-key", pki.client_key]) == 0
        assert capsys.readouterr().out == "t@0 secret\n"
        assert main(["queue", "stats", addr, "--interval", "0", "--tls-ca",
                     pki.ca_file]) == 0
        assert "1 topic, 0 channels" in capsys.readouterr().out
        assert main(["queue", "pub", addr, "t", "plain", "--timeout", "3"]) == 2
        assert "remoting queue pub: " in capsys.readouterr().err
    finally:
        assert proc.stop() == 0


def test_queue_refuses_a_certificate_without_a_tls_mode(
        pki: Pki, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["queue", "--tls-cert", pki.server_cert, "--tls-key", pki.server_key]) == 2
    err = capsys.readouterr().err
    assert err.startswith("remoting queue: ") and "give --tls-mode" in err
