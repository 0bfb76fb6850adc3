"""The user guide's throughput table quotes docs/performance.md: each figure of it is one of
that page's, from the commit it names (the two pages had drifted apart: 99-109k against
107,689 req/s, a p50 of 157 µs against 153)."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
FIGURE = re.compile(r"\d{1,3}(?:,\d{3})+|\d+\.\d+|\d+(?= µs)")


def throughput_table() -> list[list[str]]:
    guide = (DOCS / "user-guide.md").read_text()
    section = guide[guide.index("### Throughput: which way to pipeline"):]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]  # no header
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def test_each_figure_of_the_user_guide_s_table_is_in_performance_md() -> None:
    performance = (DOCS / "performance.md").read_text()
    rows = throughput_table()
    assert len(rows) >= 4
    figures = [figure for row in rows for cell in row[1:] for figure in FIGURE.findall(cell)]
    assert len(figures) >= 8
    for figure in figures:
        assert re.search(rf"(?<![\d,.]){re.escape(figure)}(?![\d,])", performance), figure


def test_the_user_guide_names_the_commit_of_performance_md_s_rpc_tables() -> None:
    guide = (DOCS / "user-guide.md").read_text()
    performance = (DOCS / "performance.md").read_text()
    rpc = performance[performance.index("### The trio client"):
                      performance.index("### The baselines")]
    [commit] = set(re.findall(r"Measured: commit (\w+)", rpc))
    section = guide[guide.index("### Throughput: which way to pipeline"):]
    assert f"commit {commit}" in section.split("\n\n")[1]
