"""``remoting ... | head``: when the reader of the command's output leaves, the command ends
quietly with the shell's code for SIGPIPE (141), as a C tool killed by SIGPIPE does, instead
of a BrokenPipeError traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from remoting import RemotingServer, ServerConfig


@pytest.fixture
def server() -> Iterator[RemotingServer]:
    with RemotingServer(ServerConfig()) as srv:
        yield srv


def test_a_command_whose_reader_left_exits_141_without_a_traceback(
        server: RemotingServer) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has left before anything is written
    try:
        result = subprocess.run(
            [sys.executable, "-m", "remoting", "ping", server.addr, "--count", "3"],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert result.returncode == 128 + signal.SIGPIPE, result.stderr
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr
