"""Build the compiled fast path (``codec/_speedups.c``) with the package; pure Python without it.

A hatchling build hook (``[tool.hatch.build.hooks.custom]`` in pyproject.toml): building a
wheel compiles the extension with the platform's C compiler (setuptools' ``build_ext``, so
``CC``, ``CFLAGS`` and cibuildwheel's settings apply) and adds it to a platform wheel; an
editable install (``pip install -e .``) compiles it in place, beside its source. When
``TRIO_REMOTING_PURE_PYTHON=1`` is set, or compiling fails (no compiler), it says so in one
line and the wheel is the pure-Python package (``py3-none-any``), which works the same.

Run as a script, it compiles in place (what ``make`` does when ``codec/_speedups.c`` changed):

    .venv/bin/python hatch_build.py
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
SOURCE = "codec/_speedups.c"
MODULE = "codec._speedups"
PURE_PYTHON_ENV = "TRIO_REMOTING_PURE_PYTHON"


def _say(line: str) -> None:
    print(f"trio-remoting: {line}", file=sys.stderr, flush=True)


def pure_python_requested() -> bool:
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def compile_extension(build_dir: Path, *, inplace: bool) -> Path:
    """Compile the extension; return the path of the built file.

    Raises:
        Exception: whatever the compiler or setuptools raised (no compiler, a failed build).
    """
    from setuptools import Distribution, Extension

    sha = hashlib.sha256((ROOT / SOURCE).read_bytes()).hexdigest()
    ext = Extension(MODULE, [SOURCE], define_macros=[("SOURCE_SHA256", f'"{sha}"')])
    dist = Distribution({"name": "trio-remoting-speedups", "ext_modules": [ext]})
    cmd: Any = dist.get_command_obj("build_ext")
    cmd.inplace = inplace
    cmd.build_lib = str(build_dir / "lib")
    cmd.build_temp = str(build_dir / "temp")
    cwd = os.getcwd()
    os.chdir(ROOT)  # build_ext resolves the source and the in-place target from here
    try:
        cmd.ensure_finalized()
        cmd.run()
        return Path(cmd.get_ext_fullpath(MODULE)).resolve()
    finally:
        os.chdir(cwd)


def build(build_dir: Path, *, inplace: bool) -> Path | None:
    """Compile unless pure Python was asked for; on failure say why in one line."""
    if pure_python_requested():
        _say(f"{PURE_PYTHON_ENV} is set: building the pure-Python package")
        return None
    try:
        built = compile_extension(build_dir, inplace=inplace)
    except Exception as exc:  # no compiler, missing headers: the pure package still works
        text = " ".join(str(exc).split())
        reason = type(exc).__name__ + (f": {text[:100]}..." if len(text) > 100
                                       else f": {text}" if text else "")
        _say(f"could not compile the fast path ({reason}): installing the pure-Python "
             "package, which works the same, only slower")
        return None
    _say(f"compiled the fast path: {built.name}")
    return built


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script, outside a build
    BuildHookInterface = object  # type: ignore[assignment,misc]


class CompiledFastPath(BuildHookInterface):  # type: ignore[misc,valid-type]
    """Compile ``codec._speedups`` into the wheel (in place for an editable install)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        editable = version == "editable"
        self._tmp = tempfile.TemporaryDirectory(prefix="trio-remoting-build-")
        built = build(Path(self._tmp.name), inplace=editable)
        if built is None:
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if not editable:  # an editable install imports it from the source tree
            build_data["force_include"][str(built)] = f"codec/{built.name}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="trio-remoting-build-") as tmp:
        sys.exit(0 if build(Path(tmp), inplace=True) is not None
                 or pure_python_requested() else 1)
