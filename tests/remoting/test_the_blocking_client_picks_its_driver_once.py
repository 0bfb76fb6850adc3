"""A `RemotingClient` picks its driver once, when it is made (`ClientIO`, by
``ClientConfig.io``), and then never asks which one it has: the faces hold no branch on the
driver; both drivers offer the same methods, with the same signatures."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from codec import RemotingCommand
from remoting import ClientConfig, RemotingClient, RemotingServer
from remoting._faces._client_io import CLIENT_IO, ClientIO, LoopIO, ThreadsIO

from .conftest import ECHO, install_standard_processors

FACES = Path(__file__).resolve().parents[2] / "remoting" / "_faces"
# What only the place that picks the driver may name: the drivers and what tells them apart.
DRIVER_WORDS = {"ThreadDriver", "RequestLoop", "LoopIO", "ThreadsIO", "ToThreadDriver",
                "_threads", "_requests"}


def _faces() -> list[Path]:
    return sorted(p for p in FACES.glob("*.py") if p.name != "_client_io.py")


@pytest.mark.parametrize("path", _faces(), ids=lambda p: p.name)
def test_no_face_branches_on_the_driver(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        name = (node.id if isinstance(node, ast.Name) else node.attr
                if isinstance(node, ast.Attribute) else None)
        line = getattr(node, "lineno", "?")  # (ast.Module has none)
        assert name not in DRIVER_WORDS, f"{path.name}:{line} names {name}"
        # `config.io` is read once, as the key that picks the driver; no test looks at it, or
        # at the driver (`self._io`), again
        tested = (node.test if isinstance(node, ast.If | ast.IfExp | ast.While) else node
                  if isinstance(node, ast.Compare) or (
                      isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                      and node.func.id in ("isinstance", "type", "hasattr", "getattr"))
                  else None)
        if tested is not None:
            assert not _looks_at_the_driver(tested), f"{path.name}:{line} tests the driver"


def _looks_at_the_driver(test: ast.AST) -> bool:
    """True if ``test`` reads ``config.io`` or the driver itself (``self._io``), rather than
    the answer of one of the driver's methods (``if self._io.start():``)."""
    asked = {id(n.func.value) for n in ast.walk(test)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    return any(isinstance(n, ast.Attribute) and n.attr in ("io", "_io") and id(n) not in asked
               for n in ast.walk(test))


def test_the_driver_is_picked_in_one_place() -> None:
    source = (FACES / "_blocking.py").read_text()
    assert source.count("CLIENT_IO[") == 1
    assert set(CLIENT_IO) == {"loop", "threads"}


@pytest.mark.parametrize("io", ["loop", "threads"])
def test_each_io_setting_gets_its_driver(io: str) -> None:
    client = RemotingClient(ClientConfig(io=io))  # type: ignore[arg-type]
    assert type(client._io) is CLIENT_IO[io]
    client.shutdown()


def _members(cls: type) -> dict[str, inspect.Signature | str]:
    out: dict[str, inspect.Signature | str] = {}
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            out[name] = "property"
        elif callable(value):
            out[name] = inspect.signature(value)
    return out


def test_both_drivers_offer_exactly_the_protocol() -> None:
    wanted = _members(ClientIO)
    for driver in (LoopIO, ThreadsIO):
        got = _members(driver)
        assert {k: got.get(k) for k in wanted} == wanted, driver.__name__


@pytest.mark.parametrize("io", ["loop", "threads"])
def test_a_client_of_either_driver_calls_reports_and_shuts_down_alike(io: str) -> None:
    with RemotingServer() as server:
        install_standard_processors(server)
        client = RemotingClient(ClientConfig(io=io))  # type: ignore[arg-type]
        assert not client.is_running
        with pytest.raises(Exception, match="not started"):
            client.invoke_sync(server.addr, RemotingCommand.create_request(ECHO))
        client.start()
        assert client.is_running
        client.update_name_server_address_list([server.addr])
        assert client.get_name_server_address_list() == [server.addr]
        response = client.invoke_sync(None, RemotingCommand.create_request(ECHO, body=b"x"))
        assert response.body == b"x"
        assert client.current_name_server == server.addr
        assert client.statistics().requests_sent == {ECHO: 1}
        client.shutdown()
        assert not client.is_running
        client.shutdown()  # idempotent
        with pytest.raises(Exception, match="closed"):
            client.invoke_sync(server.addr, RemotingCommand.create_request(ECHO))
