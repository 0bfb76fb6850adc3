"""How a `RemotingClient` drives its calls: one of two drivers behind `ClientIO`, picked
once, by ``ClientConfig.io``, when the client is made (as trio picks its IO manager once and
httpcore's pool talks to one network backend).

- `ThreadsIO` (``io="threads"``, the default): the calling threads drive the connections
  (`ThreadDriver`, one background reader for what nobody waits for); the server's requests
  run on a loop thread started only when the first one arrives (`RequestLoop`).
- `LoopIO` (``io="loop"``): the trio core (a `TrioRemotingClient`) runs in a loop thread of
  its own; every call is handed to it through the endpoint's inbox.

The face keeps its own state (closed or not, its lock, what shuts a collected client down)
and asks its driver for the rest; it never asks which driver it has.
"""

from __future__ import annotations

import threading
from threading import get_ident
from time import monotonic
from typing import TYPE_CHECKING, Final, Protocol

from .._checks import loop_thread_refused
from .._core._loop_thread import LoopThread, on_loop
from .._core._thread_driver._request_loop import RequestLoop
from .._core._thread_driver._thread_driver import ThreadDriver
from .._core._thread_driver._to_thread import ToThreadDriver
from .._errors import RemotingError
from .._observability._otel_setup import install_telemetry

if TYPE_CHECKING:
    from .._config import ClientConfig
    from .._observability._statistics import EndpointStatistics
    from ._trio import TrioRemotingClient

__all__ = ["CLIENT_IO", "ClientIO", "LoopIO", "ThreadsIO"]

_NOT_STARTED: Final = "RemotingClient is not started: call start() first"


class ClientIO(Protocol):
    """What a `RemotingClient` asks of its driver (see the module docstring)."""

    @property
    def loop(self) -> LoopThread | None:
        """The loop thread running the endpoint now, if any (where `statistics` is taken)."""
        ...

    @property
    def running(self) -> bool:
        """True once started, while calls can be made (the face adds "not closed")."""
        ...

    def start(self) -> bool:
        """Start what must run before the first call (idempotent); True if this started it
        (the face then arms what shuts a collected client down)."""
        ...

    def check_caller(self) -> None:
        """Raise if no call can be made now from this thread: `RemotingError` if not
        started, or its loop ended; `RuntimeError` in the endpoint's loop thread (a blocking
        call there would wait for the loop it stalls)."""
        ...

    def stop(self, deadline: float, *, wait: bool) -> None:
        """Shut down (the first shutdown call only): close the connections, fail what is
        pending, end the threads; with ``wait``, until they ended or ``deadline``
        (`time.monotonic`) passed."""
        ...

    def wait_stopped(self, deadline: float) -> None:
        """Wait for the shutdown another call began, until ``deadline``."""
        ...

    def collected(self) -> None:
        """Shut down a started client collected without `RemotingClient.shutdown`, in
        whichever thread collected it (joining nothing that thread may be part of)."""
        ...

    def statistics(self) -> EndpointStatistics:
        """Return a frozen snapshot of the counters."""
        ...

    def serving_changed(self) -> None:
        """A processor was registered or a stream opened: the server's requests may now come
        at any time, not only while a call waits."""
        ...

    def opening_stream(self) -> None:
        """A stream is about to be opened: its items are requests, run on a loop.

        Raises:
            RemotingError: the client is shut down.
        """
        ...

    def set_addresses(self, addrs: list[str]) -> None:
        """Replace the address list of ``addr=None`` calls (any thread).

        Raises:
            TypeError: ``addrs`` is a single string, not a list of them.
            RemotingConnectError: an address is not ``"host:port"``.
        """
        ...

    def addresses(self) -> list[str]:
        """Return the address list."""
        ...

    @property
    def current_address(self) -> str | None:
        """The address from the list that ``addr=None`` calls use now."""
        ...


