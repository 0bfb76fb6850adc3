"""The ACL cluster checks every request's signature and the restricted account's perms, as
Java's own client with its AclClientRPCHook sees them."""

from __future__ import annotations

from typing import Any

import pytest

from .cluster import UPDATE_AND_CREATE_TOPIC, RocketMQAclCluster
from .java_peer import JavaPeer, PeerError


def test_the_admin_sends_anywhere_and_the_restricted_account_uses_its_topic_and_group(
        rocketmq_acl_cluster: RocketMQAclCluster, java_peer: JavaPeer) -> None:
    c = rocketmq_acl_cluster
    # connection options (``**connection: Any`` of the peer's methods)
    admin: dict[str, Any] = {"access_key": c.access_key, "secret_key": c.secret_key}
    restricted: dict[str, Any] = {"access_key": c.restricted_access_key,
                  "secret_key": c.restricted_secret_key}
    sent = java_peer.produce(c.name_servers, c.new_topic(), 2, **admin)
    assert [r["status"] for r in sent] == ["SEND_OK"] * 2
    sent = java_peer.produce(c.name_servers, c.open_topic, 3, **restricted)
    assert [r["status"] for r in sent] == ["SEND_OK"] * 3
    got = java_peer.consume(c.name_servers, c.open_topic, c.restricted_group, 3, **restricted)
    assert {r["msg_id"] for r in got} == {r["msg_id"] for r in sent}
    assert c.restricted_topics[c.open_topic] == "PUB|SUB"


@pytest.mark.parametrize(("who", "refusal"), [
    ("wrong secret", "Check signature failed for accessKey=RocketMQAdmin"),
    ("no credentials", "No accessKey is configured"),
    ("restricted, SUB-only topic", "No default permission for topic"),
])
def test_java_is_refused_a_wrong_secret_no_signature_and_a_topic_it_may_not_publish_to(
        rocketmq_acl_cluster: RocketMQAclCluster, java_peer: JavaPeer, who: str,
        refusal: str) -> None:
    c = rocketmq_acl_cluster
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "wrong secret": (c.open_topic, {"access_key": c.access_key, "secret_key": "wrong"}),
        "no credentials": (c.open_topic, {}),
        "restricted, SUB-only topic": (c.sub_topic, {
            "access_key": c.restricted_access_key, "secret_key": c.restricted_secret_key}),
    }
    topic, credentials = cases[who]
    with pytest.raises(PeerError, match=refusal):
        java_peer.produce(c.name_servers, topic, 1, timeout=120, **credentials)


def test_only_the_admin_may_create_a_topic(rocketmq_acl_cluster: RocketMQAclCluster) -> None:
    c = rocketmq_acl_cluster
    fields = {"topic": c.new_group("never"), "defaultTopic": "TBW102", "readQueueNums": "1",
              "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"}
    reply = c.request(c.brokers[0].addr, UPDATE_AND_CREATE_TOPIC, fields,
                      credentials=(c.restricted_access_key, c.restricted_secret_key))
    assert reply.code != 0 and "admin" in (reply.remark or "").lower()
    assert c.request(c.brokers[0].addr, UPDATE_AND_CREATE_TOPIC, fields).code == 0
