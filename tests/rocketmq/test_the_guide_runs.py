"""docs/rocketmq.md's examples run against a real broker (its name servers in
``NAMESRV_ADDR``, as RocketMQ's tools read them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_doc_examples import ROOT, blocks, chains, needs_a_broker, run_chain

from .cluster import RocketMQCluster

pytestmark = pytest.mark.default_io
GUIDE = ROOT / "docs" / "rocketmq.md"


def test_the_rocketmq_guide_reads_its_broker_from_namesrv_addr() -> None:
    assert needs_a_broker(GUIDE) and len(blocks(GUIDE)) >= 5


def test_the_rocketmq_guide_runs(rocketmq_cluster: RocketMQCluster, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAMESRV_ADDR", rocketmq_cluster.namesrv_addr)
    monkeypatch.setenv("GUIDE_TOPIC", rocketmq_cluster.new_topic("guide"))
    for chain in chains(GUIDE):
        run_chain(chain, tmp_path, monkeypatch)
