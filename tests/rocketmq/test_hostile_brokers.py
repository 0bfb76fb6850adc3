"""A name server and broker of our own that answer wrongly: garbage routes, sends answered
without their fields or with unknown codes, pulls answered with truncated or garbage message
bytes or error codes, a broker that never answers. The clients raise the documented errors,
keep what they could read, and never hang."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, RequestProcessor
from remoting import RemotingServer
from remoting.rocketmq import (
    MalformedResponseError,
    Message,
    MQBrokerError,
    Producer,
    PushConsumer,
    SendFailedError,
)
from remoting.rocketmq._protocol import Code
from tests.hangs import HANG_SECONDS, returns_within

from .factories import route_body, stored_message

pytestmark = pytest.mark.default_io

Answer = Callable[[RemotingCommand], RemotingCommand | None]


def _ok(fields: dict[str, str | None] | None = None, body: bytes | None = None) -> RemotingCommand:
    response = RemotingCommand.create_response(ResponseCode.SUCCESS)
    response.ext_fields = fields
    response.body = body
    return response


class FakeCluster(RequestProcessor):
    """One server playing name server and broker; ``answers[code]`` overrides a code."""

    def __init__(self) -> None:
        self.addr = ""
        self.answers: dict[int, Answer] = {}
        self.seen: list[int] = []
        self.never = threading.Event()

    def process_request(self, ctx: RequestContext, request: RemotingCommand
                        ) -> RemotingCommand | None:
        self.seen.append(request.code)
        answer = self.answers.get(request.code)
        if answer is not None:
            return answer(request)
        if request.code == Code.GET_ROUTEINFO_BY_TOPIC:
            return _ok(body=route_body({"broker-a": self.addr}, queues=1))
        if request.code == Code.GET_CONSUMER_LIST_BY_GROUP:
            return _ok(body=b'{"consumerIdList":["%s"]}' % self.client_id.encode())
        if request.code == Code.QUERY_CONSUMER_OFFSET:
            return _ok({"offset": "0"})
        return _ok()

    client_id = ""


@pytest.fixture
def fake() -> Iterator[FakeCluster]:
    cluster = FakeCluster()
    with RemotingServer() as server:
        server.register_default_processor(cluster, threads=4)
        cluster.addr = server.addr
        yield cluster
        cluster.never.set()


def test_a_route_that_is_not_json_is_a_malformed_response(fake: FakeCluster) -> None:
    fake.answers[Code.GET_ROUTEINFO_BY_TOPIC] = lambda r: _ok(body=b"{brokerDatas:[")
    with Producer([fake.addr], timeout=2) as producer, pytest.raises(
            MalformedResponseError, match="not JSON"):
        producer.send("t", b"x")


def test_a_send_answered_without_its_fields_is_a_malformed_response(
        fake: FakeCluster) -> None:
    fake.answers[Code.SEND_MESSAGE_V2] = lambda r: _ok({"msgId": "X"})
    with Producer([fake.addr], timeout=2) as producer, pytest.raises(
            MalformedResponseError, match="queueId"):
        producer.send("t", b"x")


def test_a_send_answered_with_an_unknown_code_is_a_broker_error(fake: FakeCluster) -> None:
    def refuse(request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.create_response(9999, "what is this")
    fake.answers[Code.SEND_MESSAGE_V2] = refuse
    with Producer([fake.addr], timeout=2) as producer, pytest.raises(MQBrokerError) as caught:
        producer.send("t", b"x")
    assert caught.value.code == 9999 and caught.value.remark == "what is this"


def test_a_broker_that_never_answers_fails_the_send_within_its_timeout(
        fake: FakeCluster) -> None:
    def hang(request: RemotingCommand) -> RemotingCommand:
        fake.never.wait(300)
        return _ok()
    fake.answers[Code.SEND_MESSAGE_V2] = hang

    def send() -> None:
        with pytest.raises(SendFailedError):
            producer.send("t", b"x")

    with Producer([fake.addr], timeout=1.0, retries=2) as producer:
        # bounded by the one timeout, not by the broker's answer (minutes away)
        returns_within(HANG_SECONDS, send)


def _consume(fake: FakeCluster, pulls: list[RemotingCommand],
             until: Callable[[PushConsumer, list[Message]], bool]) -> tuple[list[Message], int]:
    """Run a push consumer against ``fake`` whose pulls answer ``pulls`` in turn (then hold
    nothing: NO_NEW_MSG); return what the handler got and the undecodable count."""
    answers = iter(pulls)

    def pull(request: RemotingCommand) -> RemotingCommand:
        try:
            return next(answers)
        except StopIteration:
            time.sleep(0.05)
            return _pull_answer(ResponseCode.PULL_NOT_FOUND, None, next_offset=0)

    fake.answers[Code.PULL_MESSAGE] = pull
    got: list[Message] = []
    consumer = PushConsumer([fake.addr], "g", "t", handler=got.append, consume_from="first",
                            instance_name="hostile-test")
    fake.client_id = consumer.client_id
    with consumer:
        deadline = time.monotonic() + 30
        while not until(consumer, got) and time.monotonic() < deadline:
            time.sleep(0.02)
        undecodable = consumer.statistics().undecodable
    return got, undecodable


def _pull_answer(code: int, body: bytes | None, next_offset: int = 2) -> RemotingCommand:
    response = RemotingCommand.create_response(code)
    response.ext_fields = {"nextBeginOffset": str(next_offset), "minOffset": "0",
                           "maxOffset": "2", "suggestWhichBrokerId": "0"}
    response.body = body
    return response


@pytest.mark.parametrize("tail", [b"\x00\x00\x00\x40garbage", stored_message(body=b"cut")[:-3],
                                  stored_message(body=b"bad", magic=7)])
def test_a_pull_with_bad_bytes_after_a_good_message_hands_over_the_good_one(
        fake: FakeCluster, tail: bytes) -> None:
    good = stored_message(topic="t", body=b"good", properties={"UNIQ_KEY": "AB"})
    got, undecodable = _consume(fake, [_pull_answer(ResponseCode.SUCCESS, good + tail)],
                                lambda c, got: bool(got) and c.statistics().undecodable > 0)
    assert [m.body for m in got] == [b"good"] and undecodable == 1


def test_pulls_answered_with_error_codes_are_retried_and_shutdown_still_works(
        fake: FakeCluster) -> None:
    errors = [_pull_answer(ResponseCode.SYSTEM_ERROR, None),
              RemotingCommand.create_response(ResponseCode.SUCCESS)]  # no offsets at all
    good = stored_message(topic="t", body=b"after", properties={"UNIQ_KEY": "CD"})
    got, _ = _consume(fake, [*errors, _pull_answer(ResponseCode.SUCCESS, good)],
                      lambda c, got: bool(got))
    assert [m.body for m in got] == [b"after"]
    assert fake.seen.count(Code.PULL_MESSAGE) >= 3 and Code.UNREGISTER_CLIENT in fake.seen


@pytest.mark.parametrize(("queue_data", "why"), [
    (b'{"brokerName":"broker-a","readQueueNums":1000000,"writeQueueNums":1000000,"perm":6}',
     "QueueNums must be from 0 to 4096"),  # was 100 MB and 1.6 s; 5,000,000: MemoryError
    (b'{"brokerName":"broker-a","readQueueNums":4,"writeQueueNums":1e999,"perm":6}',
     "writeQueueNums is not an integer"),  # was a bare OverflowError from send
    (b'{"brokerName":"broker-a","readQueueNums":"\xd9\xa3","writeQueueNums":4,"perm":6}',
     "readQueueNums is not an integer"),  # Arabic-Indic 3: int() took it
])
def test_a_route_of_impossible_queue_counts_is_a_malformed_response(
        fake: FakeCluster, queue_data: bytes, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A name server's route is a few hundred bytes whatever queue counts it claims: they
    are bounded (4,096 a broker, 65,536 a topic) and must be JSON integers or ASCII digits,
    before a queue is made of them. A consumer logs it and tries again later, as with any
    route it cannot get (it raised an ExceptionGroup from start)."""
    body = (b'{"brokerDatas":[{"brokerName":"broker-a","brokerAddrs":{0:"%s"}}],'
            b'"queueDatas":[%s]}' % (fake.addr.encode(), queue_data))
    fake.answers[Code.GET_ROUTEINFO_BY_TOPIC] = lambda r: _ok(body=body)
    with Producer([fake.addr], timeout=2) as producer, pytest.raises(
            MalformedResponseError, match=why):
        producer.send("t", b"x")
    caplog.clear()
    with PushConsumer([fake.addr], "g", "t", handler=print, instance_name="hostile-route"):
        pass
    refused = [r.getMessage() for r in caplog.records
               if "rocketmq.route_refresh_failed" in r.getMessage()]
    assert refused and all(re.search(why, line) for line in refused), refused


