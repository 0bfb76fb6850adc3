"""``remoting demo``: the main job of the README, on a small size, in its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from remoting.cli import build_parser, main

pytestmark = pytest.mark.spark



# As an installed wheel runs it: from outside the checkout, with its examples/ folder out of
# reach (the demo stopped with "runs from a source checkout" there).
AS_INSTALLED = ("import sys; sys.modules['examples'] = None; from remoting.cli import main; "
                "sys.exit(main(sys.argv[1:]))")


def test_demo_scores_every_row_in_both_modes_and_exits_0(tmp_path: Path) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)

    done = subprocess.run(
        [sys.executable, "-c", AS_INSTALLED, "demo", "--rows", "20000", "--partitions", "2",
         "--output", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for mode in ("per-row", "batch"):
        row = next(line for line in lines if line.startswith(mode))
        fields = row.split()
        assert fields[1] == "20,000"  # rows
        assert fields[5] == "0" and fields[-1] == "0"  # errors, wrong
    assert (tmp_path / "demo" / "per_row").is_dir()
    assert any((tmp_path / "demo" / "batch").glob("*.parquet"))
    assert "connection.opened" not in done.stdout  # structlog is quiet in the driver
    # not a terminal: no progress bar, whose carriage returns ran into the demo's lines
    assert "[Stage" not in done.stderr and "\r" not in done.stdout + done.stderr


def test_the_stream_demo_scores_every_message_once_prints_triggers_and_exits_0(
        tmp_path: Path) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)

    done = subprocess.run(
        [sys.executable, "-c", AS_INSTALLED, "demo", "--stream", "--rows", "20000",
         "--partitions", "2", "--output", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    triggers = [line.split() for line in done.stdout.splitlines()
                if line.startswith("trigger")]
    rows = [int(t[2].replace(",", "")) for t in triggers]
    assert len(triggers) >= 2 and max(rows) <= 2_000 and sum(rows) == 20_000
    assert all(t[5] == "rows/s" and t[6] == "lag" for t in triggers)
    assert int(triggers[-1][7].replace(",", "")) == 0  # caught up at the end
    assert "20,000 rows in" in done.stdout and "20,000 distinct offsets" in done.stdout
    assert "wrong scores: 0" in done.stdout
    assert any((tmp_path / "demo-stream" / "scores").glob("*.parquet"))


def test_cli_rejects_a_bad_row_count(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--rows", "0"])
    assert "must be >= 1" in capsys.readouterr().err


def test_cli_parses_demo_options() -> None:
    args = build_parser().parse_args(["demo", "--rows", "1_000", "--partitions", "3"])
    assert (args.rows, args.partitions, str(args.output)) == (1000, 3, "output")
    assert not args.stream and build_parser().parse_args(["demo", "--stream"]).stream
