"""Fixtures for tests against a real Apache RocketMQ 4.9.8 cluster (`tests.rocketmq.cluster`).

A test that uses one of them is marked ``rocketmq``: ``make test-rocketmq`` runs those
(after ``install-deps.sh``), ``make test`` leaves them out. Tests of tests/rocketmq/ that use
none (unit tests) stay in ``make test``; one that starts a cluster itself says
``@pytest.mark.rocketmq``.

- ``rocketmq_cluster`` (session): a name server and one broker, ``broker-a``.
- ``rocketmq_two_brokers`` (module): a fresh cluster of ``broker-a`` and ``broker-b``, for
  tests that stop or kill a broker (and `Broker.restart` it, for the module's next tests).
- ``rocketmq_acl_cluster`` (module): ``aclEnable=true``, an admin account (``access_key``,
  ``secret_key``) and a restricted one (``restricted_access_key``, ``restricted_secret_key``,
  allowed what ``restricted_topics`` and ``restricted_groups`` say): `RocketMQAclCluster`.
- ``rocketmq_tls_cluster`` (module): name server and broker on TLS only (``enforcing``),
  ``ca_path`` to verify them, a client certificate too: `RocketMQTlsCluster`.
- ``java_peer`` (session): Java's own 4.9.8 client (`tests.rocketmq.java_peer.JavaPeer`):
  ``produce``, ``consume`` / ``start_consume``, ``pull``, ``bench``, each run a JVM.

Each is a `RocketMQCluster`: ``name_servers``, ``namesrv_addr``, ``run_dir``, ``brokers``
(each a `Broker`: ``name``, ``addr``, ``pid``, ``stop()``, ``kill()``, ``alive()``,
``restart()``), ``new_topic(prefix="t", queues=4)``, ``new_group(prefix="g")``, ``route(topic)``.
Ports are free ones; the JVMs are stopped by pid at the end (their logs stay in ``run_dir``,
under pytest's temporary directory).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .cluster import RocketMQAclCluster, RocketMQCluster, RocketMQTlsCluster
from .java_peer import JavaPeer, java_peer_in

# The fixtures that need a broker (or its jars): a test using one is marked ``rocketmq``.
BROKER_FIXTURES = frozenset({"rocketmq_cluster", "rocketmq_two_brokers",
                             "rocketmq_acl_cluster", "rocketmq_tls_cluster", "java_peer"})
HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if (Path(str(item.fspath)).is_relative_to(HERE)
                and BROKER_FIXTURES & set(getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.rocketmq)


@pytest.fixture(scope="session")
def rocketmq_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQCluster]:
    with RocketMQCluster(brokers=1, run_dir=tmp_path_factory.mktemp("rocketmq")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def rocketmq_two_brokers(tmp_path_factory: pytest.TempPathFactory
                         ) -> Iterator[RocketMQCluster]:
    with RocketMQCluster(brokers=2,
                         run_dir=tmp_path_factory.mktemp("rocketmq-two")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def rocketmq_acl_cluster(tmp_path_factory: pytest.TempPathFactory
                         ) -> Iterator[RocketMQAclCluster]:
    with RocketMQAclCluster(run_dir=tmp_path_factory.mktemp("rocketmq-acl")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def rocketmq_tls_cluster(tmp_path_factory: pytest.TempPathFactory
                         ) -> Iterator[RocketMQTlsCluster]:
    with RocketMQTlsCluster(run_dir=tmp_path_factory.mktemp("rocketmq-tls")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def java_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaPeer]:
    with java_peer_in(tmp_path_factory.mktemp("java-peer")) as peer:
        yield peer