def test_a_pull_answer_s_offsets_are_ascii_digits() -> None:
    """``int()`` took ``"٣"`` and ``"1_0"`` and 4,300 digits from a broker's pull answer."""
    from remoting.rocketmq._message import MessageQueue
    from remoting.rocketmq._pull import pull_result
    from remoting.rocketmq._subscription import Subscription

    queue = MessageQueue("t", "broker-a", 0)
    subscription = Subscription.parse("t", None, 0)
    for bad in ("\u0663", "1_0", "9" * 4000, " 1"):
        answer = _pull_answer(ResponseCode.SUCCESS, None)
        assert answer.ext_fields is not None
        answer.ext_fields["maxOffset"] = bad
        with pytest.raises(MalformedResponseError, match="lacks its offsets"):
            pull_result(answer, queue, subscription, "127.0.0.1:1")


def test_the_compressed_bodies_of_one_pull_answer_inflate_to_a_bounded_total(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each compressed body was bounded (256 MiB), an answer of several not: a 306 KB answer
    of three inflated to 300 MiB. The answer's bodies share one budget now."""
    from remoting.rocketmq import _message_codec
    from remoting.rocketmq._message_codec import decode_messages

    budget = 3 * 1024 * 1024  # the same rule at a size a test can afford
    bodies = [stored_message(topic="t", body=b"\x00" * (budget // 2), compress=True,
                             queue_offset=i, properties={"UNIQ_KEY": f"K{i}"})
              for i in range(3)]
    monkeypatch.setattr(_message_codec, "MAX_INFLATED_BYTES", budget)
    messages, error = decode_messages(b"".join(bodies), "broker-a")
    assert [len(m.body) for m in messages] == [budget // 2, budget // 2]
    assert error is not None and "inflates past" in str(error)
