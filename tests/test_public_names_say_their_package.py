"""Each public class and function says the package it is imported from, not a private module.

Set once per package (`codec._module_metadata.fixup_module_metadata`, as trio does), so
reprs and tracebacks read ``remoting.RemotingTimeoutError``, pickles name a class by its
public path, and the API reference documents each name under its package.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import pickletools
import traceback

import pytest

from codec import RequestCode
from remoting import ClientConfig, RemotingTimeoutError, TrioRemotingClient
from remoting.bus import BusCode
from remoting.queue import QueueCode

PACKAGES = ("codec", "processors", "remoting", "remoting.bus", "remoting.queue",
            "remoting.spark")


def public_names(package: str) -> list[tuple[str, object]]:
    """The classes and functions ``package`` exports and defines (not re-exports of another
    package of ours, as ``remoting.RemotingCommand`` is codec's)."""
    module = importlib.import_module(package)
    names: list[tuple[str, object]] = []
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            home = next((p for p in PACKAGES if p != package and name in getattr(
                importlib.import_module(p), "__all__", ()) and getattr(
                importlib.import_module(p), name) is obj and obj.__module__ == p), None)
            if home is None:
                names.append((name, obj))
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_says_its_package_and_is_found_there(package: str) -> None:
    names = public_names(package)
    assert len(names) > 3
    assert [(name, obj.__module__) for name, obj in names
            if obj.__module__ != package] == []
    module = importlib.import_module(package)
    for name, obj in names:
        # what pickle does to store a class or function by reference
        assert getattr(module, obj.__qualname__) is obj, name  # type: ignore[attr-defined]


def test_reprs_and_tracebacks_name_the_package() -> None:
    assert repr(ClientConfig) == "<class 'remoting.ClientConfig'>"
    assert repr(BusCode) == "<enum 'BusCode'>" and BusCode.__module__ == "remoting.bus"
    error = RemotingTimeoutError("127.0.0.1:1", 0.5)
    line = traceback.format_exception_only(error)[-1]
    assert line.startswith("remoting.RemotingTimeoutError: no response from 127.0.0.1:1")
    assert repr(RequestCode.HEART_BEAT) == "<RequestCode.HEART_BEAT: 34>"


@pytest.mark.parametrize("value", [
    ClientConfig(connect_timeout=1.5), RemotingTimeoutError("127.0.0.1:1", 0.5, "connect"),
    QueueCode(QueueCode.PUBLISH), BusCode(BusCode.SEND)])
def test_pickles_store_the_public_path_and_load_back(value: object) -> None:
    data = pickle.dumps(value)
    strings = [arg for _, arg, _ in pickletools.genops(data) if isinstance(arg, str)]
    # the class by its public path (a rebuild helper, where one is needed, is private)
    cls = type(value)
    assert [cls.__module__, cls.__qualname__] in [strings[i:i + 2] for i in range(len(strings))]
    assert cls.__module__ in ("remoting", "remoting.bus", "remoting.queue")
    back = pickle.loads(data)
    assert type(back) is type(value)
    assert (back == value) if not isinstance(value, Exception) else (str(back) == str(value))


def test_private_modules_keep_their_own_names() -> None:
    # only what a package exports is renamed: the core's classes say where they are
    assert TrioRemotingClient.__module__ == "remoting"
    from remoting._core._trio_driver._invoker import Invoker
    assert Invoker.__module__ == "remoting._core._trio_driver._invoker"
