"""The producer, both faces: `Producer` (blocking, any thread) and `TrioProducer`
(``async with open_producer(...)``).

Both hold a `_ProducerCore`: the settings, the cluster state (`ClientState`) and the message
preparation; every send is the `_send.send` flow, run by the face's driver (`_drive`). The
blocking face runs a send in the calling thread on a thread-driven `RemotingClient` (no hop
to another thread: the client sends and reads from the caller), ``send_async`` from the
client's callbacks, and one timer thread for the routes (30 s) and heartbeats (30 s); the trio
face runs sends in the calling task and its timer as a task.
"""

from __future__ import annotations

import threading
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Self

import trio

from .. import ClientConfig, RemotingClient, TrioRemotingClient, open_client
from .._checks import blocking_call, outside_trio
from .._log import log
from ._drive import run_blocking, run_callbacks, run_trio
from ._errors import RocketMQError
from ._flows import heartbeat, refresh_routes, unregister
from ._ids import client_id, local_ip
from ._instance import ClientState, name_server_list
from ._send import Outgoing, Prepared, SendOptions, prepare, prepare_batch, send
from ._telemetry import NO_SPAN, telemetry_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Mapping
    from types import TracebackType

    from ._flows import Flow
    from ._message import SendResult
    from ._telemetry import RocketMQTelemetry, SendTelemetry

__all__ = ["Producer", "SendFuture", "TrioProducer", "open_producer"]

DEFAULT_GROUP = "DEFAULT_PRODUCER"  # MixAll.DEFAULT_PRODUCER_GROUP
_TRIO_PRODUCER = "remoting.rocketmq.open_producer() and `await producer.{}(...)`"


class SendFuture:
    """The outcome of ``send_async``: ``result(timeout)`` from a thread, ``await wait()``
    from trio, ``add_done_callback(fn)``; completed once.

    Lighter than a ``concurrent.futures.Future`` (no condition variable unless a thread
    waits): one per async send."""

    __slots__ = ("_callbacks", "_done", "_error", "_event", "_lock", "_result")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._result: SendResult | None = None
        self._error: BaseException | None = None
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[SendFuture], object]] = []

    def done(self) -> bool:
        """Return whether the send is over."""
        return self._done

    def _wait(self, timeout: float | None) -> None:
        if self._done:
            return
        outside_trio("SendFuture.result", "`await future.wait()`")
        with self._lock:
            if self._done:
                return
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        if not event.wait(timeout):
            raise TimeoutError(f"the send is not over after {timeout} s")

    def result(self, timeout: float | None = None) -> SendResult:
        """Wait up to ``timeout`` seconds (None: as long as it takes) for the send; return
        its `SendResult` or raise its error (as `Producer.send` would).

        Raises:
            TimeoutError: the send is not over yet.
        """
        self._wait(timeout)
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Wait as `result` does; return the send's error, or None if it succeeded."""
        self._wait(timeout)
        return self._error

    def add_done_callback(self, fn: Callable[[SendFuture], object]) -> None:
        """Call ``fn(self)`` once the send is over (now, in this thread, if it is)."""
        with self._lock:
            if not self._done:
                self._callbacks.append(fn)
                return
        _run_callback(fn, self)

    async def wait(self) -> SendResult:
        """Wait (in trio) until the send is over; return its result or raise its error."""
        if not self._done:
            token = trio.lowlevel.current_trio_token()
            event = trio.Event()
            self.add_done_callback(lambda _f: token.run_sync_soon(event.set))
            await event.wait()
        return self.result()

    def set_result(self, result: SendResult) -> None:
        self._complete(result, None)

    def set_exception(self, error: BaseException) -> None:
        self._complete(None, error)

    def _complete(self, result: SendResult | None, error: BaseException | None) -> None:
        with self._lock:
            if self._done:
                return
            self._result, self._error, self._done = result, error, True
            event, callbacks, self._callbacks = self._event, self._callbacks, []
        if event is not None:
            event.set()
        for fn in callbacks:
            _run_callback(fn, self)


def _run_callback(fn: Callable[[SendFuture], object], future: SendFuture) -> None:
    try:
        fn(future)
    except Exception:
        log.error("callback.failed", exc_info=True)


