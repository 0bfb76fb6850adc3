"""Each push to a client's consumer ends exactly once, by a callback on the server's loop (no
task waits for it): the client's receipt, its refusal with a failure, no answer before the
deadline, or its connection closing. Each sender is told once, and each failure is counted
once: a push that timed out is not failed again when its connection closes later."""

from __future__ import annotations

import threading
from collections.abc import Callable

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, RequestProcessor
from remoting import ClientConfig, RemotingClient, RemotingServer
from remoting._bus._failure import ReplyFailure
from remoting._bus._wire import BusCode, failure_response, register_command, send_command
from remoting.bus import BusClient, EventBus

from .conftest import WAIT

SILENT_TIMEOUT = 0.5  # seconds a push the client never answers waits


class Scripted(RequestProcessor):
    """A client's DELIVER processor that answers as each message's body says: ``ok``
    (taken), ``refuse`` (a recipient failure with code 5), ``silent`` (never answers)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.seen = threading.Semaphore(0)

    def process_request(self, ctx: RequestContext, request: RemotingCommand
                        ) -> RemotingCommand | None:
        self.seen.release()
        body = request.body or b""
        if body.startswith(b"ok"):
            return RemotingCommand.create_response(ResponseCode.SUCCESS)
        if body.startswith(b"refuse"):
            return failure_response(ReplyFailure("RECIPIENT_FAILURE", "no", code=5))
        self.release.wait(WAIT)
        return None


def test_every_send_is_answered_once_and_every_failure_counted_once(
        blocking_server: RemotingServer, bus: EventBus,
        bus_clients: Callable[..., BusClient]) -> None:
    scripted = Scripted()
    counts = {"ok": 6, "refuse": 5, "silent": 4, "cut": 3}
    with RemotingClient(ClientConfig()) as consumer, RemotingClient(ClientConfig()) as sender:
        consumer.register_processor(BusCode.DELIVER, scripted, threads=20)
        assert consumer.invoke_sync(blocking_server.addr, register_command(1, "s", 100),
                                    WAIT).code == 0

        def send(body: bytes, timeout: float) -> object:
            return sender.invoke_async(blocking_server.addr, send_command(
                "send", "s", body, {}, timeout), timeout + WAIT)

        sends = {kind: [send(b"%s%d" % (kind.encode(), i),
                             SILENT_TIMEOUT if kind == "silent" else 3 * WAIT)
                        for i in range(n)] for kind, n in counts.items()}
        for _ in range(sum(counts.values())):
            assert scripted.seen.acquire(timeout=WAIT)
        codes = {kind: [f.result(WAIT).code for f in futures]  # type: ignore[attr-defined]
                 for kind, futures in sends.items() if kind != "cut"}
        assert codes == {"ok": [0] * 6, "refuse": [32382] * 5, "silent": [32381] * 4}
        scripted.release.set()  # the processors end, answering nothing
        consumer.shutdown()  # the "cut" ones were taken and never answered: the close ends them
        cut = [f.result(WAIT) for f in sends["cut"]]  # type: ignore[attr-defined]
        assert [r.code for r in cut] == [32382] * 3
        assert all("closed" in (r.remark or "") for r in cut)
    stats = bus.statistics()
    assert (stats.timeouts, stats.recipient_failures) == (4, 5 + 3)
    assert stats.remote_consumers == 0 and stats.queued == 0
    # a later send with a longer deadline than every push above: nothing more was counted
    other = bus_clients()
    got = threading.Event()
    other.consumer("s", lambda m: got.set())
    bus_clients().send("s", b"after", timeout=WAIT)
    assert got.wait(WAIT)
    assert (bus.statistics().timeouts, bus.statistics().recipient_failures) == (4, 8)
