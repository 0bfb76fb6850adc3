"""Shared pytest configuration: hypothesis profiles, logging restored after each test, and
the tests that make a blocking client run on each of its ``io`` settings.

Which tests make one is read from their code (`pytest_generate_tests`), so unit tests that
never make one run once; a check after each test (`_one_io_made_no_blocking_client`) fails
one that made a client unseen, so none is left on one setting by mistake. A test that makes
clients on the default ``io`` on purpose says so with ``@pytest.mark.default_io``; so do the
``spark`` and ``cluster`` ones, whose clients that matter run in Spark's worker processes,
where the default set here does not reach (one made here only sets their data up).
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, settings

from remoting import ClientConfig, RemotingClient

from . import progress

# How a RemotingClient drives its connections (ClientConfig.io): every test that makes a
# blocking client runs on each while both exist.
CLIENT_IO = ("threads", "loop")

# Names whose use makes a blocking client: the class itself, and the fixture that makes one.
_BLOCKING_CLIENT_NAMES = frozenset({"RemotingClient", "blocking_client", "client_io"})
# The library's functions that make one with the default io: (module, name).
_BLOCKING_CLIENT_MAKERS = (("remoting.cli", "main"), ("remoting.spark", "get_client"))
# A test that makes one some other way requests the ``client_io`` fixture; the check in
# `_one_io_made_no_blocking_client` names any test that was missed.
# Tests with one of these markers run on the default io only (see the module docstring).
_DEFAULT_IO_MARKERS = ("default_io", "spark", "cluster")

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    progress.install(config)  # a line per finished test file (tests/progress.py)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its hook names them in ids)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the tests that use the session's SparkSession (the ``spark`` fixture) in one
    xdist group: under ``make test`` (``-n 2 --dist loadgroup``) they run in one worker,
    which starts one session (a JVM of its own, seconds to start, ~1 GB), while the other
    worker runs the rest. Spark tests that start their own (a job in a subprocess: the
    demo, tracing) go to either worker."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark"))
        if item.get_closest_marker("xdist_group") is not None:
            _name_the_group_in_the_id(item)


def _name_the_group_in_the_id(item: pytest.Item) -> None:
    """Append ``@group`` to ``item``'s id in an xdist worker running ``--dist loadgroup``,
    which is how its controller learns the groups. pytest-xdist 3.8 does it by setting
    ``item._nodeid``, which pytest 9.2 no longer reads (an item's id is ``item._id``, a
    ``NodeId``): its loadgroup then grouped nothing, and each worker started a SparkSession.
    Where pytest's internals differ, nothing is changed (xdist's own way applies)."""
    config = item.config
    if not hasattr(config, "workerinput") or not config.getvalue("loadgroup"):
        return
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # a pytest without NodeId: xdist's _nodeid works there
        return
    if not hasattr(item, "_id") or "@" in item.nodeid:
        return
    groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                     for mark in item.iter_markers("xdist_group")})
    item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")


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


def _on_default_io(node: pytest.Item) -> bool:
    """Whether ``node`` runs on the default io only (`_DEFAULT_IO_MARKERS`)."""
    return any(node.get_closest_marker(name) is not None for name in _DEFAULT_IO_MARKERS)


def _is_test_code(obj: object) -> bool:
    """Whether ``obj`` is a function or class of the test tree (whose code is read too)."""
    return getattr(obj, "__module__", "").startswith("tests.") and (
        inspect.isfunction(obj) or inspect.isclass(obj))


def _makes_a_blocking_client(obj: object) -> bool:
    """Whether ``obj`` is `RemotingClient` or one of `_BLOCKING_CLIENT_MAKERS`."""
    return obj is not None and (obj is RemotingClient or any(
        getattr(sys.modules.get(module), name, None) is obj
        for module, name in _BLOCKING_CLIENT_MAKERS))


def _reaches_a_blocking_client(roots: list[Callable[..., Any]]) -> bool:
    """Whether the code of ``roots``, or of the test-tree functions and classes it names
    (followed transitively), names a blocking client (`_BLOCKING_CLIENT_NAMES`) or calls a
    function of the library that makes one (`_BLOCKING_CLIENT_MAKERS`).

    Names are read from the compiled code (globals and attributes alike, nested functions
    included), so ``remoting.RemotingClient`` and a helper that builds one both count. The
    library is not followed further.
    """
    seen: set[CodeType] = set()
    todo: list[tuple[CodeType, dict[str, Any]]] = []

    def add(obj: object) -> None:
        if inspect.isclass(obj):
            for member in vars(obj).values():
                add(getattr(member, "__func__", member))
        elif inspect.isfunction(obj):
            fn = inspect.unwrap(obj)
            todo.append((fn.__code__, fn.__globals__))

    for root in roots:
        add(root)
    while todo:
        code, names = todo.pop()
        if code in seen:
            continue
        seen.add(code)
        for name in code.co_names:
            target = names.get(name)
            if name in _BLOCKING_CLIENT_NAMES or _makes_a_blocking_client(target):
                return True
            if _is_test_code(target):
                add(target)
        todo.extend((const, names) for const in code.co_consts if isinstance(const, CodeType))
    return False


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each sync test that makes a blocking client, itself or through its fixtures and
    helpers, once per ``io`` setting (a trio test never makes one on its own thread)."""
    explicit = "client_io" in metafunc.fixturenames
    if inspect.iscoroutinefunction(metafunc.function) or (
            _on_default_io(metafunc.definition) and not explicit):
        return
    fixtures = [defs[-1].func for name, defs in metafunc._arg2fixturedefs.items() if defs]
    # a parametrize argument may be the client class itself (``face``)
    arguments = [value for mark in metafunc.definition.iter_markers("parametrize")
                 for values in mark.args[1:2] for value in values]
    if (_BLOCKING_CLIENT_NAMES & set(metafunc.fixturenames)
            or _reaches_a_blocking_client([metafunc.function, *fixtures])
            or any(_makes_a_blocking_client(v) or isinstance(v, tuple | list) and any(
                map(_makes_a_blocking_client, v)) for v in arguments)):
        if "client_io" not in metafunc.fixturenames:
            metafunc.fixturenames.append("client_io")
        metafunc.parametrize("client_io", CLIENT_IO, indirect=True)


