"""Build the compiled fast path (the C kernels in `EXTENSIONS`); pure Python without it.

A hatchling build hook (``[tool.hatch.build.hooks.custom]`` in pyproject.toml): building a
wheel compiles the extensions with the platform's C compiler (setuptools' ``build_ext``, so
``CC``, ``CFLAGS`` and cibuildwheel's settings apply) and adds them to a platform wheel; an
editable install (``pip install -e .``) compiles them in place, beside their sources. When
``TRIO_REMOTING_PURE_PYTHON=1`` is set, or compiling fails (no compiler), it says so in one
line and the wheel is the pure-Python package (``py3-none-any``), which works the same.

Run as a script, it compiles in place (what ``make`` does when a C source changed):

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
# (module, its C source): the codec's kernels and the receiving side's, each beside the Python
# module that owns it (codec/_native.py loads them all by one rule).
EXTENSIONS = (
    ("codec._speedups", "codec/_speedups.c"),
    ("remoting._core._receiving._speedups", "remoting/_core/_receiving/_speedups.c"),
)
PURE_PYTHON_ENV = "TRIO_REMOTING_PURE_PYTHON"


def _say(line: str) -> None:
    print(f"trio-remoting: {line}", file=sys.stderr, flush=True)


def pure_python_requested() -> bool:
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def compile_extensions(build_dir: Path, *, inplace: bool) -> list[Path]:
    """Compile every extension; return the paths of the built files.

    Raises:
        Exception: whatever the compiler or setuptools raised (no compiler, a failed build).
    """
    from setuptools import Distribution, Extension

    exts = []
    for module, source in EXTENSIONS:
        sha = hashlib.sha256((ROOT / source).read_bytes()).hexdigest()
        exts.append(Extension(module, [source], define_macros=[("SOURCE_SHA256", f'"{sha}"')]))
    dist = Distribution({"name": "trio-remoting-speedups", "ext_modules": exts})
    cmd: Any = dist.get_command_obj("build_ext")
    cmd.inplace = inplace
    cmd.build_lib = str(build_dir / "lib")
    cmd.build_temp = str(build_dir / "temp")
    cwd = os.getcwd()
    os.chdir(ROOT)  # build_ext resolves the sources and the in-place targets from here
    try:
        cmd.ensure_finalized()
        cmd.run()
        return [Path(cmd.get_ext_fullpath(module)).resolve() for module, _ in EXTENSIONS]
    finally:
        os.chdir(cwd)


def build(build_dir: Path, *, inplace: bool) -> list[Path] | None:
    """Compile unless pure Python was asked for; on failure say why in one line."""
    if pure_python_requested():
        _say(f"{PURE_PYTHON_ENV} is set: building the pure-Python package")
        return None
    try:
        built = compile_extensions(build_dir, inplace=inplace)
    except Exception as exc:  # no compiler, missing headers: the pure package still works
        text = " ".join(str(exc).split())
        reason = type(exc).__name__ + (f": {text[:100]}..." if len(text) > 100
                                       else f": {text}" if text else "")
        _say(f"could not compile the fast path ({reason}): installing the pure-Python "
             "package, which works the same, only slower")
        return None
    _say("compiled the fast path: " + ", ".join(module for module, _ in EXTENSIONS))
    return built


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script, outside a build
    BuildHookInterface = object  # type: ignore[assignment,misc]


class CompiledFastPath(BuildHookInterface):  # type: ignore[misc,valid-type]
    """Compile the `EXTENSIONS` into the wheel (in place for an editable install)."""

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
        if not editable:  # an editable install imports them from the source tree
            for (module, _), path in zip(EXTENSIONS, built, strict=True):
                folder = module.rpartition(".")[0].replace(".", "/")
                build_data["force_include"][str(path)] = f"{folder}/{path.name}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="trio-remoting-build-") as tmp:
        sys.exit(0 if build(Path(tmp), inplace=True) is not None
                 or pure_python_requested() else 1)
