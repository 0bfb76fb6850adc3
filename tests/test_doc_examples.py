"""Every ```python example in README.md and docs/ runs: a page's blocks in order, in one
namespace, so later blocks may use what earlier ones defined. A block whose first line is
``# not run: <why>`` is a fragment the page says cannot run as shown (it needs certificate
files of your own, say); such blocks must stay rare. Pages that use Spark run in the ``spark``
marker's set; pages that need a RocketMQ broker (they read ``NAMESRV_ADDR``) run in the
``rocketmq`` marker's set, against the cluster fixture (tests/rocketmq/)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

# The examples run as a user runs them: on the default io (tests/conftest.py runs other
# tests that make a blocking client on each)
pytestmark = pytest.mark.default_io

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


def blocks(page: Path) -> list[tuple[int, str]]:
    """Return (line number, code) of each python block of ``page`` that is meant to run."""
    text = page.read_text()
    found = []
    for match in BLOCK.finditer(text):
        code = match.group(1)
        if not code.startswith("# not run:"):
            found.append((text.count("\n", 0, match.start()) + 2, code))
    return found


def needs_a_broker(page: Path) -> bool:
    """Whether ``page``'s examples talk to a RocketMQ cluster (tests/rocketmq/ runs them)."""
    return "os.environ[\"NAMESRV_ADDR\"]" in page.read_text()


def pages_with_examples(spark: bool) -> list[Any]:
    chosen = []
    for page in PAGES:
        if not blocks(page) or needs_a_broker(page):
            continue
        uses_spark = "pyspark" in page.read_text()
        if uses_spark == spark:
            marks = [pytest.mark.spark] if spark else []
            chosen.append(pytest.param(page, id=page.name, marks=marks))
    return chosen


def run_page(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    if "set_tracer_provider(" in page.read_text():
        # OpenTelemetry's global providers can be set once per process: such a page runs in
        # a fresh interpreter, so the rest of the suite keeps none
        program = "\n".join(code for _, code in blocks(page))
        result = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, timeout=120,
                                capture_output=True, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert result.returncode == 0, result.stderr[-3000:]
        return
    module = types.ModuleType(f"example_{page.stem.replace('-', '_')}")
    if "pyspark" not in page.read_text():
        # dataclasses look their module up; a Spark page's functions must instead be pickled
        # by value for the workers, as a script's are, so its module stays unregistered
        monkeypatch.setitem(sys.modules, module.__name__, module)
    for line, code in blocks(page):
        exec(compile(code, f"{page.name}:{line}", "exec"), module.__dict__)  # noqa: S102


@pytest.mark.parametrize("page", pages_with_examples(spark=False))
def test_the_examples_of_a_page_run(page: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    run_page(page, tmp_path, monkeypatch)


@pytest.mark.parametrize("page", pages_with_examples(spark=True))
def test_the_spark_examples_of_a_page_run(page: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    run_page(page, tmp_path, monkeypatch)


def test_no_example_hard_codes_a_port_a_test_could_collide_on() -> None:
    for page in PAGES:
        for line, code in blocks(page):
            assert not re.search(r"listen_port=[1-9]|[\"']127\.0\.0\.1:[1-9]", code), (
                f"{page.name}:{line} uses a fixed port: use listen_port=0 and server.addr")


def test_fragments_are_rare() -> None:
    fragments = sum(page.read_text().count("```python\n# not run:") for page in PAGES)
    runnable = sum(len(blocks(page)) for page in PAGES)
    assert runnable >= 10 and fragments <= 3
