"""Grouped acknowledgements (sans-I/O): sent once a count is pending or the oldest has waited
the window; a requeue or a touch at once; the wire form round-trips and refuses garbage."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.queue._sansio._acks import ACK_BYTES, AckGroup, AckOp, pack_acks, unpack_acks


def test_finishes_wait_for_the_count() -> None:
    group = AckGroup(max_count=3, window=1.0)
    assert not group.add(AckOp.FINISH, 1, 0.0)
    assert not group.add(AckOp.FINISH, 2, 0.1)
    assert group.add(AckOp.FINISH, 3, 0.2)
    assert [offset for _, offset, _ in group.take()] == [1, 2, 3]
    assert len(group) == 0 and group.deadline is None


def test_finishes_wait_at_most_the_window_from_the_oldest() -> None:
    group = AckGroup(max_count=100, window=0.05)
    group.add(AckOp.FINISH, 1, 10.0)
    assert group.deadline == pytest.approx(10.05)
    assert not group.due(10.049)
    assert group.due(10.05)
    assert group.add(AckOp.FINISH, 2, 10.06)  # the oldest has waited long enough


@pytest.mark.parametrize("op", [AckOp.REQUEUE, AckOp.TOUCH])
def test_a_requeue_or_touch_is_sent_at_once(op: AckOp) -> None:
    group = AckGroup(max_count=100, window=10.0)
    group.add(AckOp.FINISH, 1, 0.0)
    assert group.add(op, 2, 0.0, 500)
    assert group.take() == [(AckOp.FINISH, 1, 0), (op, 2, 500)]


acks = st.lists(st.tuples(st.sampled_from(list(AckOp)), st.integers(0, 2**63 - 1),
                          st.integers(0, 2**31 - 1)), max_size=50)


@given(acks)
def test_the_wire_form_round_trips(items: list[tuple[AckOp, int, int]]) -> None:
    data = pack_acks(items)
    assert len(data) == ACK_BYTES * len(items)
    assert unpack_acks(data) == items


@given(st.binary(max_size=200))
def test_garbage_is_a_value_error_or_acks(data: bytes) -> None:
    try:
        unpack_acks(data)
    except ValueError:
        pass


def test_a_bad_operation_or_length_is_refused() -> None:
    with pytest.raises(ValueError, match="multiple of 13"):
        unpack_acks(b"\x00" * 12)
    with pytest.raises(ValueError, match="operation 7"):
        unpack_acks(bytes([7]) + bytes(12))
