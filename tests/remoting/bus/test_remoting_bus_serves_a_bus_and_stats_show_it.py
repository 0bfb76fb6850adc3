"""``remoting bus`` serves an event bus that bus clients share, as a real process stopped by
SIGTERM (started and stopped by this test, by pid); ``remoting stats`` against it shows the
bus's counters beside the server's, in text and JSON. A server whose stats processor has no
bus shows none."""

from __future__ import annotations

import json
import threading

import pytest

from remoting import STATS_REQUEST_CODE, RemotingClient, RemotingServer, StatsProcessor
from remoting.bus import BusClient, EventBus, Message, ReplyFailure
from remoting.cli import main

from ...processes import Proc
from .conftest import WAIT


def test_remoting_bus_serves_clients_and_stats_show_the_bus(
        capsys: pytest.CaptureFixture[str]) -> None:
    proc = Proc("bus", "--port", "0", "--max-queued-per-consumer", "5")
    try:
        port = proc.expect(r"event bus on 127\.0\.0\.1:(\d+)").group(1)
        addr = f"127.0.0.1:{port}"
        with (RemotingClient() as c1, RemotingClient() as c2,
              BusClient(c1, addr) as worker, BusClient(c2, addr) as asker):
            got = threading.Event()

            def reply(m: Message) -> None:
                m.reply(b"ok:" + m.body)
                got.set()

            worker.consumer("orders", reply)
            assert asker.request("orders", b"1", timeout=WAIT).body == b"ok:1"
            asker.publish("nobody", b"x")
            with pytest.raises(ReplyFailure, match="NO_HANDLERS"):
                asker.send("nobody", timeout=WAIT)
            assert main(["stats", addr, "--json"]) == 0
            bus = json.loads(capsys.readouterr().out)["bus"]
            assert (bus["remote_consumers"], bus["no_handlers"], bus["unrouted_publishes"],
                    bus["pending_replies"]) == (1, 1, 1, 0)
            assert main(["stats", addr]) == 0
            text = capsys.readouterr().out
        assert "event bus:" in text and "remote_consumers 1" in text
        assert "unrouted_publishes 1" in text
    finally:
        code = proc.stop()
    assert code == 0


def test_stats_of_a_server_without_a_bus_show_none(capsys: pytest.CaptureFixture[str]) -> None:
    with RemotingServer() as server, EventBus() as bus:
        bus.attach(server)
        server.register_processor(STATS_REQUEST_CODE, StatsProcessor(server.statistics))
        assert main(["stats", server.addr]) == 0
    assert "event bus" not in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "says"), [
    (["bus", "--max-queued-per-consumer", "-1"], "must be >= 0"),
    (["bus", "--port", "70000"], "0-65535"),
    (["bus", "--tls-cert", "/no/such/cert.pem"], "TLS is disabled"),
])
def test_remoting_bus_refuses_bad_options_in_one_line(
        argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err
