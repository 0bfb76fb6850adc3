"""docs/spark.md's RocketMQ examples run against a real broker (its name servers in
``NAMESRV_ADDR``, as docs/rocketmq.md's do); the page's other examples run in
tests/test_doc_examples.py without one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.rocketmq.cluster import RocketMQCluster
from tests.test_doc_examples import ROOT, chain_needs_a_broker, chains, run_chain

pytestmark = pytest.mark.default_io
GUIDE = ROOT / "docs" / "spark.md"


def test_the_spark_guides_rocketmq_examples_run(streaming: Any,
                                                rocketmq_cluster: RocketMQCluster,
                                                tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with_a_broker = [chain for chain in chains(GUIDE) if chain_needs_a_broker(chain)]
    assert len(with_a_broker) == 1 and len(with_a_broker[0]) >= 3
    monkeypatch.setenv("NAMESRV_ADDR", rocketmq_cluster.namesrv_addr)
    for chain in with_a_broker:
        run_chain(chain, tmp_path, monkeypatch)
