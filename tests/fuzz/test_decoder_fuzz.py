"""Fuzz `codec.FrameDecoder`: only commands, None or `codec.CodecError` come out (h11's invariant).

Two engines over the same oracle (`mutations.check_input`: whole and chunked decoding agree, a
CodecError is sticky, nothing else escapes):
- a seeded random-mutation loop (bit flips, byte inserts/deletes, length-field and header-word
  tweaks, JSON token swaps, splices; fed in random chunkings): 20,000 inputs in the default
  suite, 1,000,000 under ``-m slow``;
- atheris (coverage-guided libFuzzer), run as a script in a subprocess: a short run in the
  default suite to keep the harness working, 1,000,000 runs under ``-m slow``.

Reproduce by hand::

    .venv/bin/python -m pytest tests/fuzz -m slow -s
    .venv/bin/python tests/fuzz/atheris_decoder.py /tmp/corpus -atheris_runs=1000000
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .mutations import run_mutation_fuzz

HARNESS = Path(__file__).with_name("atheris_decoder.py")
REPO_ROOT = HARNESS.parents[2]
MILLION = 1_000_000
SLOW_TIME_LIMIT = 900.0  # seconds; a million inputs take 1-4 minutes on one core

needs_atheris = pytest.mark.skipif(
    importlib.util.find_spec("atheris") is None,
    reason="atheris is not installed (pip install atheris; Linux x86-64 wheels)",
)


def test_mutation_fuzz_smoke_20k_inputs() -> None:
    report = run_mutation_fuzz(20_000, seed=6)
    assert report.inputs == 20_000
    # the generator reaches past the length checks: commands and every kind of error
    assert report.commands > 1_000
    assert {"MalformedFrameError", "FrameTooLargeError",
            "UnsupportedSerializeTypeError"} <= set(report.errors)


@pytest.mark.slow
def test_mutation_fuzz_a_million_inputs() -> None:
    report = run_mutation_fuzz(MILLION, seed=20261121, time_limit=SLOW_TIME_LIMIT)
    print(f"\nmutation fuzz: {report.inputs} inputs in {report.seconds:.1f} s "
          f"({report.rate:,.0f}/s), {report.commands} commands decoded, errors {report.errors}")
    assert report.inputs == MILLION


def run_atheris(tmp_path: Path, runs: int, timeout: float) -> tuple[int, float, str]:
    """Run the harness; return (runs done, seconds, output). A crash fails the test."""
    corpus = tmp_path / "corpus"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(HARNESS), str(corpus), f"-atheris_runs={runs}",
         "-print_final_stats=1", f"-artifact_prefix={tmp_path}/", "-rss_limit_mb=2048"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )
    seconds = time.monotonic() - start
    output = proc.stdout + proc.stderr
    crashes = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "oom-")))
    assert proc.returncode == 0 and not crashes, f"{crashes}\n{output[-4000:]}"
    done = re.search(r"Done (\d+) in", output)
    assert done is not None, output[-2000:]
    return int(done.group(1)), seconds, output


@needs_atheris
def test_atheris_harness_runs(tmp_path: Path) -> None:
    done, _, _ = run_atheris(tmp_path, 3_000, timeout=120)
    assert done >= 3_000


@needs_atheris
@pytest.mark.slow
def test_atheris_a_million_runs(tmp_path: Path) -> None:
    done, seconds, output = run_atheris(tmp_path, MILLION, timeout=SLOW_TIME_LIMIT)
    cov = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", output)
    print(f"\natheris: {done} runs in {seconds:.1f} s ({done / seconds:,.0f}/s); "
          f"final cov/ft/corpus {cov[-1] if cov else '?'}")
    assert done >= MILLION
