"""Build a mypyc-compiled copy of this checkout, for an A/B against the pure-Python package.

Not part of the product (which stays pure Python, see docs/performance.md): a script that
answers "what would compiling the hot path buy?" on the machine in front of you.

    .venv/bin/python bench/compiled.py /tmp/compiled          # ~40 s with gcc
    .venv/bin/python bench/ab.py --a . --b /tmp/compiled --rounds 3

It exports HEAD with ``git archive`` into the target directory, rewrites the three constructs
mypyc refuses in native classes (``object.__new__`` fast constructors, ``__module__``
assignments), and compiles the codec and the transport's bookkeeping in place, so the
compiled extension modules shadow their sources when the directory is first on
``PYTHONPATH``. The copy is for measuring only: compiled code enforces declared types at
run time, so some tests of wrongly typed input fail there.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODEC = ["_codes", "_command", "_decoder", "_encoder", "_errors", "_header_binary",
         "_header_json", "_lenient_json"]
CORE = ["_sansio/_response_table", "_sansio/_outbound", "_trio_driver/_many",
        "_trio_driver/_invoker", "_trio_driver/_sender", "_receiving/_dispatch",
        "_trio_driver/_deadlines", "_trio_driver/_permits", "_calling/_future"]
# `cmd = _new(RemotingCommand)` followed by field assignments: mypyc wants the constructor.
FAST_NEW = re.compile(r"    cmd: RemotingCommand = _new\(RemotingCommand\)\n"
                      r"((?:    cmd\.\w+ = .+\n)+)    return cmd\n")
FIELD = re.compile(r"    cmd\.(\w+) = (.+)\n")


def _constructor_call(match: re.Match[str]) -> str:
    fields = ", ".join(f"{name}={value}" for name, value in FIELD.findall(match[1]))
    return f"    return RemotingCommand({fields})\n"


def make_compilable(path: Path) -> None:
    """Rewrite what mypyc refuses in one module; the behaviour stays the same."""
    text = FAST_NEW.sub(_constructor_call, path.read_text())
    text = re.sub(r"^(\w+)\.__module__ = \"codec\"$", "pass", text, flags=re.MULTILINE)
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path, help="an empty or missing directory")
    args = parser.parse_args(argv)
    target: Path = args.target.resolve()
    if target.exists() and any(target.iterdir()):
        parser.error(f"{target} is not empty")
    target.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    modules = [target / "codec" / f"{m}.py" for m in CODEC]
    modules += [target / "remoting" / "_core" / f"{m}.py" for m in CORE]
    for module in modules:
        make_compilable(module)
    # mypyc's setup step reads pyproject.toml and refuses its license table: hide it meanwhile.
    pyproject = target / "pyproject.toml"
    shutil.move(pyproject, target / "pyproject.toml.off")
    try:
        mypyc = Path(sys.executable).with_name("mypyc")
        subprocess.run([str(mypyc), *map(str, modules)], cwd=target, check=True,
                       stdout=subprocess.DEVNULL)
    finally:
        shutil.move(target / "pyproject.toml.off", pyproject)
    built = [m for m in modules if list(m.parent.glob(f"{m.stem}.*.so"))]
    print(f"{len(built)} of {len(modules)} modules compiled in {target}; A/B with:\n"
          f"  .venv/bin/python bench/ab.py --a . --b {target} --rounds 3")
    return 0


if __name__ == "__main__":
    sys.exit(main())