class LoopIO:
    """``io="loop"``: the trio core in a loop thread of its own (see the module docstring)."""

    def __init__(self, core: TrioRemotingClient, config: ClientConfig) -> None:
        self._core = core
        self._loop: LoopThread | None = None
        self._stopping: LoopThread | None = None  # the loop a shutdown stops; kept once it ended

    @property
    def loop(self) -> LoopThread | None:
        return self._loop

    @property
    def running(self) -> bool:
        return self._loop is not None and self._loop.alive

    def start(self) -> bool:
        if self._loop is not None or self._stopping is not None:
            return False
        loop = LoopThread("remoting-client")
        loop.start(self._core.serve)
        self._loop = loop
        return True

    def check_caller(self) -> None:
        loop = self._loop
        if loop is None:
            raise RemotingError(_NOT_STARTED)
        if not loop.alive:
            raise RemotingError("RemotingClient's event loop has stopped; create a new one")
        if get_ident() == self._core.endpoint.loop_thread_id:
            raise loop_thread_refused()

    def stop(self, deadline: float, *, wait: bool) -> None:
        loop, self._loop = self._loop, None
        if loop is None:  # never started
            return
        self._stopping = loop
        loop.stop(join=False)
        if wait:
            loop.join(deadline)

    def wait_stopped(self, deadline: float) -> None:
        if self._stopping is not None:
            self._stopping.join(deadline)

    def collected(self) -> None:
        if self._loop is not None:
            self._loop.stop(join=False)  # no join: this may be any thread, the loop's too

    def statistics(self) -> EndpointStatistics:
        return on_loop(self._core.endpoint, self._loop, self._core.statistics)

    def serving_changed(self) -> None:
        """Nothing to do: the loop reads every connection at any time."""

    def opening_stream(self) -> None:
        """Nothing to do: the loop runs already."""

    def set_addresses(self, addrs: list[str]) -> None:
        self._core.update_name_server_address_list(addrs)

    def addresses(self) -> list[str]:
        return self._core.get_name_server_address_list()

    @property
    def current_address(self) -> str | None:
        return self._core.current_name_server


class ThreadsIO:
    """``io="threads"``: the calling threads drive the connections (see the module
    docstring)."""

    def __init__(self, core: TrioRemotingClient, config: ClientConfig) -> None:
        self._endpoint = endpoint = core.endpoint
        self.requests = RequestLoop(endpoint)  # the receiving side
        self.driver = driver = ThreadDriver(endpoint, config, self.requests)  # the calling side
        endpoint.caller.use(driver, ToThreadDriver(driver), direct=driver)
        endpoint.threads = driver
        self._started = False
        self._stopped = threading.Event()  # set once a shutdown is complete

    @property
    def loop(self) -> LoopThread | None:
        return self.requests.loop

    @property
    def running(self) -> bool:
        return self._started

    def start(self) -> bool:
        if self._started:
            return False
        install_telemetry(self._endpoint)  # the SDK is configured by now, if used
        self._started = True
        return True

    def check_caller(self) -> None:
        if not self._started:
            raise RemotingError(_NOT_STARTED)
        if get_ident() == self._endpoint.loop_thread_id:  # the request loop's
            raise loop_thread_refused()

    def stop(self, deadline: float, *, wait: bool) -> None:
        if wait:
            self._stop(deadline)
        else:  # a thread of the client's own (a callback's): the threads joined include it
            threading.Thread(target=self._stop, args=(deadline,), daemon=True,
                             name="remoting-client-shutdown").start()

    def _stop(self, deadline: float) -> None:
        """Close the connections and calls, the background reader, then the request loop if
        it started (whose end closes the pools, event and callback threads), else the event
        and callback threads."""
        try:
            self.driver.close()
            self._endpoint.closed = True
            loop = self.requests.close()
            if loop is not None:
                loop.join(deadline)
            else:
                self._endpoint.events.close()
                self._endpoint.callbacks.close()
        finally:
            self._stopped.set()

    def wait_stopped(self, deadline: float) -> None:
        self._stopped.wait(max(0.0, deadline - monotonic()))

    def collected(self) -> None:
        self.driver.close()  # joins its background reader only
        if self.requests.close() is None:
            self._endpoint.events.close(0)
            self._endpoint.callbacks.close(timeout=0)

    def statistics(self) -> EndpointStatistics:
        endpoint = self._endpoint
        return self.driver.statistics(on_loop(endpoint, self.loop,
                                              endpoint.receiving_statistics))

    def serving_changed(self) -> None:
        self.driver.watch_all()

    def opening_stream(self) -> None:
        self.requests.start()

    def set_addresses(self, addrs: list[str]) -> None:
        if isinstance(addrs, str | bytes):
            raise TypeError(f"addrs must be a list of 'host:port' strings, got {addrs!r}")
        self.driver.set_addresses(addrs)

    def addresses(self) -> list[str]:
        return list(self.driver.channels.address_list.addresses)

    @property
    def current_address(self) -> str | None:
        return self.driver.channels.address_list.current


# The one place a client's driver is chosen: by ``ClientConfig.io``, once.
CLIENT_IO: Final[dict[str, type[LoopIO | ThreadsIO]]] = {"loop": LoopIO, "threads": ThreadsIO}
