"""The publish keys' window (sans-I/O): a repeat within the window gets the first batch's
offsets; after it, the key is new."""

from __future__ import annotations

from remoting.queue._sansio._dedup import KeyWindow


def test_a_repeat_within_the_window_is_recognised() -> None:
    keys = KeyWindow(60.0)
    keys.add("batch-1", 100, 5, now=10.0)
    assert keys.get("batch-1", 69.9) == (100, 5)
    assert keys.get("batch-1", 70.1) is None
    assert keys.get("batch-2", 11.0) is None


def test_expire_forgets_the_oldest_first() -> None:
    keys = KeyWindow(10.0)
    for i in range(5):
        keys.add(f"k{i}", i, 1, now=float(i))
    assert keys.expire(12.5) == 3 and len(keys) == 2
    assert keys.get("k3", 12.5) == (3, 1)
    keys.add("k3", 9, 1, now=13.0)  # seen again: its new batch, kept the longest
    assert keys.expire(14.5) == 1 and keys.get("k3", 14.5) == (9, 1)


def test_a_flood_of_new_keys_forgets_the_oldest_early() -> None:
    keys = KeyWindow(600.0, max_keys=3)
    for i in range(5):
        keys.add(f"k{i}", i, 1, now=float(i))
    assert len(keys) == 3
    assert keys.get("k0", 5.0) is None and keys.get("k1", 5.0) is None
    assert keys.get("k4", 5.0) == (4, 1)
    assert KeyWindow(600.0).max_keys == 65_536
