"""Shared pytest configuration: hypothesis profiles, logging restored after each test, and
the blocking client's tests run on each of its ``io`` settings."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import HealthCheck, settings

from remoting import ClientConfig

# How a RemotingClient drives its connections (ClientConfig.io): every blocking test runs on
# each while both exist.
CLIENT_IO = ("threads", "loop")

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """Undo what a test (or the CLI it runs in-process) did to the library's loggers and to
    structlog's global config."""
    loggers = [logging.getLogger("remoting"), logging.getLogger()]
    saved_loggers = [(log, list(log.handlers), log.level, log.propagate) for log in loggers]
    saved = structlog.get_config()
    yield
    for log, handlers, level, propagate in saved_loggers:
        log.handlers[:] = handlers
        log.setLevel(level)
        log.propagate = propagate
    structlog.configure(**saved)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each sync test of a module that uses `RemotingClient` once per ``io`` setting (the
    trio tests there do not use it)."""
    module = metafunc.module
    if ("RemotingClient" in vars(module) or "blocking_client" in metafunc.fixturenames) and (
            not inspect.iscoroutinefunction(metafunc.function)):
        metafunc.fixturenames.append("client_io")
        metafunc.parametrize("client_io", CLIENT_IO, indirect=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Make the test's ``io`` the default of `ClientConfig` before any fixture makes a
    client (fixtures run in an order of pytest's choosing)."""
    callspec = getattr(item, "callspec", None)
    io = callspec.params.get("client_io") if callspec is not None else None
    if io is not None:
        ClientConfig.__init__.__kwdefaults__["io"] = io


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    ClientConfig.__init__.__kwdefaults__["io"] = CLIENT_IO[0]


@pytest.fixture
def client_io(request: pytest.FixtureRequest) -> str:
    """The ``io`` of every `ClientConfig` made during the test that does not choose one."""
    io: str = getattr(request, "param", CLIENT_IO[0])
    return io
