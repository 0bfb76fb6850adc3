"""The suite's timing rule (tests/wall_clock_rule.py) holds for every test, and the rule
itself finds what it must: a test that fails on a loaded machine while the code is right
costs everyone a rerun and teaches them to ignore red."""

from __future__ import annotations

import functools
import textwrap
from pathlib import Path

import pytest

from .wall_clock_rule import Finding, violations

TESTS = Path(__file__).resolve().parent
MAX_ALLOWED = 25  # lower bounds kept with a reason: they must stay few

WHAT_TO_DO = """
A test of the default suite must not assert how long something took: a machine that other
processes keep busy misses any such bound while the code is right. Instead:
- assert what tells the outcomes apart without a clock: the error's kind (a call that waited
  for its timeout raises RemotingTimeoutError), a count the library keeps, a log event;
- measure CPU time (time.thread_time, time.process_time) where cost is the point;
- bound a wait only to catch a hang: far above what the call needs, below what a wrong
  implementation takes (tests/hangs.py: returns_within(HANG_SECONDS, fn), or trio.fail_after);
- or move the timing to a test marked @pytest.mark.slow (a helper returning the duration,
  called by the default test and by the slow one), or to a benchmark in bench/.
A lower bound (a deadline honoured at least this long) cannot fail on a loaded machine: keep
it with a comment on the same line, `# wall-clock: <why>`.
"""


@functools.cache
def _all_findings() -> list[Finding]:
    return [f for path in sorted(TESTS.rglob("*.py")) for f in violations(path)]


def test_no_test_of_the_default_suite_asserts_an_upper_bound_on_wall_clock_time() -> None:
    upper = [f for f in _all_findings() if f.upper]
    assert not upper, "\n".join(map(str, upper)) + "\n" + WHAT_TO_DO


def test_every_wall_clock_lower_bound_says_why_and_they_stay_few() -> None:
    lower = [f for f in _all_findings() if not f.upper]
    unexplained = [f for f in lower if not f.allowed]
    assert not unexplained, (
        "\n".join(map(str, unexplained)) + "\nA lower bound needs a reason on its line: "
        "`# wall-clock: a lower bound (<what it shows>)`.\n" + WHAT_TO_DO)
    assert len(lower) <= MAX_ALLOWED, (
        f"{len(lower)} wall-clock lower bounds (at most {MAX_ALLOWED}): prefer counts and "
        "the errors' kinds\n" + "\n".join(map(str, lower)))


def _found(tmp_path: Path, source: str) -> list[tuple[int, bool, str | None]]:
    path = tmp_path / "test_example.py"
    path.write_text(textwrap.dedent(source))
    return [(f.line, f.upper, f.allowed) for f in violations(path)]


@pytest.mark.parametrize(("source", "expected"), [
    ("""
     import time
     def test_a():
         start = time.monotonic()
         work()
         elapsed = time.monotonic() - start
         assert elapsed < 0.1
     """, [(7, True, None)]),
    ("""
     import trio
     async def test_a():
         started = trio.current_time()
         await work()
         assert 0.3 <= trio.current_time() - started < 3  # wall-clock: the deadline
     """, [(6, False, "the deadline"), (6, True, "the deadline")]),
    ("""
     import time
     def took(fn):
         start = time.perf_counter()
         fn()
         return time.perf_counter() - start, 7
     def test_a():
         seconds, count = took(work)
         assert count < 10
         assert 0.5 > seconds
     """, [(10, True, None)]),
    ("""
     import time
     def test_a(results):
         results["first"] = time.monotonic() - 1
         worst = max(results.values())
         assert results["first"] < 5 and worst < 5
     """, [(6, True, None), (6, True, None)]),
    ("""
     def test_a(report):
         assert report.seconds < 10 and report.count < 10
     """, [(3, True, None)]),
], ids=["elapsed", "chained-with-reason", "helper-tuple", "stored", "attribute"])
def test_the_rule_finds_wall_clock_bounds(tmp_path: Path, source: str,
                                          expected: list[tuple[int, bool, str | None]]) -> None:
    assert sorted(_found(tmp_path, source)) == sorted(set(expected))


@pytest.mark.parametrize("source", [
    """
    import pytest, time
    @pytest.mark.slow
    def test_a():
        start = time.monotonic()
        assert time.monotonic() - start < 0.1
    """,
    """
    import pytest, time
    pytestmark = [pytest.mark.cluster]
    def test_a():
        assert time.monotonic() < 5
    """,
    """
    import trio
    async def test_a(autojump_clock):
        start = trio.current_time()
        await trio.sleep(5)
        assert trio.current_time() - start == 5
    """,
    """
    import time
    def test_a():
        cpu = time.thread_time()
        work()
        assert time.thread_time() - cpu < 0.5
        before = time.monotonic()
        stamp = stamp_of(work())
        assert before <= stamp <= time.monotonic()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pass
        assert len(done) < 3
    """,
], ids=["slow", "cluster", "mock-clock", "cpu-ordering-and-counts"])
def test_the_rule_leaves_alone_what_is_no_wall_clock_bound(tmp_path: Path, source: str) -> None:
    assert _found(tmp_path, source) == []
