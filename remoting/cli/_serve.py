"""``remoting serve``: run a server from a processor factory, on one or several processes.

A factory is ``"module:callable"``; the callable returns a mapping of request code to processor
(the key ``None`` is the default processor). `load_factory` refuses, with a `FactoryError`, a
factory that cannot be loaded or an entry the server could not register. Several worker
processes on one port: `remoting.cli._supervise`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._observability._stats_processor import STATS_REQUEST_CODE, StatsProcessor
from ._serving import exporting, serve_until_stopped

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from processors import AsyncRequestProcessor, RequestProcessor, StreamProcessor

    from .._config import ServerConfig
    from ..blocking import RemotingServer
    from ._telemetry import TelemetryOptions

__all__ = ["FactoryError", "load_factory", "run_server"]


class FactoryError(Exception):
    """The factory spec cannot be loaded or returned something unusable."""


def load_factory(spec: str) -> Mapping[
        int | None, RequestProcessor | AsyncRequestProcessor | StreamProcessor]:
    """Import ``module:callable`` and call it.

    Raises:
        FactoryError: with a message saying what is wrong.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise FactoryError(f"factory must be 'module:callable', got {spec!r}")
    here = os.getcwd()  # as uvicorn and gunicorn do: modules next to where it is run
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise FactoryError(f"cannot import {module_name!r}: {exc}") from exc
    except Exception as exc:  # the module itself raised while importing
        raise FactoryError(f"importing {module_name!r} failed: {exc!r}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise FactoryError(f"{module_name!r} has no callable {attr!r}")
    try:
        processors = factory()
    except Exception as exc:
        raise FactoryError(f"{spec}() raised {exc!r}") from exc
    if not isinstance(processors, Mapping):
        raise FactoryError(f"{spec} must return a mapping of request code to processor")
    for code, processor in processors.items():
        _check_entry(spec, code, processor)
    return processors


def _check_entry(spec: str, code: object, processor: object) -> None:
    """Refuse an entry of the factory's mapping that the server could not register.

    Raises:
        FactoryError: naming the entry and what a good one is.
    """
    from processors import AsyncRequestProcessor, RequestProcessor, StreamProcessor

    from .._checks import processor_registration, request_code

    try:
        if code is not None:
            request_code(code)
    except TypeError:
        raise FactoryError(f"{spec} returned the key {code!r}: request codes are ints "
                           "(None: the default processor)") from None
    except ValueError as exc:
        raise FactoryError(f"{spec} returned the code {code}: request codes must fit the "
                           f"wire's int32 ({exc})") from None
    if not isinstance(processor, RequestProcessor | AsyncRequestProcessor | StreamProcessor):
        raise FactoryError(f"{spec} returned {type(processor).__name__} for code {code!r}: "
                           "processors subclass processors.RequestProcessor, "
                           "AsyncRequestProcessor or StreamProcessor")
    try:  # the code is checked above
        processor_registration(None, processor, None, None)
    except (TypeError, ValueError) as exc:  # a sync processor whose method is async
        raise FactoryError(f"{spec} returned a processor for code {code!r} that cannot "
                           f"serve: {exc}") from exc


def _started_server(config: ServerConfig, processors: Mapping[
        int | None, RequestProcessor | AsyncRequestProcessor | StreamProcessor]
                    ) -> RemotingServer:
    """Return a started server with ``processors`` (and the stats processor unless one of
    them serves its code)."""
    from ..blocking import RemotingServer

    server = RemotingServer(config)
    for code, processor in processors.items():
        if code is None:
            server.register_default_processor(processor)
        else:
            server.register_processor(code, processor)
    if STATS_REQUEST_CODE not in processors:
        server.register_processor(STATS_REQUEST_CODE, StatsProcessor(server.statistics))
    try:
        server.start()
    except BaseException:
        server.shutdown()
        raise
    return server


def run_server(spec: str, config: ServerConfig, ready: Callable[[], object] | None = None,
               stop: threading.Event | None = None,
               telemetry: TelemetryOptions | None = None) -> None:
    """Serve the factory's processors (plus the stats processor) until SIGTERM/SIGINT,
    exporting telemetry if asked (the SDK is configured before the server starts); call
    ``ready`` once serving."""
    processors = load_factory(spec)
    with exporting(telemetry, config.bind_address):
        server = _started_server(config, processors)
        try:
            serve_until_stopped(f"serving {spec} on {config.bind_address}:{server.port}",
                                stop, ready)
        finally:
            server.shutdown()
