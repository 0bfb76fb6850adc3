"""Fixtures of the streaming tests: the data source registered in the session's SparkSession,
a queue service of its own per test (in this process, on 127.0.0.1), and a listener that
says when a query has made progress (an event, never a sleep)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from remoting import RemotingClient, RemotingServer, ServerConfig
from remoting.queue import BlockingQueueClient, QueueClient, QueueService


@dataclass
class Queue:
    """A queue service on a server of its own, and a client of it."""

    service: QueueService
    server: RemotingServer
    client: RemotingClient
    q: BlockingQueueClient

    @property
    def addr(self) -> str:
        return self.server.addr


@pytest.fixture
def queue() -> Iterator[Queue]:
    service = QueueService(memory_messages=200_000)
    server = RemotingServer(ServerConfig(listen_port=0))
    service.attach(server)
    server.start()
    client = RemotingClient().start()
    try:
        yield Queue(service, server, client, QueueClient(client))
    finally:
        client.shutdown()
        server.shutdown()


@pytest.fixture
def streaming(spark: Any) -> Any:
    """The session's SparkSession, with the ``remoting`` data source registered."""
    from remoting.spark import register_data_source

    register_data_source(spark)
    return spark


@dataclass
class Progress:
    """The progress events of the queries of a session, by run id (a query restarted from
    its checkpoint keeps its id, and gets a new run id)."""

    batches: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def add(self, run_id: str, progress: dict[str, Any]) -> None:
        with self.changed:
            self.batches.setdefault(run_id, []).append(progress)
            self.changed.notify_all()

    def of(self, query: Any) -> list[dict[str, Any]]:
        """The progress of ``query``'s run so far."""
        with self.changed:
            return list(self.batches.get(str(query.runId), []))

    def wait_for(self, query: Any, batches: int, timeout: float = 180.0) -> None:
        """Wait until ``query`` has reported ``batches`` batches with rows (or fail)."""
        def enough() -> bool:
            done = [p for p in self.of(query) if p["numInputRows"]]
            return len(done) >= batches or not query.isActive
        with self.changed:
            assert self.changed.wait_for(enough, timeout), f"no {batches} batches in time"


@pytest.fixture
def progress(streaming: Any) -> Iterator[Progress]:
    import json

    from pyspark.sql.streaming.listener import StreamingQueryListener

    seen = Progress()

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (pyspark's)
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            seen.add(str(event.progress.runId), json.loads(event.progress.json))

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            with seen.changed:
                seen.changed.notify_all()

    listener = Listener()
    streaming.streams.addListener(listener)
    yield seen
    streaming.streams.removeListener(listener)
