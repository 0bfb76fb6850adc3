"""Check the links of the docs and the README, and every mention of a ``.md`` file in the
repository (``make docs`` runs it first; so does the test suite).

- A relative link of a page resolves to a file, and a ``#anchor`` to a heading of the page it
  names (levels 1-3: the ones that get an anchor, ``myst_heading_anchors`` in conf.py).
- A page of the site (under docs/) links only to files inside docs/: Sphinx renders a link to
  another file of the repository as plain text. Those go to the repository's web address.
- A ``name.md`` mentioned anywhere (a comment, a docstring) names a file of the repository.

Prints one line per problem; exits 1 if there is any.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,3}) (.+?)\s*$", re.M)
URL = re.compile(r"[a-z][a-z+]*://\S+")
MENTION = re.compile(r"(?<![\w$/.-])[\w./-]*\w\.md\b")
NOT_OURS = ("tests/codec/data/",  # upstream reference texts, kept as they were written
            # this check and its test, which name missing pages on purpose
            "docs/check_links.py", "tests/test_docs_links_and_api_reference_are_complete.py")


def slug(title: str) -> str:
    """The anchor of a heading, as GitHub and myst make it."""
    text = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)  # not code
    return {slug(match.group(2)) for match in HEADING.finditer(text)}


def link_problems(page: Path) -> list[str]:
    problems = []
    in_site = page.parent == DOCS
    for target in LINK.findall(page.read_text()):
        if URL.match(target) or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT)}: link {target!r}"
        if not file.exists():
            problems.append(f"{where}: no such file")
        elif in_site and DOCS not in file.parents:
            problems.append(f"{where}: outside docs/, the site shows it unlinked (use the "
                            "repository's address)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            problems.append(f"{where}: no heading with that anchor")
    return problems


def tracked_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    return [ROOT / name for name in names if not name.startswith(NOT_OURS)]


def mention_problems(file: Path) -> list[str]:
    try:
        text = file.read_text()
    except (UnicodeDecodeError, FileNotFoundError):  # binary, or deleted but not committed
        return []
    problems = []
    for name in sorted(set(MENTION.findall(URL.sub("", text)))):
        if not any((base / name).exists() for base in (file.parent, ROOT, DOCS)):
            problems.append(f"{file.relative_to(ROOT)}: mentions {name}, which is not in the "
                            "repository")
    return problems


def problems() -> list[str]:
    """Return every problem found, one line each."""
    found = [p for page in PAGES for p in link_problems(page)]
    found += [p for file in tracked_files() for p in mention_problems(file)]
    return found


def main() -> int:
    found = problems()
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
