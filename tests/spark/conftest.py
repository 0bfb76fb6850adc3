"""Spark fixtures: one local[2] SparkSession for the whole run, and the test service.

The service runs in this process in a plain background thread (`RemotingServer.start`), not
in a pytest-trio fixture: those are function-scoped, and the session outlives them. Settings:
two task slots (two Python workers, as a small executor has), small Arrow batches (so every
job runs several batches per task), no UI.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from remoting import RemotingServer, ServerConfig

from .service import Recorder, register

# Spark starts `python3` from PATH for its workers unless told otherwise: this interpreter has
# the package and pyspark.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # all traffic stays on loopback
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

ROWS_PER_ARROW_BATCH = 100

SPARK_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.execution.arrow.maxRecordsPerBatch": str(ROWS_PER_ARROW_BATCH),
    "spark.python.worker.faulthandler.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
}


@dataclass
class Service:
    """The running test server and what it saw."""

    server: RemotingServer
    recorder: Recorder

    @property
    def addr(self) -> str:
        return self.server.addr


def start_service() -> Service:
    """Start a server with every test processor on an ephemeral port."""
    recorder = Recorder()
    server = RemotingServer(ServerConfig(listen_port=0, default_processor_threads=4))
    register(server, recorder)
    server.start()
    return Service(server=server, recorder=recorder)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One local[2] SparkSession for every Spark test (startup costs seconds)."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    warehouse: Path = tmp_path_factory.mktemp("spark-warehouse")
    builder = SparkSession.builder.master("local[2]").appName("trio-remoting-tests")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    builder = builder.config("spark.sql.warehouse.dir", str(warehouse))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def service() -> Iterator[Service]:
    """The test service, shared by all Spark tests."""
    svc = start_service()
    yield svc
    svc.server.shutdown()


@pytest.fixture
def fresh_service() -> Iterator[Service]:
    """A service of its own, for tests that stop it."""
    svc = start_service()
    yield svc
    svc.server.shutdown()
