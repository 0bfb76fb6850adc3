"""What the consumer faces share: checking their arguments, and running an engine.

`consumer_setup` turns a face's arguments into `ConsumerSettings` and a `ClientState`;
`running_engine` runs an `Engine` on a new `TrioRemotingClient` for an ``async with``
block (the trio faces use it directly; the blocking faces inside their `EngineThread`).
"""

from __future__ import annotations

import math
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from .. import AclClientRPCHook, ClientConfig, open_client
from ._engine import ConsumeFrom, ConsumerSettings, Engine
from ._ids import client_id, local_ip
from ._instance import ClientState, name_server_list
from ._send import check_topic
from ._subscription import Subscription
from ._telemetry import telemetry_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ._engine import Handler, PollBuffer
    from ._telemetry import RocketMQTelemetry

__all__ = ["ConsumerSetup", "consumer_setup", "running_engine"]


@dataclass(frozen=True, slots=True)
class ConsumerSetup:
    settings: ConsumerSettings
    state: ClientState
    config: ClientConfig
    credentials: tuple[str, str] | None
    telemetry: RocketMQTelemetry | None


def _consume_from(value: object) -> ConsumeFrom:
    if value in ("first", "last"):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError('consume_from is "first", "last" or a timestamp in seconds (or '
                         f"milliseconds) since the epoch, got {value!r}")
    return int(value * 1000) if value < 1e11 else int(value)  # seconds or milliseconds


def consumer_setup(name_servers: str | list[str], group: str,
                   subscriptions: dict[str, str], *, push: bool, consume_from: object,
                   broadcasting: bool = False, orderly: bool = False,
                   max_reconsume_times: int | None = None, retry_delay_level: int = 0,
                   consume_threads: int = 20, pull_batch: int = 32,
                   max_cached_messages: int = 1000, suspend: float = 15.0,
                   offsets_dir: str | None = None, shutdown_timeout: float = 10.0,
                   auto_commit: bool = True, access_key: str | None = None,
                   secret_key: str | None = None, client_config: ClientConfig | None = None,
                   instance_name: str | None = None) -> ConsumerSetup:
    """Check a consumer's arguments; return its settings and state.

    Raises:
        TypeError, ValueError: an argument is invalid (the message names it).
    """
    if not isinstance(group, str) or not group or len(group) > 255:
        raise ValueError(f"a consumer group is a non-empty str, got {group!r}")
    for topic, expression in subscriptions.items():
        check_topic(topic)
        Subscription.parse(topic, expression, 0)  # raises for an expression of no tag
    if (access_key is None) != (secret_key is None):
        raise ValueError("give both access_key and secret_key, or neither")
    if not isinstance(pull_batch, int) or not 1 <= pull_batch <= 1024:
        raise ValueError(f"pull_batch is 1 to 1024, got {pull_batch!r}")
    if not isinstance(consume_threads, int) or consume_threads < 1:
        raise ValueError(f"consume_threads is an int >= 1, got {consume_threads!r}")
    if not 0 < suspend <= 60:
        raise ValueError(f"suspend is seconds in (0, 60], got {suspend!r}")
    if max_reconsume_times is None:
        max_reconsume_times = -1 if orderly else 16  # Java: Integer.MAX_VALUE when orderly
    settings = ConsumerSettings(
        group=group, subscriptions=tuple(subscriptions.items()), push=push,
        broadcasting=broadcasting, orderly=orderly, consume_from=_consume_from(consume_from),
        max_reconsume_times=max_reconsume_times, retry_delay_level=retry_delay_level,
        pull_batch=pull_batch, consume_threads=consume_threads,
        max_cached_messages=max_cached_messages, suspend=float(suspend),
        offsets_dir=offsets_dir, shutdown_timeout=shutdown_timeout, auto_commit=auto_commit)
    config = client_config or ClientConfig()
    state = ClientState(name_server_list(name_servers), client_id(local_ip(), instance_name))
    credentials = (access_key, secret_key) if access_key and secret_key else None
    return ConsumerSetup(settings, state, config, credentials, telemetry_of(config))


@asynccontextmanager
async def running_engine(setup: ConsumerSetup, *, handler: Handler | None = None,
                         buffer: PollBuffer | None = None) -> AsyncIterator[Engine]:
    """Run an engine for the block; leaving it shuts the engine down gracefully."""
    async with open_client(setup.config) as client:
        if setup.credentials is not None:
            client.register_rpc_hook(AclClientRPCHook(*setup.credentials))
        engine = Engine(setup.settings, setup.state, client, handler=handler, buffer=buffer,
                        telemetry=setup.telemetry)
        raised: BaseException | None = None
        async with trio.open_nursery() as nursery:
            await nursery.start(engine.run)
            try:
                yield engine
            except BaseException as exc:  # leaves the block as itself, not in a group
                raised = exc
            finally:
                engine.stop()
        if raised is not None:
            raise raised
