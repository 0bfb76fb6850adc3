"""A queue service's files (real files): recovered topics hold no file descriptor; one never
attached to a server, or whose server never started, closes with ``close()`` or a ``with``
block (offsets saved); one serving refuses (its server closes it when it stops); a closed one
cannot be attached again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from remoting import RemotingClient, RemotingServer, ServerConfig
from remoting.queue import QueueClient, QueueService


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory holding three topics, written by a service that served them."""
    service = QueueService(tmp_path, segment_bytes=4096)
    with RemotingServer(ServerConfig()) as server:
        service.attach(server)
        server.start()
        with RemotingClient() as client:
            q = QueueClient(client)
            for topic in ("a", "b", "c"):
                q.publish_many(server.addr, topic, [b"x" * 500] * 20)
    return tmp_path


def test_a_service_never_attached_closes_its_files(data_dir: Path) -> None:
    before = _open_files()
    service = QueueService(data_dir)
    assert _open_files() == before  # recovered: no descriptor is kept for idle topics
    service.broker.topics["a"].groups["g"] = 7  # as a commit would
    service.close()
    service.close()  # idempotent
    assert _open_files() == before
    with QueueService(data_dir) as again:
        assert again.broker.topics["a"].groups == {"g": 7}  # the offsets were saved
    assert _open_files() == before
    with pytest.raises(RuntimeError, match="closed: make a new one"):
        again.attach(RemotingServer(ServerConfig()))


def test_a_serving_service_refuses_close_and_its_server_closes_it(data_dir: Path) -> None:
    before = _open_files()
    service = QueueService(data_dir)
    with RemotingServer(ServerConfig()) as server:
        service.attach(server)
        server.start()
        with pytest.raises(RuntimeError, match="shut the server down"):
            service.close()
    assert service.broker.closed
    service.close()  # nothing left to do
    assert _open_files() == before


def test_a_service_whose_server_never_started_closes_its_files(data_dir: Path) -> None:
    before = _open_files()
    service = QueueService(data_dir)
    service.attach(RemotingServer(ServerConfig()))
    service.close()
    assert _open_files() == before
