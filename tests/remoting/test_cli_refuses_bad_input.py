"""The ``remoting`` command refuses what it cannot use in one line on stderr, never with a
traceback or a loop: bad factories (one process or workers), an undecodable ``--body``, a
reply that is not statistics, a Spark master URL Spark would refuse."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from codec import RemotingCommand, ResponseCode
from processors import AsyncEchoProcessor, AsyncRequestProcessor, RequestContext
from remoting import STATS_REQUEST_CODE, RemotingClient, RemotingError, RemotingServer
from remoting.cli import main

from ..processes import ROOT, Proc

BAD_FACTORIES = """\
import os
from processors import EchoProcessor, RequestProcessor

class ExitsWithTwo(RequestProcessor):
    def process_request(self, ctx, request):
        os._exit(2)

def strkey(): return {"abc": EchoProcessor()}
def notproc(): return {1: object()}
def bigcode(): return {2**40: EchoProcessor()}
def boolkey(): return {True: EchoProcessor()}
def good(): return {9: ExitsWithTwo(), None: EchoProcessor()}
def crashes(): os._exit(1)  # not a usage error: a crash before serving
"""


@pytest.fixture
def factories(tmp_path: Path) -> Path:
    (tmp_path / "badfac.py").write_text(BAD_FACTORIES)
    return tmp_path


def serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "remoting", "serve", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


@pytest.mark.parametrize(("factory", "says"), [
    ("strkey", "badfac:strkey returned the key 'abc': request codes are ints"),
    ("notproc", "badfac:notproc returned object for code 1: processors subclass"),
    ("bigcode", "badfac:bigcode returned the code 1099511627776: request codes must fit"),
    ("boolkey", "badfac:boolkey returned the key True: request codes are ints"),
])
def test_a_factory_returning_a_bad_entry_is_one_line(factories: Path, factory: str,
                                                     says: str) -> None:
    result = serve(f"badfac:{factory}", cwd=factories)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"remoting serve: {says}")


@pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"),
                    reason="SO_REUSEPORT is not available on this platform")
@pytest.mark.parametrize(("factory", "says"), [
    ("no_such_module:f", "remoting serve: cannot import 'no_such_module'"),
    ("badfac:strkey", "remoting serve: badfac:strkey returned the key 'abc'"),
])
def test_workers_that_cannot_start_stop_the_command_in_one_line(factories: Path, factory: str,
                                                                 says: str) -> None:
    proc = Proc("serve", factory, "--workers", "2", cwd=factories)
    try:
        proc.popen.wait(30)  # TimeoutExpired if the workers are restarted for ever
    finally:
        code = proc.stop()
    assert code == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(says)


@pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"),
                    reason="SO_REUSEPORT is not available on this platform")
def test_workers_that_crash_before_serving_stop_the_command_after_three_tries(
        factories: Path) -> None:
    proc = Proc("serve", "badfac:crashes", "--workers", "2", cwd=factories)
    try:
        proc.popen.wait(30)  # TimeoutExpired if the workers are restarted for ever
    finally:
        code = proc.stop()
    assert code == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "remoting serve: workers exited with 1 before serving, 3 times in a row")
    restarts = [line for line in [*proc.seen, *proc.lines.queue] if "restarting" in line]
    assert 2 <= len(restarts) <= 4  # two per slot before the third exit, two slots


@pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"),
                    reason="SO_REUSEPORT is not available on this platform")
def test_a_worker_exiting_with_2_after_it_served_is_restarted(factories: Path) -> None:
    proc = Proc("serve", "badfac:good", "--workers", "2", cwd=factories)
    try:
        port = proc.expect(r"on 127\.0\.0\.1:(\d+) with 2 workers").group(1)
        proc.expect_all(r"serving .*? \(pid \d+\)", 2)
        with RemotingClient() as client:
            with pytest.raises(RemotingError):  # the worker died with the connection
                client.invoke_sync(f"127.0.0.1:{port}", RemotingCommand.create_request(9), 5)
        proc.expect(r"worker \d+ exited with 2; restarting")
        proc.expect_all(r"serving .*? \(pid \d+\)", 3)
        assert proc.popen.poll() is None
    finally:
        code = proc.stop()
    assert code == 0


def test_a_body_that_is_not_utf8_is_sent_as_the_bytes_given(echo_server: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "remoting", "call", echo_server, "1", "--json",
         "--body", b"a\xffb\xc3\xa9"], cwd=ROOT, capture_output=True, text=True, timeout=30,
        env=dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUTF8="1"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["body"] == {"hex": "61ff62c3a9"}


def test_a_body_that_utf8_cannot_encode_is_one_line(echo_server: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", echo_server, "1", "--body", "\ud800"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("remoting call: --body ") and err.count("\n") == 1


class Replies(AsyncRequestProcessor):
    """Answers every request with SUCCESS and a fixed body."""

    def __init__(self, body: bytes | None) -> None:
        self.body = body

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = self.body
        return response


@pytest.fixture
def echo_server() -> Iterator[str]:
    with RemotingServer() as server:
        server.register_processor(1, AsyncEchoProcessor())
        yield server.addr


@pytest.mark.parametrize("processor", [
    AsyncEchoProcessor(), Replies(b"not json \xff"), Replies(b"[1, 2]"), Replies(b"{}"),
    Replies(b'{"connections": 1}'),
    Replies(b'{"connections": 1, "in_flight": 0, "timeouts": 0, "orphaned_responses": 0, '
            b'"requests_received": {"x": 1}, "error_replies": {}, "processor_queue": {}}'),
], ids=["echo", "not-json", "a-list", "empty-object", "missing-keys", "codes-not-numbers"])
@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
def test_stats_from_a_code_not_served_by_the_stats_processor_is_one_line(
    processor: AsyncRequestProcessor, json_flag: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    with RemotingServer() as server:
        server.register_processor(STATS_REQUEST_CODE, processor)
        assert main(["stats", server.addr, *json_flag]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"remoting stats: {server.addr} answered code "
                                   f"{STATS_REQUEST_CODE} with something other than statistics")
    assert captured.err.count("\n") == 1


@pytest.fixture
def fake_demo(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Stands in for the demo job: records the master instead of starting Spark."""
    masters: list[str] = []

    def run_demo(*, rows: int, output: Path, partitions: int | None, master: str) -> int:
        masters.append(master)
        return 0

    module = types.ModuleType("remoting.spark._demo")
    module.run_demo = run_demo  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "remoting.spark._demo", module)
    return masters


@pytest.mark.parametrize("master", ["bogus://x", "", "localhost", "local[0]", "local[x]",
                                    "spark://host", "spark://host:port", "yarn-client",
                                    "k8s://"])
def test_demo_refuses_a_master_spark_would_refuse_before_starting_it(
    master: str, fake_demo: list[str], capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--master", master, "--rows", "10"]) == 2
    assert fake_demo == []  # Spark was not started
    err = capsys.readouterr().err
    assert err.startswith(f"remoting demo: --master {master!r} is not a Spark master URL")
    assert err.count("\n") == 1


@pytest.mark.parametrize("master", [
    "local", "local[4]", "local[*]", "local[2, 3]", "local[*,2]", "local-cluster[2, 1, 1024]",
    "spark://127.0.0.1:7077", "spark://a:7077,b:7077", "spark://[::1]:7077", "yarn",
    "k8s://https://10.0.0.1:6443",
])
def test_demo_passes_a_master_spark_accepts(master: str, fake_demo: list[str]) -> None:
    assert main(["demo", "--master", master, "--rows", "10"]) == 0
    assert fake_demo == [master]
