"""The TLS cluster's name server and broker speak TLS only (enforcing): Java's client reaches
them with the CA, a plain connection gets no answer."""

from __future__ import annotations

import socket

import pytest

from codec import RemotingCommand, encode_command

from .cluster import GET_ROUTEINFO_BY_TOPIC, RocketMQTlsCluster
from .java_peer import JavaPeer


def test_java_produces_and_consumes_over_tls(rocketmq_tls_cluster: RocketMQTlsCluster,
                                             java_peer: JavaPeer) -> None:
    c = rocketmq_tls_cluster
    topic = c.new_topic()  # UPDATE_AND_CREATE_TOPIC and the route, over TLS
    sent = java_peer.produce(c.name_servers, topic, 5, sizes=(100, 5000),
                             tls_ca_path=c.ca_path)
    assert [r["status"] for r in sent] == ["SEND_OK"] * 5
    got = java_peer.consume(c.name_servers, topic, c.new_group(), 5, tls_ca_path=c.ca_path)
    assert sorted(r["body_sha256"] for r in got) == sorted(r["body_sha256"] for r in sent)
    assert c.tls_mode == "enforcing"
    assert "tls.server.certPath=" in c.tls_properties_path.read_text()


@pytest.mark.parametrize("server", ["name server", "broker"])
def test_a_plain_connection_gets_no_answer(rocketmq_tls_cluster: RocketMQTlsCluster,
                                           server: str) -> None:
    c = rocketmq_tls_cluster
    addr = c.name_servers[0] if server == "name server" else c.brokers[0].addr
    host, port = addr.rsplit(":", 1)
    request = RemotingCommand.create_request(GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(encode_command(request))
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            data = b""
    assert data == b""  # closed by the server (TlsMode.ENFORCING), no reply