class _ProducerCore:
    """What both faces share: settings, cluster state, preparing messages."""

    def __init__(self, name_servers: str | list[str], group: str, *, timeout: float,
                 retries: int, compress_over: int, max_message_bytes: int,
                 latency_fault: bool, access_key: str | None, secret_key: str | None,
                 client_config: ClientConfig | None, instance_name: str | None) -> None:
        if not isinstance(group, str) or not group:
            raise ValueError(f"a producer group is a non-empty str, got {group!r}")
        if not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries is an int >= 0, got {retries!r}")
        if not timeout > 0:
            raise ValueError(f"timeout is seconds > 0, got {timeout!r}")
        if (access_key is None) != (secret_key is None):
            raise ValueError("give both access_key and secret_key, or neither")
        self.options = SendOptions(group=group, timeout=float(timeout), retries=retries,
                                   compress_over=compress_over,
                                   max_message_bytes=max_message_bytes)
        self.config = client_config or ClientConfig()
        self.state = ClientState(name_server_list(name_servers),
                                 client_id(local_ip(), instance_name),
                                 latency_fault=latency_fault)
        self.state.producer_groups = [group]
        self.credentials = (access_key, secret_key) if access_key and secret_key else None
        self.telemetry: RocketMQTelemetry | None = telemetry_of(self.config)

    @property
    def group(self) -> str:
        return self.options.group

    def install_hooks(self, client: RemotingClient | TrioRemotingClient) -> None:
        if self.credentials is not None:
            from .. import AclClientRPCHook

            client.register_rpc_hook(AclClientRPCHook(*self.credentials))

    def one(self, topic: str, body: object, tags: str | None, keys: str | list[str] | None,
            properties: Mapping[str, str] | None, sharding_key: str | None
            ) -> tuple[Prepared, SendTelemetry]:
        """Return a message ready to send and its send's telemetry (its trace context added
        to the message's properties)."""
        prepared = prepare(self.options, topic, body, tags=tags, keys=keys,
                           properties=properties, sharding_key=sharding_key)
        if self.telemetry is None:
            return prepared, NO_SPAN
        send = self.telemetry.sending(topic, 1, "send")
        fields = send.fields()
        if fields:
            prepared.properties += "".join(f"\x02{k}\x01{v}" for k, v in fields.items())
        return prepared, send

    def batch(self, topic: str, bodies: Iterable[bytes | Outgoing], tags: str | None,
              keys: str | list[str] | None, properties: Mapping[str, str] | None
              ) -> tuple[Prepared, SendTelemetry]:
        """As `one`, for a batch (each message carries the batch span's context)."""
        if self.telemetry is None:
            return prepare_batch(self.options, topic, bodies, tags=tags, keys=keys,
                                 properties=properties), NO_SPAN
        items = list(bodies)
        send = self.telemetry.sending(topic, len(items), "send")
        try:
            prepared = prepare_batch(self.options, topic, items, tags=tags, keys=keys,
                                     properties={**(properties or {}), **send.fields()})
        except BaseException as exc:
            send.end(exc)
            raise
        return prepared, send

    def job(self, name: str) -> Flow[object]:
        """Return the flow of a periodic job (`ClientState.due`)."""
        if name == "routes":
            return refresh_routes(self.state, list(self.state.publish), producer=True)
        return heartbeat(self.state)


class _ProducerFace:
    """What both faces show of their producer."""

    _core: _ProducerCore

    @property
    def group(self) -> str:
        """The producer group."""
        return self._core.group

    @property
    def client_id(self) -> str:
        """This producer's client id (``ip@pid#n``)."""
        return self._core.state.client_id


