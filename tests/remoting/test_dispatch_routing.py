"""`Dispatcher.route`: which requests are processed and which are answered at once, decided
without a socket (RocketMQ's order: unknown code, going away, rejected, overloaded)."""

from __future__ import annotations

from codec import LanguageCode, RemotingCommand, ResponseCode
from processors import AsyncEchoProcessor, EchoProcessor, RequestContext, RequestProcessor
from remoting import PING_REQUEST_CODE, ServerConfig
from remoting._core._doors._threads import Inbox
from remoting._core._receiving._dispatch import Dispatcher, ProcessorEntry, Refusal
from remoting._core._streams._streams import Streams
from remoting._observability._statistics import Counters

from ..factories import req


def dispatcher(config: ServerConfig | None = None) -> Dispatcher:
    return Dispatcher("server", config or ServerConfig(), Counters(), Inbox(), owner=object(),
                      stream_opener=Streams(1 << 20).opener)


class Rejects(RequestProcessor):
    def __init__(self, answer: bool | Exception) -> None:
        self.answer = answer

    def reject_request(self) -> bool:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise AssertionError("not called by route")


def test_an_unknown_code_is_refused_with_rocketmqs_remark() -> None:
    refusal = dispatcher().route(req(77))
    assert refusal == Refusal(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                              "request type 77 not supported", "unknown code")


def test_a_ping_without_a_processor_of_its_own_is_answered_success() -> None:
    d = dispatcher()
    d.register(None, AsyncEchoProcessor())  # a default processor does not take it
    d.shutting_down = True  # nor does draining: a ping asks whether the server lives
    refusal = d.route(req(PING_REQUEST_CODE))
    assert refusal == Refusal(ResponseCode.SUCCESS, "pong", "ping")
    d.register(PING_REQUEST_CODE, EchoProcessor())
    d.shutting_down = False
    assert isinstance(d.route(req(PING_REQUEST_CODE)), ProcessorEntry)


def test_the_default_processor_takes_unknown_codes() -> None:
    d = dispatcher()
    d.register(None, AsyncEchoProcessor())
    entry = d.route(req(77))
    assert isinstance(entry, ProcessorEntry) and entry.pool is None  # async: on the loop


def test_while_going_away_only_peers_that_understand_it_get_go_away() -> None:
    d = dispatcher()
    d.register(1, AsyncEchoProcessor())
    d.shutting_down = True
    ours = req(1)  # language PYTHON: our clients resend elsewhere
    old_java = req(1)
    old_java.language, old_java.version = LanguageCode.JAVA, 401  # RocketMQ 4.9.x
    new_java = req(1)
    new_java.language, new_java.version = LanguageCode.JAVA, 476
    refused = d.route(ours)
    assert isinstance(refused, Refusal) and refused.code == ResponseCode.GO_AWAY
    assert isinstance(d.route(old_java), ProcessorEntry)
    assert d.route(new_java).reason == "going away"  # type: ignore[union-attr]


def test_reject_request_answers_busy_and_a_failing_one_does_not() -> None:
    d = dispatcher()
    d.register(1, Rejects(True))
    d.register(2, Rejects(RuntimeError("bug in reject_request")))
    refusal = d.route(req(1))
    assert isinstance(refusal, Refusal) and refusal.code == ResponseCode.SYSTEM_BUSY
    assert refusal.remark.startswith("[REJECTREQUEST]")
    assert isinstance(d.route(req(2)), ProcessorEntry)  # logged, then processed


def test_a_full_pool_is_refused_before_anything_runs() -> None:
    d = dispatcher(ServerConfig(processor_queue_capacity=0))
    d.register(1, EchoProcessor(), threads=1)  # room for one task in all
    entry = d.route(req(1))
    assert isinstance(entry, ProcessorEntry) and entry.pool is not None
    assert entry.pool.submit((None, req(1), EchoProcessor()))  # type: ignore[arg-type]
    refusal = d.route(req(1))
    assert isinstance(refusal, Refusal) and refusal.reason == "overloaded"
    assert refusal.remark.startswith("[OVERLOAD]")
    assert isinstance(d.route(req(2)), Refusal)  # and other codes are not affected by it
    assert d.route(req(2)).reason == "unknown code"  # type: ignore[union-attr]
