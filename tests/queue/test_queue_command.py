"""``remoting queue`` refuses what it cannot use in one line on stderr (exit 2), and serves
until SIGTERM otherwise, saying where."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from remoting.cli import main

from .service_process import QueueProcess


def test_a_data_dir_that_is_a_file_is_refused(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    where = tmp_path / "not-a-directory"
    where.write_text("x")
    assert main(["queue", "--data-dir", str(where)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("remoting queue: ") and "not-a-directory" in err
    assert "Traceback" not in err


def test_a_port_in_use_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["queue", "--port", str(port)]) == 2
    assert "remoting queue: cannot listen on" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--fsync", "sometimes"], ["--memory-messages", "0"],
                                  ["--msg-timeout", "-1"], ["--port", "70000"],
                                  ["--max-in-flight-per-connection", "0"],
                                  ["--max-deferred", "-1"]])
def test_bad_options_are_refused_by_the_parser(args: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["queue", *args])
    assert exited.value.code == 2 and "error:" in capsys.readouterr().err


def test_the_command_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    service = QueueProcess("--data-dir", str(tmp_path / "q"))
    host, port = service.addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10):
        pass
    assert service.stop().count("Traceback") == 0
    assert service.proc.popen.returncode == 0


def test_the_command_bounds_what_one_connection_holds_in_flight() -> None:
    from remoting import RemotingClient
    from remoting.queue import QueueClient

    service = QueueProcess("--max-in-flight-per-connection", "3")
    try:
        with RemotingClient() as client:
            q = QueueClient(client)
            q.publish_many(service.addr, "t", [b"x"] * 10)
            with q.subscribe(service.addr, "t", "a", credits=5) as sub:
                assert all(sub.receive(10) is not None for _ in range(3))
                stats = q.statistics(service.addr, "t")  # what the service handed: its bound
                assert stats.topics["t"].channels["a"].in_flight == 3
                assert (stats.connections_at_bound, stats.times_at_bound) == (1, 1)
    finally:
        service.stop()
