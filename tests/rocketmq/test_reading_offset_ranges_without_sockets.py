"""Reading explicit offset ranges of a queue (`read_range`, `queue_bounds`, `commit_offsets`),
against a broker simulated from PullMessageProcessor's rules, without sockets: every window of
a range in one round, answers capped by the broker pulled on, tag filtering that answers past
a window, and offsets the broker no longer holds reported, never skipped silently."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from codec import RemotingCommand, ResponseCode
from remoting import RemotingConnectError
from remoting.rocketmq import MessageQueue, MQBrokerError
from remoting.rocketmq._arrow_codec import messages_batch
from remoting.rocketmq._drive import run_callbacks
from remoting.rocketmq._flows import Calls, Flow
from remoting.rocketmq._protocol import Code
from remoting.rocketmq._range import commit_offsets, queue_bounds, read_range, windows_of
from remoting.rocketmq._subscription import Subscription

from .factories import pull_response, response, stored_message

QUEUE = MessageQueue("T", "broker-a", 0)
ALL = Subscription.parse("T", "*", 0)


T = TypeVar("T")


def _field(request: RemotingCommand, name: str) -> str:
    """A header field the flow always sets."""
    value = (request.ext_fields or {})[name]
    assert value is not None
    return value


@dataclass
class Broker:
    """One queue's offsets ``[first, end)`` as a broker serves pulls of them."""

    first: int
    end: int
    cap: int = 32  # maxTransferCountOnMessageInMemory
    tag_of: Callable[[int], str] = lambda offset: "a"
    rounds: list[list[tuple[int, int]]] = field(default_factory=list)

    def pull(self, request: RemotingCommand) -> RemotingCommand:
        offset, wanted = int(_field(request, "queueOffset")), int(_field(request, "maxMsgNums"))
        expression = _field(request, "subscription")
        tags = None if expression == "*" else {t.strip() for t in expression.split("||")}
        bounds = {"min_offset": self.first, "max_offset": self.end}
        if offset < self.first:
            return pull_response(None, code=ResponseCode.PULL_OFFSET_MOVED,
                                 next_offset=self.first, **bounds)
        if offset > self.end:
            return pull_response(None, code=ResponseCode.PULL_OFFSET_MOVED,
                                 next_offset=self.end, **bounds)
        if offset == self.end:
            return pull_response(None, code=ResponseCode.PULL_NOT_FOUND, next_offset=offset,
                                 **bounds)
        found: list[bytes] = []
        at = offset
        while at < self.end and len(found) < min(wanted, self.cap):
            if tags is None or self.tag_of(at) in tags:
                found.append(stored_message(queue_offset=at, commit_offset=1000 + at,
                                            properties={"TAGS": self.tag_of(at)}))
            at += 1
        if not found:
            return pull_response(None, code=ResponseCode.PULL_RETRY_IMMEDIATELY,
                                 next_offset=at, **bounds)
        return pull_response(b"".join(found), next_offset=at, **bounds)

    def run(self, flow: Flow[T]) -> T:
        try:
            call = next(flow)
            while True:
                assert isinstance(call, Calls)
                self.rounds.append([(int(_field(r, "queueOffset")), int(_field(r, "maxMsgNums")))
                                    for r in call.requests])
                call = flow.send([self.pull(r) for r in call.requests])
        except StopIteration as stop:
            value: T = stop.value
            return value


def offsets_read(broker: Broker, start: int, end: int, subscription: Subscription = ALL,
                 **options: Any) -> tuple[list[int], Any]:
    read = broker.run(read_range("b:1", "g", QUEUE, start, end, subscription, **options))
    batch, error = messages_batch(read.bodies, read.windows, "broker-a", subscription.tags)
    assert error is None
    return batch.column("queue_offset").to_pylist(), read


def test_a_range_goes_out_as_windows_in_one_round_and_reads_each_offset_once() -> None:
    broker = Broker(0, 1000)
    offsets, read = offsets_read(broker, 100, 300, window=32)

    assert offsets == list(range(100, 300))
    assert broker.rounds == [[(a, b - a) for a, b in windows_of(100, 300, 32)]]
    assert (read.pulls, read.lost, read.capped) == (7, [], None)
    assert (read.min_offset, read.max_offset) == (0, 1000)


