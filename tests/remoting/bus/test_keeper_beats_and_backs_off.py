"""`Keeper` (sans-I/O): a bus client beats every 30 s; after a lost connection it registers
its consumers again, pausing 0.05 s, 0.1 s, ... up to 5 s between failed attempts, logs the
first failure only, and tells when it is back."""

from __future__ import annotations

from remoting._bus._client import FIRST_PAUSE, MAX_PAUSE, Keeper
from remoting._bus._wire import HEARTBEAT_SECONDS


def test_it_beats_every_heartbeat_interval() -> None:
    keeper = Keeper()
    assert keeper.wait == HEARTBEAT_SECONDS == 30.0
    assert keeper.succeeded(registered=False) is False
    assert keeper.failed(registering=False) is False  # a lost beat: the close event tells
    assert keeper.wait == HEARTBEAT_SECONDS


def test_failed_registrations_back_off_doubling_to_a_cap_and_the_first_is_told() -> None:
    keeper = Keeper()
    firsts = [keeper.failed(registering=True) for _ in range(10)]
    assert firsts == [True] + [False] * 9
    waits = []
    keeper = Keeper()
    for _ in range(10):
        keeper.failed(registering=True)
        waits.append(keeper.wait)
    assert waits[:4] == [FIRST_PAUSE, FIRST_PAUSE * 2, FIRST_PAUSE * 4, FIRST_PAUSE * 8]
    assert max(waits) == MAX_PAUSE == waits[-1]


def test_success_after_failures_is_told_once_and_resets_the_pauses() -> None:
    keeper = Keeper()
    keeper.failed(registering=True)
    keeper.failed(registering=True)
    assert keeper.succeeded(registered=True) is True
    assert keeper.wait == HEARTBEAT_SECONDS
    assert keeper.succeeded(registered=True) is False
    keeper.failed(registering=True)
    assert keeper.wait == FIRST_PAUSE
