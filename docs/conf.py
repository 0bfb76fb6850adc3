"""Sphinx configuration of the trio-remoting docs site (``make docs``)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from remoting import __version__  # noqa: E402

project = "trio-remoting"
author = "trio-remoting developers"
copyright = "the trio-remoting developers, Apache-2.0"  # noqa: A001
release = version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3
# Links to repository files outside docs/ are web addresses (check_links.py checks it), so
# a link Sphinx cannot resolve is an error of the page.

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
nitpicky = False

html_theme = "furo"
html_title = f"trio-remoting {release}"
html_static_path: list[str] = []
