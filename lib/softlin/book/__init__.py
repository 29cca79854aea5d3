"""The reader apparatus of the book, apart from the mathematics: a chapter's size table by ``mode``
(:mod:`softlin.book.modes`), the figure style (:mod:`softlin.book.plotting`), the explorers,
``show_source`` (:mod:`softlin.book.widgets`) and the exercises' self-checks, whose answer keys are
computed from a registry (:mod:`softlin.book.exercises`); the paper's experiment, its full attention
model, starts, data stream, SGD and evaluation (:mod:`softlin.book.experiment`: the apparatus that
trains, not the mathematics of Section 5, which is :mod:`softlin.icl`); and :func:`committed_data`,
the results files committed with the book."""

import json
from importlib.resources import files
from pathlib import Path


def committed_data(name):
    """The JSON file ``book/data/<name>`` committed with the book, parsed: read from ``data/`` beside
    the running chapter (the book's folder) or, elsewhere (Colab, student copies), from the copy that
    softlin ships as package data. Returns None when neither exists (an old installed softlin)."""
    if not isinstance(name, str):
        raise TypeError(f"name: expected a file name ending in .json, got {type(name).__name__}")
    if "/" in name or not name.endswith(".json"):
        raise ValueError(f"name: expected a file name ending in .json, got {name!r}")
    for path in (Path("data") / name, files("softlin.book") / "data" / name):
        if path.is_file():
            return json.loads(path.read_text())
    return None