# Blocking clients made in this process so far (counted by `_counting_init`), for the check
# that no test making one runs on one ``io`` setting only.
_blocking_clients_made = 0
_remoting_client_init = RemotingClient.__init__


@functools.wraps(_remoting_client_init)
def _counting_init(self: RemotingClient, config: ClientConfig | None = None) -> None:
    global _blocking_clients_made
    _remoting_client_init(self, config)
    _blocking_clients_made += 1  # made: a config refused by __init__ made none


RemotingClient.__init__ = _counting_init  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _one_io_made_no_blocking_client(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a sync test that made a blocking client while running on one ``io`` setting:
    `pytest_generate_tests` did not see it make one (it did through the library)."""
    made = _blocking_clients_made
    yield
    callspec = getattr(request.node, "callspec", None)
    trio_test = request.node.get_closest_marker("trio") is not None
    if (_blocking_clients_made > made and not trio_test and not _on_default_io(request.node)
            and (callspec is None or "client_io" not in callspec.params)):
        pytest.fail("this test made a RemotingClient but runs on one io setting: request the "
                    "client_io fixture so that it runs on each (or mark it default_io if "
                    "the default is its point)", pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Make the test's ``io`` the default of `ClientConfig` before any fixture makes a
    client (fixtures run in an order of pytest's choosing)."""
    callspec = getattr(item, "callspec", None)
    io = callspec.params.get("client_io") if callspec is not None else None
    if io is not None:
        _set_default_io(io)


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    _set_default_io(CLIENT_IO[0])


def _set_default_io(io: object) -> None:
    """Make ``io`` the default of `ClientConfig`'s keyword-only ``io`` field."""
    defaults = ClientConfig.__init__.__kwdefaults__
    assert defaults is not None  # a kw_only dataclass's __init__ has them
    defaults["io"] = io


@pytest.fixture
def client_io(request: pytest.FixtureRequest) -> str:
    """The ``io`` of every `ClientConfig` made during the test that does not choose one.

    Request it in a test that makes a blocking client in a way `pytest_generate_tests`
    does not see (code it runs from a string, a library function not in
    `_BLOCKING_CLIENT_MAKERS`), so that the test runs on each ``io`` setting."""
    io: str = getattr(request, "param", CLIENT_IO[0])
    return io
