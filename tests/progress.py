"""What the suite is doing: a line per finished test file instead of a dot per test.

``make test`` runs ~2,500 tests for minutes; dots say nothing about where it is or what is
slow. With this plugin (tests/conftest.py installs it) a quiet run prints, as each file ends::

    tests/queue/test_publish_subscribe_and_pull.py  14 passed  (312/2544, 41 s)

Failures still show at once (``F``, ``E``) and in the summary. It works under pytest-xdist
too (the controller gets every report, from any worker). ``-v`` keeps pytest's own lines.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Generator, Sequence

QUIET_LETTERS = frozenset({".", "s"})  # passed, skipped: told in the file's line instead


class FileProgress:
    """Counts each file's tests as they end, and writes a line when its last one has."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.left: Counter[str] = Counter()  # tests of each file not ended yet
        self.outcomes: dict[str, Counter[str]] = {}
        self.failed: set[str] = set()  # node ids with a failed phase
        self.skipped: set[str] = set()
        self.total = 0
        self.done = 0
        self.started = time.monotonic()

    def _expect(self, nodeids: Sequence[str]) -> None:
        self.left = Counter(nodeid.split("::", 1)[0] for nodeid in nodeids)
        self.total = len(nodeids)
        self.started = time.monotonic()

    @pytest.hookimpl(trylast=True)  # after -m / -k have deselected
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self._expect([item.nodeid for item in items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: Sequence[str]) -> None:
        if not self.total:  # every worker collects the same tests
            self._expect(ids)

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport
                                 ) -> Generator[None, tuple[str, str, str], tuple[str, str, str]]:
        category, letter, word = yield
        return category, "" if letter in QUIET_LETTERS else letter, word

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.add(report.nodeid)
        elif report.skipped:
            self.skipped.add(report.nodeid)
        if report.when != "teardown":
            return
        file = report.nodeid.split("::", 1)[0]
        outcome = ("failed" if report.nodeid in self.failed
                   else "skipped" if report.nodeid in self.skipped else "passed")
        self.failed.discard(report.nodeid)
        self.skipped.discard(report.nodeid)
        self.outcomes.setdefault(file, Counter())[outcome] += 1
        self.done += 1
        self.left[file] -= 1
        if self.left[file] <= 0:
            self._file_done(file)

    def _file_done(self, file: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        counts = self.outcomes.pop(file, Counter())
        told = ", ".join(f"{counts[k]} {k}" for k in ("passed", "failed", "skipped")
                         if counts[k])
        elapsed = time.monotonic() - self.started
        reporter.write_line(f"{file}  {told}  ({self.done}/{self.total}, {elapsed:.0f} s)",
                            red=bool(counts["failed"]))


def install(config: pytest.Config) -> None:
    """Register the plugin for a quiet run (not in an xdist worker: its controller reports)."""
    worker = hasattr(config, "workerinput")
    if not worker and config.get_verbosity() <= 0:
        config.pluginmanager.register(FileProgress(config), "file-progress")