class Producer(_ProducerFace):
    """A RocketMQ producer, blocking face (Java's ``DefaultMQProducer``).

    ``Producer(["127.0.0.1:9876"], group="orders")`` (or ``"ns1:9876;ns2:9876"``); use it
    in a ``with`` block, or call `start` and `shutdown`. Every method may be called from any
    thread; never from a thread that runs trio (use `open_producer` there).

    Args:
        name_servers: the name servers' ``host:port``, a list or a ``;``-separated str.
        group: the producer group (announced in heartbeats).
        timeout: seconds a send may take in all, its retries included (``sendMsgTimeout``).
        retries: other brokers tried after a failed attempt (``retryTimesWhenSendFailed``).
        compress_over: bodies this long or longer are zlib-compressed, as Java's producer
            does (``compressMsgBodyOverHowmuch``).
        max_message_bytes: the largest body (or batch) sent (``maxMessageSize``).
        latency_fault: avoid brokers that were slow or failed (``sendLatencyFaultEnable``).
        access_key, secret_key: sign requests for a broker with ACL (``plain_acl.yml``).
        client_config: the transport's settings (TLS, frame sizes, telemetry).
        instance_name: the client id is ``ip@instance_name`` (default ``ip@pid#n``).
    """

    def __init__(self, name_servers: str | list[str], group: str = DEFAULT_GROUP, *,
                 timeout: float = 3.0, retries: int = 2, compress_over: int = 4096,
                 max_message_bytes: int = 4 * 1024 * 1024, latency_fault: bool = True,
                 access_key: str | None = None, secret_key: str | None = None,
                 client_config: ClientConfig | None = None,
                 instance_name: str | None = None) -> None:
        self._core = _ProducerCore(
            name_servers, group, timeout=timeout, retries=retries,
            compress_over=compress_over, max_message_bytes=max_message_bytes,
            latency_fault=latency_fault, access_key=access_key, secret_key=secret_key,
            client_config=client_config, instance_name=instance_name)
        self._client: RemotingClient | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None

    def start(self) -> Self:
        """Start the producer (idempotent): its client and its timer thread."""
        with self._lock:
            if self._client is not None:
                return self
            if self._stop.is_set():
                raise RocketMQError("the producer was shut down: make a new one")
            client = RemotingClient(self._core.config).start()
            self._core.install_hooks(client)
            self._core.state.start_timers(time.monotonic(), ["routes", "heartbeat"])
            self._client = client
            self._timer = threading.Thread(target=self._run_timer, daemon=True,
                                           name="rocketmq-producer-timer")
            self._timer.start()
            log.info("rocketmq.producer_started", group=self.group, client_id=self.client_id)
        return self

    def shutdown(self) -> None:
        """Unregister from the brokers and close the producer's connections (idempotent)."""
        with self._lock:
            client, self._client = self._client, None
            self._stop.set()
            timer, self._timer = self._timer, None
        if client is None:
            return
        if timer is not None and timer is not threading.current_thread():
            timer.join(10)
        try:
            run_blocking(unregister(self._core.state, producer_group=self.group), client)
        finally:
            client.shutdown()
        log.info("rocketmq.producer_stopped", group=self.group, client_id=self.client_id)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.shutdown()

    def _running(self) -> RemotingClient:
        client = self._client
        if client is None:
            raise RocketMQError("the producer is not running: call start() or use it in a "
                                "with block")
        return client

    def _run_timer(self) -> None:
        state = self._core.state
        while not self._stop.is_set():
            client = self._client
            if client is None:
                return
            for job in state.due(time.monotonic()):
                try:
                    run_blocking(self._core.job(job), client)
                except Exception as exc:  # a closed client at shutdown, a bug: keep going
                    log.warning("rocketmq.timer_failed", job=job, error=repr(exc)[:200])
            next_due = state.next_due()
            self._stop.wait(max(0.05, (next_due or time.monotonic() + 1) - time.monotonic()))

    # ------------------------------------------------------------------ sending

    @blocking_call("Producer.send", _TRIO_PRODUCER.format("send"))
    def send(self, topic: str, body: bytes, *, tags: str | None = None,
             keys: str | list[str] | None = None, properties: Mapping[str, str] | None = None,
             sharding_key: str | None = None, timeout: float | None = None) -> SendResult:
        """Send one message and wait for the broker's answer.

        ``sharding_key`` sends every message of the same key to the same queue (ordered
        messages: consume them with ``orderly=True``).

        Raises:
            SendFailedError: every attempt failed (``attempts``: each broker's error).
            MQBrokerError: the broker refused the message (``MESSAGE_ILLEGAL``...).
            TopicRouteError: no name server answered, or none knows the topic and brokers
                do not create topics.
            RocketMQError: the producer is not running.
            TypeError, ValueError: a bad argument (nothing sent).
        """
        client = self._running()
        prepared, tele = self._core.one(topic, body, tags, keys, properties, sharding_key)
        with tele:
            result = run_blocking(send(self._core.state, self._core.options, prepared,
                                       timeout=timeout), client)
        assert result is not None
        return result

    @blocking_call("Producer.send_batch", _TRIO_PRODUCER.format("send_batch"))
    def send_batch(self, topic: str, bodies: Iterable[bytes | Outgoing], *,
                   tags: str | None = None, keys: str | list[str] | None = None,
                   properties: Mapping[str, str] | None = None,
                   timeout: float | None = None) -> SendResult:
        """Send several messages in one SEND_BATCH_MESSAGE frame, to one queue.

        Each item is a body, or an `Outgoing` with its own tags, keys or properties; the
        keyword arguments apply to the others. ``result.msg_ids`` lists the ids in order.

        Raises:
            as `send`.
        """
        client = self._running()
        prepared, tele = self._core.batch(topic, bodies, tags, keys, properties)
        with tele:
            result = run_blocking(send(self._core.state, self._core.options, prepared,
                                       timeout=timeout), client)
        assert result is not None
        return result

    @blocking_call("Producer.send_oneway", _TRIO_PRODUCER.format("send_oneway"))
    def send_oneway(self, topic: str, body: bytes, *, tags: str | None = None,
                    keys: str | list[str] | None = None,
                    properties: Mapping[str, str] | None = None,
                    sharding_key: str | None = None) -> None:
        """Send one message without waiting for an answer (no retry: it may be lost).

        Raises:
            SendFailedError: it could not be written.
            TopicRouteError, RocketMQError, TypeError, ValueError: as `send`.
        """
        client = self._running()
        prepared, tele = self._core.one(topic, body, tags, keys, properties, sharding_key)
        with tele:
            run_blocking(send(self._core.state, self._core.options, prepared, oneway=True),
                         client)

    @blocking_call("Producer.send_async", _TRIO_PRODUCER.format("send_async"))
    def send_async(self, topic: str, body: bytes, *,
                   callback: Callable[[SendFuture], object] | None = None,
                   tags: str | None = None, keys: str | list[str] | None = None,
                   properties: Mapping[str, str] | None = None,
                   sharding_key: str | None = None,
                   timeout: float | None = None) -> SendFuture:
        """Send one message without waiting; return a `SendFuture`.

        ``callback(future)`` runs once the send is done (``future.result()`` returns its
        `SendResult` or raises as `send` does), on the client's callback threads. Retries go
        to other brokers as for `send`.

        Raises:
            RocketMQError, TypeError, ValueError: at once, nothing sent.
        """
        client = self._running()
        prepared, tele = self._core.one(topic, body, tags, keys, properties, sharding_key)
        future = SendFuture()
        if callback is not None:
            future.add_done_callback(callback)

        def done(result: SendResult | None, error: BaseException | None) -> None:
            tele.end(error)
            if error is not None:
                future.set_exception(error)
            else:
                assert result is not None
                future.set_result(result)

        run_callbacks(send(self._core.state, self._core.options, prepared, timeout=timeout),
                      client, done)
        return future


