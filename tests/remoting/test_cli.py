"""The ``remoting`` command line: call, ping, stats in-process; serve and workers as real
processes (started and stopped by these tests, by pid)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codec import RemotingCommand
from codec import _native as codec_native
from processors import AsyncEchoProcessor
from remoting import (
    STATS_REQUEST_CODE,
    RemotingClient,
    RemotingServer,
    ServerConfig,
    StatsProcessor,
)
from remoting.cli import main

from ..processes import Proc

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def echo_server() -> Iterator[RemotingServer]:
    with RemotingServer(ServerConfig()) as server:
        server.register_processor(1, AsyncEchoProcessor())
        server.register_processor(STATS_REQUEST_CODE, StatsProcessor(server.statistics))
        yield server


def test_call_prints_the_response_as_json(echo_server: RemotingServer,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["call", echo_server.addr, "1", "--body", "héllo", "--ext", "k=v", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["code_name"] == "SUCCESS"
    assert out["body"] == "héllo"
    assert out["ext_fields"] == {"k": "v"}


def test_call_with_an_unknown_code_exits_1(echo_server: RemotingServer,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", echo_server.addr, "999", "--rocketmq"]) == 1
    assert "REQUEST_CODE_NOT_SUPPORTED" in capsys.readouterr().out


def test_call_to_a_dead_address_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", "127.0.0.1:1", "1", "--timeout", "2"]) == 2
    assert "RemotingConnectError" in capsys.readouterr().err


def test_ping_counts_round_trips(echo_server: RemotingServer,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ping", echo_server.addr, "--count", "4"]) == 0
    out = capsys.readouterr().out
    assert out.count("seq=") == 4
    assert "4 sent, 4 answered, 0 failed" in out


def test_stats_shows_the_servers_counters(echo_server: RemotingServer,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with RemotingClient() as client:
        for _ in range(3):
            client.invoke_sync(echo_server.addr, RemotingCommand.create_request(1), 5)
    assert main(["stats", echo_server.addr, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["requests_received"]["1"] == 3
    assert main(["stats", echo_server.addr]) == 0
    assert "connections:" in capsys.readouterr().out


def test_stats_against_a_server_without_the_processor_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with RemotingServer() as server:
        assert main(["stats", server.addr]) == 1
    assert "no stats processor" in capsys.readouterr().err


def echo(addr: str, body: bytes) -> RemotingCommand:
    with RemotingClient() as client:
        return client.invoke_sync(addr, RemotingCommand.create_request(2, body=body), 5)


def test_serve_runs_a_factory_and_stops_on_sigterm() -> None:
    proc = Proc("serve", "examples.echo_service:processors", "--port", "0")
    try:
        port = proc.expect(r"on 127\.0\.0\.1:(\d+)").group(1)
        assert echo(f"127.0.0.1:{port}", b"served").body == b"served"
    finally:
        code = proc.stop()
    assert code == 0


def test_serve_with_a_bad_factory_exits_2() -> None:
    result = subprocess.run([sys.executable, "-m", "remoting", "serve", "no_such_module:f"],
                            cwd=ROOT, capture_output=True, text=True, timeout=30,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode == 2
    assert "cannot import 'no_such_module'" in result.stderr


@pytest.mark.skipif(not hasattr(__import__("socket"), "SO_REUSEPORT"),
                    reason="SO_REUSEPORT is not available on this platform")
def test_workers_share_a_port_and_a_dead_worker_is_restarted() -> None:
    proc = Proc("serve", "examples.echo_service:processors", "--workers", "2")
    pids: list[int] = []
    try:
        port = proc.expect(r"on 127\.0\.0\.1:(\d+) with 2 workers").group(1)
        pids = [int(m.group(1)) for m in proc.expect_all(r"worker (\d+) started", 2)]
        proc.expect_all(r"serving .*? \(pid \d+\)", 2)  # both workers listen
        addr = f"127.0.0.1:{port}"
        assert echo(addr, b"before").body == b"before"
        os.kill(pids[0], signal.SIGKILL)  # a worker we started dies
        proc.expect(rf"worker {pids[0]} exited")
        new_pid = int(proc.expect_all(r"worker (\d+) started", 3)[2].group(1))
        proc.expect_all(r"serving .*? \(pid \d+\)", 3)
        pids.append(new_pid)
        for i in range(5):  # new connections land on either worker
            assert echo(addr, b"after%d" % i).body == b"after%d" % i
    finally:
        code = proc.stop()
    assert code == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_version_is_the_packages(capsys: pytest.CaptureFixture[str]) -> None:
    import remoting

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps it at the terminal width
    # and which codec runs: compiled, or pure Python and why (docs/operations.md)
    assert out == (f"remoting (trio-remoting) {remoting.__version__}; codec: "
                   f"{codec_native.STATUS}")
    assert codec_native.STATUS.startswith(("compiled", "pure Python"))


@pytest.mark.parametrize(("argv", "says"), [
    (["call", "127.0.0.1:1", "5", "--timeout", "-1"], "must be > 0 seconds"),
    (["call", "127.0.0.1:1", "5", "--body-file", "/no/such/file"], "cannot read --body-file"),
    (["call", "127.0.0.1:1", "5", "--timeout", "2"], "refused"),
    (["serve", "examples.echo_service:processors", "--port", "70000"], "0-65535"),
    (["serve", "examples.echo_service:processors", "--port", "-5"], "0-65535"),
    (["serve", "examples.echo_service:processors", "--bind", "nosuch.invalid"],
     "does not resolve"),
    (["ping", "127.0.0.1:1", "--count", "0"], "must be >= 1"),
])
def test_a_users_mistake_is_one_line_on_stderr_and_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str],
) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert code == 2
    assert says in err
    assert "Traceback" not in err


def test_a_port_in_use_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert main(["serve", "examples.echo_service:processors", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert "already in use" in err and "Traceback" not in err


def test_ping_when_every_attempt_fails_sums_up_and_reports_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["ping", "127.0.0.1:1", "--count", "2", "--timeout", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines()[-1] == "2 sent, 0 answered, 2 failed"
    assert captured.err.count("RemotingConnectError") == 2


def test_serve_finds_the_factory_next_to_it_and_logs_json_when_it_stops(
    tmp_path: Path,
) -> None:
    (tmp_path / "my_service.py").write_text(
        "from processors import AsyncEchoProcessor\n\n"
        "def make():\n    return {2: AsyncEchoProcessor()}\n")
    proc = Proc("--log-format", "json", "serve", "my_service:make", cwd=tmp_path)
    try:
        port = proc.expect(r"on 127\.0\.0\.1:(\d+)").group(1)
        assert echo(f"127.0.0.1:{port}", b"found").body == b"found"
    finally:
        code = proc.stop()
    assert code == 0
    events = [json.loads(line) for line in proc.stderr.splitlines()]
    assert [e["event"] for e in events][0] == "server.started"
    assert [e["event"] for e in events][-1] == "server.stopped"
    assert all(e["level"] == "info" for e in events if e["event"].startswith("server."))


def test_a_factory_that_raises_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("def make():\n    raise ValueError('no database')\n")
    result = subprocess.run([sys.executable, "-m", "remoting", "serve", "broken:make"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=30,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "remoting serve: broken:make() raised ValueError('no database')")
