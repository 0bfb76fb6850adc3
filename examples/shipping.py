"""Ship local Python packages to Spark executors: a zip for ``spark.submit.pyFiles``.

On a cluster whose nodes do not have your code installed, Spark puts the files listed in
``spark.submit.pyFiles`` (or added with ``SparkContext.addPyFile``) on every executor's
``sys.path``. Pure-Python packages can travel as one zip; third-party packages with C
extensions (pandas, pyarrow) travel as a packed virtualenv in ``spark.archives`` instead
(docs/spark.md, "Running on a cluster").
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["zip_packages"]


def zip_packages(root: Path, packages: Iterable[str], into: Path) -> Path:
    """Zip the ``.py`` and ``py.typed`` files of ``packages`` (folders under ``root``)."""
    into.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(into, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in packages:
            for file in sorted((root / package).rglob("*")):
                if file.suffix == ".py" or file.name == "py.typed":
                    if "__pycache__" not in file.parts:
                        zf.write(file, file.relative_to(root).as_posix())
    return into
