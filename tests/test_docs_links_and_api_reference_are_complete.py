"""The docs point only at what exists, and the API reference lists every public name.

- every link of the README and the docs resolves (file and heading), none from the site to a
  file outside docs/ (Sphinx shows those unlinked), and every ``name.md`` mentioned anywhere
  in the repository exists (``ANCHORS.md`` was cited by four files and is in no repository);
  ``make docs`` runs the same check (docs/check_links.py) before Sphinx;
- the README's list of the docs names every page;
- every public constant and type alias is in docs/api.rst, with its value where it shows one.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def check_links() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_links", ROOT / "docs" / "check_links.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_link_and_every_mention_of_a_page_resolves() -> None:
    assert check_links().problems() == []


def test_the_check_reads_anchors_and_mentions_as_github_and_myst_do() -> None:
    links = check_links()
    assert links.slug("Several cores: `remoting serve --workers`") == (
        "several-cores-remoting-serve---workers")
    assert {"rpc", "codec"} <= links.anchors(links.DOCS / "performance.md")
    # a shell variable's path is no mention; a bare name and a path are
    assert links.MENTION.findall("see ANCHORS.md and docs/errors.md, $ROOT/README.md") == [
        "ANCHORS.md", "docs/errors.md"]


def test_make_docs_runs_the_check_before_sphinx() -> None:
    plan = subprocess.run(["make", "-n", "docs"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True).stdout.splitlines()
    steps = [i for i, line in enumerate(plan) if "check_links.py" in line or "-m sphinx" in line]
    assert ["check_links.py" in plan[i] for i in steps] == [True, False], plan


def test_the_readme_lists_every_page_of_the_docs() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name != "index.md":
            assert f"(docs/{page.name})" in readme, page.name


def public_data(module_name: str) -> dict[str, object]:
    module = importlib.import_module(module_name)
    return {name: getattr(module, name) for name in module.__all__
            if not (inspect.isclass(getattr(module, name))  # a compiled function is a routine
                    or inspect.isroutine(getattr(module, name)))}


@pytest.mark.parametrize("module_name", ["remoting", "remoting.spark", "processors", "codec"])
def test_the_api_reference_lists_every_public_constant_with_its_value(module_name: str) -> None:
    api = (ROOT / "docs" / "api.rst").read_text()
    for name, value in public_data(module_name).items():
        entry = re.search(rf"^\.\. py:data:: {re.escape(module_name)}\.{name}\n"
                          rf"(   :value: (?P<value>.+)\n)?", api, re.M)
        assert entry is not None, f"{module_name}.{name} is not in docs/api.rst"
        if entry.group("value") is not None:
            assert entry.group("value") == repr(value), f"{module_name}.{name}"
