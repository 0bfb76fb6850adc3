"""Spark rows signed for an ACL server.

`remoting.spark` sends its rows through `RemotingClient.invoke_many`: with an
`AclClientRPCHook` on the client, every row is signed, also a row that fails over to the next
address (signed again there; `call_bodies` driven directly, no SparkSession). The helpers'
``hooks=`` option puts the hooks on the workers' client (`get_client`), which keeps them when
it is replaced and is never shared with a UDF made without them."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from codec import RemotingCommand, ResponseCode
from processors import EchoProcessor
from remoting import (
    AclClientRPCHook,
    AclServerRPCHook,
    ClientConfig,
    RemotingClient,
    RemotingServer,
)
from remoting.spark import (
    get_client,
    remote_batch_udf,
    remote_map_in_arrow,
    remote_udf,
    with_remote_column,
)
from remoting.spark._calls import CallSpec, call_bodies
from remoting.spark._fleet import Cooldowns

from .service import BATCH_ENRICH, BATCH_UPPER, UPPER, Recorder, register, upper

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ECHO = 1
ROWS = 300  # several growing chunks of 16
CONFIG = ClientConfig(connect_timeout=1.75)  # a client of this file's own in each process


def signer() -> AclClientRPCHook:
    return AclClientRPCHook("spark", "spark-secret")


@pytest.fixture
def acl_server() -> Iterator[RemotingServer]:
    server = RemotingServer()
    server.register_processor(ECHO, EchoProcessor())
    register(server, Recorder())
    server.register_rpc_hook(AclServerRPCHook({"spark": "spark-secret"}))
    server.start()
    try:
        yield server
    finally:
        server.shutdown()


@pytest.fixture
def dead() -> str:
    with socket.create_server(("127.0.0.1", 0)) as s:  # closed again: nothing listens there
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_every_row_is_signed_and_served(acl_server: RemotingServer, dead: str) -> None:
    bodies: list[bytes | None] = [b"row-%d" % i for i in range(ROWS)]
    bodies[7] = None  # a null row sends nothing
    spec = CallSpec(addresses=(dead, acl_server.addr), code=ECHO, timeout=5.0,
                    max_in_flight=16, header=(("topic", "T"),))
    first_is_dead = (0 - os.getpid()) % 2
    with RemotingClient() as client:
        client.register_rpc_hook(AclClientRPCHook("spark", "spark-secret"))
        outcomes = call_bodies(client, spec, bodies, first_is_dead, cooldowns=Cooldowns())
    for body, outcome in zip(bodies, outcomes, strict=True):
        if body is None:
            assert outcome is None
        else:
            assert isinstance(outcome, RemotingCommand), outcome
            assert (outcome.code, outcome.body) == (ResponseCode.SUCCESS, body)


def test_get_client_keeps_hooks_apart_and_across_replacement(acl_server: RemotingServer) -> None:
    def call(client: RemotingClient) -> int:
        request = RemotingCommand.create_request(ECHO, body=b"x")
        return client.invoke_sync(acl_server.addr, request, 5).code

    signed = get_client(CONFIG, hooks=[signer()])
    plain = get_client(CONFIG)

    assert plain is not signed
    assert get_client(CONFIG, hooks=(signer(),)) is signed  # equal hooks, one client
    assert (call(signed), call(plain)) == (ResponseCode.SUCCESS, ResponseCode.NO_PERMISSION)
    signed.shutdown()
    replaced = get_client(CONFIG, hooks=[signer()])
    assert replaced is not signed
    assert call(replaced) == ResponseCode.SUCCESS  # the new client has the hooks too


def strings(spark: SparkSession, rows: int = 400, partitions: int = 2) -> DataFrame:
    from pyspark.sql import functions as F

    return spark.range(rows, numPartitions=partitions).select(
        "id", F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"))


@pytest.mark.spark
def test_per_row_udf_with_hooks_is_served_and_without_is_refused(
        spark: SparkSession, acl_server: RemotingServer) -> None:
    signed = remote_udf(acl_server.addr, UPPER, config=CONFIG, hooks=[signer()])
    unsigned = remote_udf(acl_server.addr, UPPER, config=CONFIG, on_error="null")

    df = with_remote_column(strings(spark).withColumn("up", signed("s")), "no", unsigned, "s")
    rows = df.collect()

    assert rows and all(r["up"] == upper(r["s"]) for r in rows)
    assert all(r["no"] is None and r["no_error"]["code"] == ResponseCode.NO_PERMISSION
               for r in rows)


@pytest.mark.spark
def test_batch_helpers_with_hooks_are_served(
        spark: SparkSession, acl_server: RemotingServer) -> None:
    batch = remote_batch_udf(acl_server.addr, BATCH_UPPER, config=CONFIG, hooks=[signer()])
    mapped = remote_map_in_arrow(strings(spark), acl_server.addr, BATCH_ENRICH,
                                 "id long, s string, up string", config=CONFIG,
                                 hooks=[signer()])

    rows = strings(spark).withColumn("up", batch("s")).collect()

    assert rows and all(r["up"] == upper(r["s"]) for r in rows)
    assert sorted((r["id"], r["up"]) for r in mapped.collect()) == [
        (r["id"], r["up"]) for r in sorted(rows, key=lambda r: r["id"])]
