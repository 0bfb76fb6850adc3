"""`remoting serve` run in-process (``main(["serve", ...])``) takes SIGTERM and SIGINT only once
it serves: a start that fails leaves the program's own handlers in place."""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from types import FrameType

import pytest

from remoting.cli import main


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def _own_handler(signum: int, frame: FrameType | None) -> None:
    """The program's own handler (never called: it only has to stay installed)."""


def test_a_serve_that_cannot_listen_keeps_the_programs_handlers(
        taken_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    before = {sig: signal.signal(sig, _own_handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = main(["serve", "examples.echo_service:processors", "--bind", "127.0.0.1",
                     "--port", str(taken_port)])
        assert code != 0
        assert "already in use" in capsys.readouterr().err
        assert signal.getsignal(signal.SIGTERM) is _own_handler
        assert signal.getsignal(signal.SIGINT) is _own_handler
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
