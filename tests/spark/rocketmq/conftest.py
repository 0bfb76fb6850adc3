"""Fixtures of the tests of Spark over RocketMQ: the session's local[2] SparkSession with the
data sources registered, and the RocketMQ fixtures of tests/rocketmq (a real 4.9.8 name
server and broker, Java's own client), reused here.

A test that uses a broker fixture is marked ``rocketmq`` (and ``spark``): ``make
test-rocketmq`` runs it, ``make test`` leaves it out. Tests here that use none (the planning's
unit tests) stay in ``make test``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from remoting.rocketmq import Outgoing, Producer
from tests.rocketmq.conftest import BROKER_FIXTURES
from tests.rocketmq.conftest import java_peer as java_peer  # noqa: F401 (fixtures)
from tests.rocketmq.conftest import rocketmq_cluster as rocketmq_cluster  # noqa: F401

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if (Path(str(item.fspath)).is_relative_to(HERE)
                and BROKER_FIXTURES & set(getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.rocketmq)
            item.add_marker(pytest.mark.spark)


@pytest.fixture
def streaming(spark: Any) -> Any:
    """The session's SparkSession, with the ``rocketmq`` data source registered."""
    from remoting.spark import register_data_source

    register_data_source(spark)
    return spark


def send(name_servers: str, topic: str, count: int, *, first: int = 0,
         tags: str | None = None, batch: int = 256) -> None:
    """Send messages ``first`` to ``first + count - 1`` to ``topic``: body = the number, key
    ``k<n>``, property ``n``, in batches."""
    with Producer(name_servers, "spark-tests") as producer:
        for start in range(first, first + count, batch):
            producer.send_batch(topic, [
                Outgoing(b"%d" % i, keys=[f"k{i}"], properties={"n": str(i)})
                for i in range(start, min(first + count, start + batch))], tags=tags)
