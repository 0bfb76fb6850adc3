"""``remoting rocketmq send | tail | route | offsets`` against a real broker."""

from __future__ import annotations

import json

import pytest

from remoting.cli import main

from .cluster import RocketMQCluster

pytestmark = pytest.mark.default_io


def test_send_tail_route_and_offsets(rocketmq_cluster: RocketMQCluster,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    ns = rocketmq_cluster.namesrv_addr
    topic = rocketmq_cluster.new_topic("cli", queues=2)
    group = rocketmq_cluster.new_group("cli")
    assert main(["rocketmq", "send", "-n", ns, "-t", topic, "-m", "hello", "--tags", "a",
                 "--keys", "k1 k2", "-p", "x=y", "--count", "3", "--json"]) == 0
    sent = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["status"] for r in sent] == ["SEND_OK"] * 3
    assert main(["rocketmq", "tail", "-n", ns, "-t", topic, "-g", group, "--from", "first",
                 "--count", "3"]) == 0
    got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(m["msg_id"] for m in got) == sorted(r["msg_id"] for r in sent)
    assert got[0]["body"] == "hello" and got[0]["keys"] == ["k1", "k2"]
    assert got[0]["properties"]["x"] == "y" and got[0]["tags"] == "a"
    assert main(["rocketmq", "route", "-n", ns, "-t", topic, "--json"]) == 0
    [route] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (route["broker"], route["read_queues"], route["write_queues"]) == ("broker-a", 2, 2)
    assert main(["rocketmq", "offsets", "-n", ns, "-t", topic, "-g", group, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sum(r["end"] for r in rows) == 3 and all(r["lag"] == 0 for r in rows)


def test_a_topic_no_one_knows_and_a_missing_name_server_are_clear_errors(
        rocketmq_cluster: RocketMQCluster, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["rocketmq", "route", "-n", rocketmq_cluster.namesrv_addr, "-t",
                 "never-made-x"]) == 2
    assert "no name server knows topic" in capsys.readouterr().err
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    from remoting.cli import build_parser

    args = build_parser().parse_args(["rocketmq", "route", "-t", "t"])
    assert args._run(args) == 2
    assert "NAMESRV_ADDR" in capsys.readouterr().err
