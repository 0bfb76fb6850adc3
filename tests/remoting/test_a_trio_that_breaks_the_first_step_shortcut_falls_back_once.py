"""Async processors' first step runs in the reader by a shortcut that relies on how trio's
runner drives a task's coroutine (`_first_step`). A trio release that changed that protocol
must be a loud, safe event: the first endpoint to run checks the shortcut with a probe; if it
fails, ``first_step.disabled`` is logged once, and every async processor runs the public way
(a task per request) and still answers. With the trio installed, the probe passes (the CI
runs this against the newest trio on PyPI: ``make test-newest-trio``)."""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext
from remoting import open_client, open_server
from remoting._core._receiving import _first_step

from ..factories import req
from ..logs import capture_logs

SUSPENDS = 91


class Suspends(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        await trio.lowlevel.checkpoint()
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = request.body
        return response


@pytest.fixture
def unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a fresh process: the shortcut not checked yet (restored after)."""
    monkeypatch.setattr(_first_step.SelfCheck, "usable", None)


async def test_the_shortcut_works_with_the_trio_installed(unchecked: None) -> None:
    with capture_logs() as events:
        assert await _first_step.check_first_step()
    assert _first_step.first_step_usable()
    assert not [e for e in events if e["event"] == "first_step.disabled"]


async def _served_twice() -> list[bytes | None]:
    bodies = []
    for _ in range(2):  # two endpoints of one process each side: the check runs once
        async with open_server() as server, open_client() as client:
            server.register_processor(SUSPENDS, Suspends())
            for i in range(3):
                response = await client.invoke_sync(f"127.0.0.1:{server.port}",
                                                    req(SUSPENDS, b"%d" % i), timeout=10)
                bodies.append(response.body)
    return bodies


async def test_a_changed_protocol_is_logged_once_and_processors_run_the_public_way(
        unchecked: None, monkeypatch: pytest.MonkeyPatch) -> None:
    async def changed() -> str:  # what a trio that drove coroutines otherwise would do
        raise RuntimeError("a trap this version of the library does not know")

    monkeypatch.setattr(_first_step, "_probe", changed)
    stepped = []
    run_async = _first_step.Suspended.__init__

    def noted(self: _first_step.Suspended, request: object, coro: object, trap: object,
              *args: object, **kwargs: object) -> None:
        if trap is not _first_step.WHOLE:
            stepped.append(1)
        run_async(self, request, coro, trap, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_first_step.Suspended, "__init__", noted)
    with capture_logs() as events:
        bodies = await _served_twice()
    assert bodies == [b"0", b"1", b"2"] * 2  # every processor answered
    assert not _first_step.first_step_usable()
    assert not stepped  # no processor was stepped by hand
    disabled = [e for e in events if e["event"] == "first_step.disabled"]
    assert len(disabled) == 1  # once per process, however many endpoints run
    (event,) = disabled
    assert event["log_level"] == "warning" and event["trio"] == trio.__version__
    assert "does not know" in event["error"]


async def test_a_probe_that_never_finishes_falls_back_too(
        unchecked: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_first_step, "CHECK_SECONDS", 0.01)

    async def stuck() -> str:
        await trio.sleep_forever()
        return "never"

    monkeypatch.setattr(_first_step, "_probe", stuck)
    with capture_logs() as events:
        assert not await _first_step.check_first_step()
    assert [e["event"] for e in events] == ["first_step.disabled"]
