"""Every ```python block of README.md and docs/ runs, as a reader copying it would run it.

A block runs on its own, in a fresh namespace: it has its imports and makes what it uses. A
block that goes on from the one before says so on its first line, for the reader too::

    # continues the example above

and runs after it, in its namespace (a page's first block cannot). A block that cannot run
as shown (it needs certificate files of your own, say) starts with ``# not run: <why>``;
such fragments must stay rare. Chains that use Spark run in the ``spark`` marker's set;
chains that need a RocketMQ broker (they read ``NAMESRV_ADDR``) run in the ``rocketmq``
marker's set, against the cluster fixture (docs/rocketmq.md's in tests/rocketmq/,
docs/spark.md's in tests/spark/rocketmq/). Blocks that start servers
start them themselves, on free ports (``listen_port=0``).
A fence without a language must not hold Python (it would never run): label it.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# The examples run as a user runs them: on the default io (tests/conftest.py runs other
# tests that make a blocking client on each)
pytestmark = pytest.mark.default_io

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.M | re.S)
FRAGMENT = "# not run:"
CONTINUES = "# continues the example above"


@dataclass(frozen=True, slots=True)
class Block:
    page: Path
    line: int  # of the block's first line of code
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


def fences(page: Path) -> list[tuple[str, int, str]]:
    """(info string, line of the first line of code, code) of each fenced block."""
    text = page.read_text()
    return [(m.group(1).strip(), text.count("\n", 0, m.start()) + 2, m.group(2))
            for m in FENCE.finditer(text)]


def blocks(page: Path) -> list[Block]:
    """The python blocks of ``page`` that are meant to run, in order."""
    return [Block(page, line, code) for info, line, code in fences(page)
            if info == "python" and not code.startswith(FRAGMENT)]


def chains(page: Path) -> list[list[Block]]:
    """The page's blocks grouped into examples: a block, and those continuing it."""
    found: list[list[Block]] = []
    for block in blocks(page):
        if block.code.startswith(CONTINUES) and found:
            found[-1].append(block)
        else:
            found.append([block])
    return found


BROKER = 'os.environ["NAMESRV_ADDR"]'  # how an example finds its RocketMQ name servers


def needs_a_broker(page: Path) -> bool:
    """Whether ``page``'s examples talk to a RocketMQ cluster."""
    return BROKER in page.read_text()


def chain_needs_a_broker(chain: list[Block]) -> bool:
    """Whether an example talks to a RocketMQ cluster (a ``rocketmq`` test runs it)."""
    return any(BROKER in block.code for block in chain)


def _uses_spark(chain: list[Block]) -> bool:
    return any("pyspark" in block.code for block in chain)


def examples(spark: bool) -> list[Any]:
    chosen = []
    for page in PAGES:
        for chain in chains(page):
            if chain_needs_a_broker(chain):
                continue
            if _uses_spark(chain) == spark:
                # with the tests of the session's SparkSession (tests/conftest.py), whose
                # session getOrCreate() then returns
                marks = [pytest.mark.spark, pytest.mark.xdist_group("spark")] if spark else []
                chosen.append(pytest.param(chain, id=chain[0].where, marks=marks))
    return chosen


def run_chain(chain: list[Block], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    if any("set_tracer_provider(" in block.code for block in chain):
        # OpenTelemetry's global providers can be set once per process: such an example runs
        # in a fresh interpreter, so the rest of the suite keeps none
        program = "\n".join(block.code for block in chain)
        result = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, timeout=120,
                                capture_output=True, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert result.returncode == 0, f"{chain[0].where}:\n{result.stderr[-3000:]}"
        return
    name = re.sub(r"\W", "_", f"example_{chain[0].where}")
    module = types.ModuleType(name)
    if not _uses_spark(chain):
        # dataclasses look their module up; a Spark example's functions must instead be
        # pickled by value for the workers, as a script's are, so its module stays unregistered
        monkeypatch.setitem(sys.modules, name, module)
    for block in chain:
        exec(compile(block.code, block.where, "exec"), module.__dict__)  # noqa: S102


@pytest.mark.parametrize("chain", examples(spark=False))
def test_the_example_runs(chain: list[Block], tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    run_chain(chain, tmp_path, monkeypatch)


@pytest.mark.parametrize("chain", examples(spark=True))
def test_the_spark_example_runs(chain: list[Block], tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    run_chain(chain, tmp_path, monkeypatch)


def test_a_page_s_first_example_does_not_continue_another() -> None:
    for page in PAGES:
        runnable = blocks(page)
        if runnable:
            assert not runnable[0].code.startswith(CONTINUES), (
                f"{runnable[0].where} says it continues an example, but it is the page's first")


def test_python_is_never_left_in_a_fence_without_a_language() -> None:
    for page in PAGES:
        for info, line, code in fences(page):
            if info:
                continue
            try:
                tree = ast.parse(code)
            except SyntaxError:
                continue  # a diagram, a shell session, a traceback
            statements = [n for n in tree.body if not isinstance(n, ast.Expr)]
            assert not statements, (
                f"{page.name}:{line} holds Python in a fence without a language: open it with "
                "```python (then a test runs it) or with its own language (```text, ```sh)")


def test_no_example_hard_codes_a_port_a_test_could_collide_on() -> None:
    for page in PAGES:
        for block in blocks(page):
            assert not re.search(r"listen_port=[1-9]|[\"']127\.0\.0\.1:[1-9]", block.code), (
                f"{block.where} uses a fixed port: use listen_port=0 and server.addr")


def test_fragments_are_rare() -> None:
    fragments = [f"{page.name}:{line}" for page in PAGES for info, line, code in fences(page)
                 if info == "python" and code.startswith(FRAGMENT)]
    runnable = sum(len(blocks(page)) for page in PAGES)
    assert runnable >= 10 and len(fragments) <= 3, (
        f"fragments that never run: {fragments}; make them run (a server on port 0, "
        "certificates made with trustme) and keep `# not run:` for the few that cannot")