class TrioProducer(_ProducerFace):
    """A RocketMQ producer, trio face: `Producer`'s methods, awaited. Made by
    `open_producer`; use it in that block's tasks."""

    def __init__(self, core: _ProducerCore, client: TrioRemotingClient,
                 nursery: trio.Nursery) -> None:
        self._core = core
        self._client = client
        self._nursery = nursery
        self._closed = False

    def _running(self) -> TrioRemotingClient:
        if self._closed:
            raise RocketMQError("the producer's block has ended")
        return self._client

    async def send(self, topic: str, body: bytes, *, tags: str | None = None,
                   keys: str | list[str] | None = None,
                   properties: Mapping[str, str] | None = None,
                   sharding_key: str | None = None, timeout: float | None = None
                   ) -> SendResult:
        """As `Producer.send`, awaited."""
        client = self._running()
        prepared, tele = self._core.one(topic, body, tags, keys, properties, sharding_key)
        with tele:
            result = await run_trio(send(self._core.state, self._core.options, prepared,
                                         timeout=timeout), client)
        assert result is not None
        return result

    async def send_batch(self, topic: str, bodies: Iterable[bytes | Outgoing], *,
                         tags: str | None = None, keys: str | list[str] | None = None,
                         properties: Mapping[str, str] | None = None,
                         timeout: float | None = None) -> SendResult:
        """As `Producer.send_batch`, awaited."""
        client = self._running()
        prepared, tele = self._core.batch(topic, bodies, tags, keys, properties)
        with tele:
            result = await run_trio(send(self._core.state, self._core.options, prepared,
                                         timeout=timeout), client)
        assert result is not None
        return result

    async def send_oneway(self, topic: str, body: bytes, *, tags: str | None = None,
                          keys: str | list[str] | None = None,
                          properties: Mapping[str, str] | None = None,
                          sharding_key: str | None = None) -> None:
        """As `Producer.send_oneway`, awaited."""
        client = self._running()
        prepared, tele = self._core.one(topic, body, tags, keys, properties, sharding_key)
        with tele:
            await run_trio(send(self._core.state, self._core.options, prepared, oneway=True),
                           client)

    async def send_async(self, topic: str, body: bytes, *,
                         callback: Callable[[SendFuture], object] | None = None,
                         tags: str | None = None, keys: str | list[str] | None = None,
                         properties: Mapping[str, str] | None = None,
                         sharding_key: str | None = None,
                         timeout: float | None = None) -> SendFuture:
        """As `Producer.send_async`: the send runs as a task of the producer's block;
        ``callback`` runs in a worker thread, never on the event loop."""
        client = self._running()
        prepared, tele = self._core.one(topic, body, tags, keys, properties, sharding_key)
        future = SendFuture()

        async def run() -> None:
            try:
                with tele:
                    result = await run_trio(send(self._core.state, self._core.options,
                                                 prepared, timeout=timeout), client)
            except Exception as exc:
                future.set_exception(exc)
            else:
                assert result is not None
                future.set_result(result)
            if callback is not None:
                await trio.to_thread.run_sync(_run_callback, callback, future)

        self._nursery.start_soon(run)
        return future


