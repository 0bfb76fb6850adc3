"""`AddressTable` (sans-I/O): a send picks handlers round-robin, as Vert.x's
``Handlers.choose``, and removing one never makes another skip or repeat its turn."""

from __future__ import annotations

from collections import Counter

import hypothesis.strategies as st
from hypothesis import given

from remoting._bus._address_table import AddressTable


def test_n_sends_reach_each_of_n_handlers_once() -> None:
    table: AddressTable[str] = AddressTable()
    for name in "abc":
        table.add("work", name)
    chosen = [table.choose("work") for _ in range(1000)]
    assert Counter(chosen) == {"a": 334, "b": 333, "c": 333}
    assert chosen[:6] == ["a", "b", "c", "a", "b", "c"]


def test_an_address_without_handlers_chooses_none_and_leaves_the_table() -> None:
    table: AddressTable[str] = AddressTable()
    assert table.choose("x") is None
    table.add("x", "h")
    assert len(table) == 1
    assert table.remove("x", "h")
    assert not table.remove("x", "h")  # twice: nothing left to remove
    assert len(table) == 0 and table.choose("x") is None and table.all("x") == []


def test_a_handler_is_registered_once_per_address() -> None:
    table: AddressTable[str] = AddressTable()
    assert table.add("x", "h")
    assert not table.add("x", "h")
    assert table.all("x") == ["h"] and table.count() == 1


def test_removing_a_handler_keeps_the_next_ones_turn() -> None:
    table: AddressTable[str] = AddressTable()
    for name in "abcd":
        table.add("w", name)
    assert table.choose("w") == "a"
    assert table.choose("w") == "b"  # c is next
    table.remove("w", "a")  # before the next one
    assert table.choose("w") == "c"
    table.remove("w", "d")  # the next one itself: its follower (wrapping) goes next
    assert table.choose("w") == "b"
    assert table.choose("w") == "c"


def test_skipped_handlers_are_passed_over_and_a_skip_of_all_finds_none() -> None:
    table: AddressTable[str] = AddressTable()
    for name in "abc":
        table.add("w", name)
    assert table.choose("w", skip={"a"}.__contains__) == "b"
    assert table.choose("w", skip={"a", "b", "c"}.__contains__) is None
    assert table.choose("w") == "c"  # the failed search moved nothing


@given(st.lists(st.tuples(st.sampled_from(["add", "remove", "choose"]),
                          st.integers(0, 4)), max_size=60))
def test_every_handler_is_chosen_once_per_round_whatever_came_before(
        steps: list[tuple[str, int]]) -> None:
    table: AddressTable[int] = AddressTable()
    for op, handler in steps:
        if op == "add":
            table.add("w", handler)
        elif op == "remove":
            table.remove("w", handler)
        else:
            table.choose("w")
    handlers = table.all("w")
    round_ = [table.choose("w") for _ in handlers]
    assert sorted(round_) == sorted(handlers)  # type: ignore[type-var]
