"""The results files committed with the book (``book/data/*.json``), read by the pages and by
:func:`softlin.experiment.load_results`: from the book's folder when a page runs there, else from the
copy that softlin ships as package data (Colab, student copies)."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path


def committed_data(name):
    """The JSON file ``book/data/<name>`` committed with the book, parsed: read from ``data/`` beside
    the running page (a lesson in ``book/``, or ``../data`` for a lab in ``book/labs/``) or, elsewhere,
    from the copy that softlin ships as package data. Returns None when none exists (an old softlin)."""
    if not isinstance(name, str):
        raise TypeError(f"name: expected a file name ending in .json, got {type(name).__name__}")
    if "/" in name or not name.endswith(".json"):
        raise ValueError(f"name: expected a file name ending in .json, got {name!r}")
    for path in (Path("data") / name, Path("..") / "data" / name, files("softlin") / "data" / name):
        if path.is_file():
            return json.loads(path.read_text())
    return None