@asynccontextmanager
async def open_producer(name_servers: str | list[str], group: str = DEFAULT_GROUP, *,
                        timeout: float = 3.0, retries: int = 2, compress_over: int = 4096,
                        max_message_bytes: int = 4 * 1024 * 1024, latency_fault: bool = True,
                        access_key: str | None = None, secret_key: str | None = None,
                        client_config: ClientConfig | None = None,
                        instance_name: str | None = None) -> AsyncIterator[TrioProducer]:
    """Run a `TrioProducer` for the block (arguments as `Producer`'s).

    Leaving the block waits for the ``send_async`` sends still running, unregisters from the
    brokers and closes the connections.
    """
    core = _ProducerCore(name_servers, group, timeout=timeout, retries=retries,
                         compress_over=compress_over, max_message_bytes=max_message_bytes,
                         latency_fault=latency_fault, access_key=access_key,
                         secret_key=secret_key, client_config=client_config,
                         instance_name=instance_name)
    raised: BaseException | None = None
    async with open_client(core.config) as client:
        core.install_hooks(client)
        core.state.start_timers(time.monotonic(), ["routes", "heartbeat"])
        async with trio.open_nursery() as timers:
            timers.start_soon(_timer_task, core, client)
            try:
                async with trio.open_nursery() as sends:
                    producer = TrioProducer(core, client, sends)
                    log.info("rocketmq.producer_started", group=group,
                             client_id=core.state.client_id)
                    try:
                        yield producer
                    except BaseException as exc:  # leaves the block as itself
                        raised = exc
                    finally:
                        producer._closed = True
            finally:
                timers.cancel_scope.cancel()
        with trio.move_on_after(5, shield=True):
            await run_trio(unregister(core.state, producer_group=group), client)
    log.info("rocketmq.producer_stopped", group=group, client_id=core.state.client_id)
    if raised is not None:
        raise raised


async def _timer_task(core: _ProducerCore, client: TrioRemotingClient) -> None:
    state = core.state
    while True:
        for job in state.due(time.monotonic()):
            try:
                await run_trio(core.job(job), client)
            except Exception as exc:
                log.warning("rocketmq.timer_failed", job=job, error=repr(exc)[:200])
        next_due = state.next_due() or time.monotonic() + 1
        await trio.sleep(max(0.05, next_due - time.monotonic()))
