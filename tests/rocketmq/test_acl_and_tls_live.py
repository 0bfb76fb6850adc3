"""ACL and TLS against a real broker: requests signed as Java's AclClientRPCHook signs them
pass a broker with ``aclEnable=true``; what an account may not do, or a wrong signature, is
refused (4.9.8 answers SYSTEM_ERROR with the AclException's text) and surfaces as the
documented errors; every client kind speaks TLS to a TLS-only cluster."""

from __future__ import annotations

import threading
import time

import pytest
import trio

from remoting import ClientConfig
from remoting.rocketmq import (
    LitePullConsumer,
    Message,
    MQBrokerError,
    Producer,
    PushConsumer,
    SendFailedError,
    TopicRouteError,
    open_producer,
)

from .cluster import RocketMQAclCluster, RocketMQTlsCluster

pytestmark = pytest.mark.default_io
WAIT = 60.0


def _consume(ns: list[str], group: str, topic: str, n: int, **options: object) -> list[Message]:
    got: list[Message] = []
    done = threading.Event()

    def handler(message: Message) -> None:
        got.append(message)
        if len(got) >= n:
            done.set()

    with PushConsumer(ns, group, topic, handler=handler, consume_from="first",
                      **options):  # type: ignore[arg-type]
        assert done.wait(WAIT), f"{len(got)} of {n}"
    return got


def test_signed_requests_send_and_consume_under_acl(
        rocketmq_acl_cluster: RocketMQAclCluster) -> None:
    c = rocketmq_acl_cluster
    keys = {"access_key": c.restricted_access_key, "secret_key": c.restricted_secret_key}
    with Producer(c.name_servers, **keys) as producer:  # type: ignore[arg-type]
        sent = {producer.send(c.open_topic, b"%d" % i, tags="t").msg_id for i in range(5)}
        sent.add(producer.send_batch(c.open_topic, [b"b1"]).msg_ids[0])
    got = _consume(c.name_servers, c.restricted_group, c.open_topic, 6, **keys)
    assert {m.msg_id for m in got} == sent
    with LitePullConsumer(c.name_servers, c.restricted_group, c.open_topic,
                          consume_from="first", **keys) as lite:  # type: ignore[arg-type]
        polled: list[Message] = []
        deadline = time.monotonic() + WAIT
        while len(polled) < 6 and time.monotonic() < deadline:
            polled += lite.poll(1.0)
        lite.commit()


def test_what_an_account_may_not_do_is_refused_as_a_broker_error(
        rocketmq_acl_cluster: RocketMQAclCluster) -> None:
    c = rocketmq_acl_cluster
    keys = {"access_key": c.restricted_access_key, "secret_key": c.restricted_secret_key}
    with Producer(c.name_servers, retries=0, **keys) as producer:  # type: ignore[arg-type]
        with pytest.raises(SendFailedError) as caught:
            producer.send(c.sub_topic, b"x")  # SUB only: no PUB
        [(_, error)] = caught.value.attempts
        assert isinstance(error, MQBrokerError) and "AclException" in (error.remark or "")
    wrong = {"access_key": c.restricted_access_key, "secret_key": "not-the-secret"}
    with Producer(c.name_servers, retries=0, **wrong) as producer:  # type: ignore[arg-type]
        with pytest.raises(SendFailedError) as caught:
            producer.send(c.open_topic, b"x")
        [(_, error)] = caught.value.attempts
        assert isinstance(error, MQBrokerError) and "signature" in (error.remark or "").lower()


def test_every_client_speaks_tls_to_a_tls_only_cluster(
        rocketmq_tls_cluster: RocketMQTlsCluster) -> None:
    c = rocketmq_tls_cluster
    topic = c.new_topic("tls", queues=2)
    config = ClientConfig(use_tls=True, tls_ca_file=str(c.ca_path))
    with Producer(c.name_servers, client_config=config) as producer:
        sent = {producer.send(topic, b"%d" % i).msg_id for i in range(4)}

    async def trio_send() -> str:
        async with open_producer(c.name_servers, client_config=config) as p:
            return (await p.send(topic, b"trio")).msg_id

    sent.add(trio.run(trio_send))
    got = _consume(c.name_servers, c.new_group("tls"), topic, 5, client_config=config)
    assert {m.msg_id for m in got} == sent
    plain = Producer(c.name_servers, timeout=2.0, retries=0)
    with plain, pytest.raises(TopicRouteError):  # the TLS-only name server refuses plain text
        plain.send(topic, b"plain")