def test_answers_the_broker_caps_are_pulled_on_and_the_cap_is_reported() -> None:
    broker = Broker(0, 1000, cap=8)
    offsets, read = offsets_read(broker, 0, 64, window=32)

    assert offsets == list(range(64))
    assert [len(r) for r in broker.rounds] == [2, 2, 2, 2]  # 8 a pull: four rounds
    assert read.capped == 8


def test_a_tag_filter_answering_past_its_window_gives_no_message_twice() -> None:
    broker = Broker(0, 1000, tag_of=lambda offset: "a" if offset % 5 == 0 else "b")
    wanted = Subscription.parse("T", "a", 0)
    offsets, _ = offsets_read(broker, 0, 200, wanted, window=16)

    assert offsets == list(range(0, 200, 5))


def test_offsets_below_the_queues_first_are_lost_and_the_rest_is_read() -> None:
    broker = Broker(150, 1000)
    offsets, read = offsets_read(broker, 100, 200, window=32)

    assert offsets == list(range(150, 200))
    assert read.lost == [(100, 150)]


def test_a_queue_that_ends_before_the_range_loses_its_tail() -> None:
    broker = Broker(0, 120)
    offsets, read = offsets_read(broker, 100, 200, window=32)

    assert offsets == list(range(100, 120))
    assert read.lost == [(120, 200)]


def test_a_queue_made_afresh_below_the_range_loses_all_of_it() -> None:
    broker = Broker(0, 40)
    offsets, read = offsets_read(broker, 100, 164, window=32)

    assert offsets == []
    assert read.lost == [(100, 164)]


def test_a_broker_refusing_a_pull_raises_its_code() -> None:
    def refused(_: RemotingCommand) -> RemotingCommand:
        return response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "no group")

    broker = Broker(0, 100)
    broker.pull = refused  # type: ignore[assignment,method-assign]  # refusing on purpose
    with pytest.raises(MQBrokerError) as caught:
        broker.run(read_range("b:1", "g", QUEUE, 0, 10, ALL))
    assert caught.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


def test_a_pull_without_an_answer_raises_the_transport_error() -> None:
    flow = read_range("b:1", "g", QUEUE, 0, 64, ALL, window=32)
    call = next(flow)
    assert isinstance(call, Calls) and len(call.requests) == 2
    error = RemotingConnectError("refused", "b:1")
    with pytest.raises(RemotingConnectError):
        flow.send([pull_response(None, code=ResponseCode.PULL_NOT_FOUND, next_offset=0),
                   error])


def test_bounds_and_commits_take_one_round_and_report_each_queues_error() -> None:
    queues = [MessageQueue("T", "broker-a", i) for i in range(3)]
    flow = queue_bounds("b:1", queues, earliest=True)
    call = next(flow)
    assert isinstance(call, Calls)
    assert [r.code for r in call.requests] == [Code.GET_MIN_OFFSET] * 3
    error = RemotingConnectError("refused", "b:1")
    with pytest.raises(StopIteration) as done:
        flow.send([response(fields={"offset": "7"}), response(ResponseCode.SYSTEM_ERROR, "x"),
                   error])
    first, second, third = done.value.value
    assert first == 7 and isinstance(second, MQBrokerError) and third is error

    commits = commit_offsets("b:1", "g", [(queues[0], 5), (queues[1], 9)])
    call = next(commits)
    assert isinstance(call, Calls)
    assert [(r.code, (r.ext_fields or {})["commitOffset"]) for r in call.requests] == [
        (Code.UPDATE_CONSUMER_OFFSET, "5"), (Code.UPDATE_CONSUMER_OFFSET, "9")]
    with pytest.raises(StopIteration) as done:
        commits.send([response(), response(ResponseCode.SYSTEM_ERROR, "x")])
    assert done.value.value[0] is None and isinstance(done.value.value[1], MQBrokerError)


def test_the_callback_driver_refuses_a_flow_of_several_calls_at_once() -> None:
    results: list[tuple[Any, BaseException | None]] = []
    run_callbacks(queue_bounds("b:1", [QUEUE]), None,  # type: ignore[arg-type]
                  lambda result, error: results.append((result, error)))
    assert len(results) == 1 and isinstance(results[0][1], TypeError)
