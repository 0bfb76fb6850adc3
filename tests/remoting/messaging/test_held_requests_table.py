"""The held-request table (sans-I/O): holds come back once, by key or by deadline."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from remoting._messaging._holds import HoldTable


def test_notify_returns_a_keys_holds_oldest_first_and_only_once() -> None:
    table: HoldTable[str] = HoldTable()
    table.add("t1", 10.0, "a")
    table.add("t2", 10.0, "b")
    table.add("t1", 5.0, "c")
    assert [h.item for h in table.notify("t1")] == ["a", "c"]
    assert table.notify("t1") == [] and len(table) == 1 and table.held("t2") == 1


def test_expire_returns_what_is_due_and_skips_notified_holds() -> None:
    table: HoldTable[str] = HoldTable()
    table.add("t1", 1.0, "a")
    table.add("t1", 2.0, "b")
    table.add("t2", 1.5, "c")
    table.notify("t2")
    assert table.next_deadline() == 1.0
    assert [h.item for h in table.expire(1.5)] == ["a"]
    assert table.next_deadline() == 2.0
    assert [h.item for h in table.expire(9.0)] == ["b"] and len(table) == 0
    assert table.next_deadline() is None


def test_remove_takes_one_hold_out() -> None:
    table: HoldTable[str] = HoldTable()
    hold = table.add("t", 1.0, "a")
    assert table.remove(hold) and not table.remove(hold)
    assert table.expire(5.0) == [] and table.held("t") == 0


def test_an_owner_s_holds_are_counted_and_removed_together() -> None:
    table: HoldTable[str] = HoldTable()
    table.add("t1", 1.0, "a", owner="conn-1")
    table.add("t2", 2.0, "b", owner="conn-1")
    table.add("t1", 3.0, "c", owner="conn-2")
    table.add("t1", 4.0, "d")  # nobody's
    assert table.held_by("conn-1") == 2 and table.held_by("conn-2") == 1
    assert [h.item for h in table.remove_owner("conn-1")] == ["a", "b"]
    assert table.held_by("conn-1") == 0 and table.remove_owner("conn-1") == []
    assert [h.item for h in table.notify("t1")] == ["c", "d"]
    assert table.held_by("conn-2") == 0 and len(table) == 0
    assert table.expire(9.0) == []


def test_many_notified_holds_leave_a_bounded_heap() -> None:
    table: HoldTable[int] = HoldTable()
    for i in range(10_000):
        table.add("t", 100.0, i)
        table.notify("t")
    assert len(table) == 0 and len(table._heap) <= 1024 + 1


class Holds(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.table: HoldTable[int] = HoldTable()
        self.live: dict[int, tuple[str, float]] = {}
        self.owners: dict[int, str | None] = {}
        self.returned: set[int] = set()
        self.now = 0.0
        self.count = 0

    @rule(key=st.sampled_from("abc"), wait=st.floats(0, 10),
          owner=st.sampled_from([None, "x", "y"]))
    def add(self, key: str, wait: float, owner: str | None) -> None:
        self.count += 1
        self.table.add(key, self.now + wait, self.count, owner)
        self.live[self.count] = (key, self.now + wait)
        self.owners[self.count] = owner

    @rule(owner=st.sampled_from(["x", "y"]))
    def remove_owner(self, owner: str) -> None:
        for hold in self.table.remove_owner(owner):
            assert hold.item not in self.returned and self.owners[hold.item] == owner
            self.live.pop(hold.item)
            self.returned.add(hold.item)
        assert all(self.owners[item] != owner for item in self.live)

    @rule(key=st.sampled_from("abc"))
    def notify(self, key: str) -> None:
        for hold in self.table.notify(key):
            assert hold.item not in self.returned and self.live.pop(hold.item)[0] == key
            self.returned.add(hold.item)
        assert all(k != key for k, _ in self.live.values())

    @rule(step=st.floats(0, 5))
    def expire(self, step: float) -> None:
        self.now += step
        for hold in self.table.expire(self.now):
            assert hold.item not in self.returned and self.live.pop(hold.item)[1] <= self.now
            self.returned.add(hold.item)
        assert all(deadline > self.now for _, deadline in self.live.values())

    @invariant()
    def the_table_holds_exactly_the_live_ones(self) -> None:
        assert len(self.table) == len(self.live)
        for owner in ("x", "y"):
            assert self.table.held_by(owner) == sum(
                1 for item in self.live if self.owners[item] == owner)
        expected = min((d for _, d in self.live.values()), default=None)
        assert self.table.next_deadline() == expected


TestHolds = Holds.TestCase
