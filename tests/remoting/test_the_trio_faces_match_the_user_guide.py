"""The user guide's table of what the trio faces await is exact, and the trio server has the
blocking one's ``addr`` (the guide said the trio classes "have the same methods, awaited",
while half of them are plain calls, and `TrioRemotingServer` had no ``addr``)."""

from __future__ import annotations

import inspect
import re
import threading
from pathlib import Path

import pytest
import trio

import remoting
from remoting import (
    RemotingError,
    RemotingServer,
    ResponseFuture,
    ServerConfig,
    TrioRemotingServer,
)

from ..factories import req
from .conftest import ECHO, install_standard_processors

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "user-guide.md"


def guide_table() -> dict[str, dict[str, set[str]]]:
    """{row: {"client": names, "server": names}} of the guide's table of the trio faces."""
    text = GUIDE.read_text()
    section = text[text.index("#### What the trio faces await"):]
    table: dict[str, dict[str, set[str]]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in ("awaited", "async with", "plain calls", "attributes"):
            table[cells[0]] = {"client": set(re.findall(r"`(\w+)`", cells[1])),
                               "server": set(re.findall(r"`(\w+)`", cells[2]))}
    return table


def public_members(cls: type) -> dict[str, set[str]]:
    kinds: dict[str, set[str]] = {"awaited": set(), "async with": set(), "plain calls": set(),
                                  "attributes": set()}
    for name, value in inspect.getmembers(cls):
        if name.startswith("_"):
            continue
        if isinstance(inspect.getattr_static(cls, name), property):
            kinds["attributes"].add(name)
        elif inspect.iscoroutinefunction(value):
            kinds["awaited"].add(name)
        elif inspect.isasyncgenfunction(inspect.unwrap(value)):  # an @asynccontextmanager
            kinds["async with"].add(name)
        elif callable(value):
            kinds["plain calls"].add(name)
    return kinds


@pytest.mark.parametrize(("side", "cls", "instance_attributes"), [
    ("client", remoting.TrioRemotingClient, set()),
    ("server", remoting.TrioRemotingServer, {"port"}),  # set by bind/serve
])
def test_the_guide_lists_what_each_trio_face_awaits_and_what_it_does_not(
        side: str, cls: type, instance_attributes: set[str]) -> None:
    table = guide_table()
    members = public_members(cls)
    assert table["awaited"][side] == members["awaited"]
    assert table.get("async with", {}).get(side, set()) == members["async with"]
    assert table["plain calls"][side] == members["plain calls"]
    assert table["attributes"][side] == members["attributes"] | instance_attributes


async def test_a_trio_server_has_addr_as_the_blocking_one_has() -> None:
    async with remoting.open_server(ServerConfig()) as server, remoting.open_client() as client:
        install_standard_processors(server)
        assert server.addr == f"127.0.0.1:{server.port}"
        assert (await client.invoke_sync(server.addr, req(ECHO, b"a"), 5)).body == b"a"
    with RemotingServer(ServerConfig()) as blocking:
        assert blocking.addr == f"127.0.0.1:{blocking.port}"


def test_a_server_not_bound_yet_says_so_on_both_faces() -> None:
    server = TrioRemotingServer(ServerConfig())
    with pytest.raises(RemotingError, match="not bound yet"):
        _ = server.addr
    with pytest.raises(RemotingError, match="not bound yet"):
        _ = server.port
    blocking = RemotingServer(ServerConfig())
    with pytest.raises(RemotingError, match="not started"):
        _ = blocking.port


async def test_a_trio_face_callback_runs_on_a_thread_and_hands_back_as_the_guide_says() -> None:
    token = trio.lowlevel.current_trio_token()
    seen: list[tuple[str, bool]] = []
    back_in_trio = trio.Event()

    def callback(future: ResponseFuture) -> None:
        seen.append((threading.current_thread().name, trio.lowlevel.in_trio_run()))
        trio.from_thread.run_sync(back_in_trio.set, trio_token=token)

    async with remoting.open_server(ServerConfig()) as server, remoting.open_client() as client:
        install_standard_processors(server)
        future = await client.invoke_async(server.addr, req(ECHO), 5, callback=callback)
        with trio.fail_after(5):
            await back_in_trio.wait()
            await future.wait()
    [(thread, in_trio)] = seen
    assert thread.startswith("remoting-client-callback") and not in_trio
