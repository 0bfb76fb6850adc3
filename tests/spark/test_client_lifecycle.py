"""The worker's client: one per process, never pickled, fresh after fork, reuse on and off."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import uuid
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from remoting import ClientConfig, RemotingCommand, RemotingError
from remoting.spark import get_client, remote_batch_udf, remote_udf

from .service import BATCH_UPPER, UPPER, WHO, upper

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .conftest import Service

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def strings(spark: SparkSession, rows: int, partitions: int) -> DataFrame:
    from pyspark.sql import functions as F

    return spark.range(rows, numPartitions=partitions).select(
        "id", F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"))


def test_one_client_per_worker_process_with_reuse_on(spark: SparkSession, service: Service) -> None:
    from pyspark.accumulators import AccumulatorParam

    class SetParam(AccumulatorParam[set[int]]):
        def zero(self, value: set[int]) -> set[int]:
            return set()

        def addInPlace(self, a: set[int], b: set[int]) -> set[int]:  # noqa: N802
            return a | b

    pids = spark.sparkContext.accumulator(set(), SetParam())
    tag = uuid.uuid4().hex
    udf = remote_udf(service.addr, WHO, header={"tag": tag},
                     on_batch=lambda _: pids.add({os.getpid()}))  # in the UDF's own process

    rows = strings(spark, 2_000, partitions=8).withColumn("echo", udf("s")).collect()

    assert all(r["echo"] == r["s"] for r in rows)
    # 8 tasks of 3 Arrow batches each, on reused workers: one client (one connection) per
    # worker process, however many tasks and batches it ran. (How many processes ran them
    # depends on what ran before: Spark keeps idle workers of earlier jobs.)
    assert 1 <= len(pids.value) < 8
    assert len(service.recorder.clients[tag]) == len(pids.value)


def test_worker_reuse_off_gives_one_client_per_task(service: Service) -> None:
    tag = uuid.uuid4().hex
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)

    done = subprocess.run(
        [sys.executable, "-m", "tests.spark.reuse_off_job", service.addr, tag, "4"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "rows=1000 bad=0" in done.stdout
    # Every task ran in a fresh worker process, which made its own client.
    assert len(service.recorder.clients[tag]) == 4


def test_udf_closure_pickles_without_a_client(service: Service) -> None:
    import pandas as pd
    from pyspark import cloudpickle

    config = ClientConfig(connect_timeout=2.0)
    client = get_client(config)  # a live client in this process must not leak into the UDF
    udf = remote_udf(service.addr, UPPER, config=config)

    data = cloudpickle.dumps(udf.func)  # type: ignore[attr-defined]  # (pyspark's, not RemoteUDF's)

    assert b"RemotingClient" not in data
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(client)
    fn = pickle.loads(data)
    out = list(fn(iter([pd.Series(["a", None, "b"])])))
    assert out[0].tolist() == ["A", None, "B"]
    assert get_client(config) is client  # the unpickled UDF found this process's client


def test_batch_udf_closure_pickles_without_a_client(service: Service) -> None:
    from pyspark import cloudpickle

    get_client()
    data = cloudpickle.dumps(remote_batch_udf(service.addr, BATCH_UPPER).func)  # type: ignore[attr-defined]

    assert b"RemotingClient" not in data


def test_get_client_is_one_per_config_and_replaces_a_shut_down_client(service: Service) -> None:
    config = ClientConfig(connect_timeout=1.5)
    first = get_client(config)
    assert get_client(config) is first
    assert get_client(ClientConfig(connect_timeout=1.25)) is not first

    first.shutdown()
    second = get_client(config)

    assert second is not first and second.is_running
    response = second.invoke_sync(service.addr, RemotingCommand.create_request(UPPER, body=b"x"))
    assert response.body == b"X"


def test_fork_gives_a_fresh_client(service: Service) -> None:
    config = ClientConfig(connect_timeout=1.75)
    parent_client = get_client(config)
    read_end, write_end = os.pipe()

    with warnings.catch_warnings():  # 3.12+ warns about forking a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child: report, then leave without running pytest's teardown
        status = 1
        try:
            child_client = get_client(config)
            response = child_client.invoke_sync(
                service.addr, RemotingCommand.create_request(UPPER, body=b"child"), timeout=5)
            fresh = child_client is not parent_client and child_client.pid == os.getpid()
            os.write(write_end, f"{fresh} {response.body!r}".encode())
            child_client.shutdown()
            status = 0
        finally:
            os._exit(status)

    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    report = os.read(read_end, 1000).decode()
    os.close(read_end)

    assert os.waitstatus_to_exitcode(status) == 0
    assert report == "True b'CHILD'"
    assert get_client(config) is parent_client  # the parent's client is untouched
    assert parent_client.invoke_sync(
        service.addr, RemotingCommand.create_request(UPPER, body=b"p")).body == b"P"


def test_a_fork_does_not_wait_for_a_client_being_started_in_another_thread() -> None:
    import threading

    from remoting.spark import _client

    holding, forked = threading.Event(), threading.Event()
    fork_waited: list[bool] = []

    def start_a_client_slowly() -> None:  # what get_client does while a client starts
        with _client._lock:
            holding.set()
            fork_waited.append(not forked.wait(30))

    holder = threading.Thread(target=start_a_client_slowly)
    holder.start()
    assert holding.wait(30)
    with warnings.catch_warnings():  # 3.12+ warns about forking a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child: its lock is free, whatever the parent's thread holds
        os._exit(0 if _client._lock.acquire(blocking=False) else 1)
    forked.set()
    holder.join()
    _, status = os.waitpid(pid, 0)
    assert fork_waited == [False]  # the fork went ahead while the lock was held
    assert os.waitstatus_to_exitcode(status) == 0


def test_importing_remoting_and_processors_imports_neither_pyspark_nor_pyarrow() -> None:
    code = ("import sys, remoting, processors; "
            "bad = [m for m in ('pyspark', 'pyarrow', 'pandas') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)

    assert done.returncode == 0, done.stdout + done.stderr


def test_large_batches_are_split_to_fit_the_frame_limit(
        spark: SparkSession, service: Service) -> None:
    from pyspark.sql import functions as F

    before = service.recorder.count(BATCH_UPPER)
    config = ClientConfig(max_frame_bytes=100_000)  # 36 KB bodies after the header slack
    udf = remote_batch_udf(service.addr, BATCH_UPPER, config=config)
    df = spark.range(200, numPartitions=1).select(
        "id", F.repeat(F.concat(F.lit("row-"), F.col("id").cast("string"), F.lit(";")), 200)
        .alias("s"))  # ~1.5 KB per row: ~150 KB per Arrow batch of 100 rows

    rows = df.withColumn("up", udf("s")).collect()

    assert all(r["up"] == upper(r["s"]) for r in rows)
    assert service.recorder.count(BATCH_UPPER) - before > 2  # more requests than batches


def test_closed_client_raises_clearly() -> None:
    client = get_client(ClientConfig(connect_timeout=1.1))
    client.shutdown()
    with pytest.raises(RemotingError, match="closed"):
        client.invoke_many("127.0.0.1:1", [RemotingCommand.create_request(UPPER)])
