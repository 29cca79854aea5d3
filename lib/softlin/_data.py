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


def seed_record_summary(*pages):
    """One line per page and mode of the committed seed record (``book/data/seed_record.json``, written
    by ``tools/run_seeds.py --record``): at how many of the seeds run all of the page's checks held, and
    which seeds were run. ``pages`` are page names as the record spells them (``"03_concentration"``,
    ``"labs/03_concentration"``); a page the record lacks gives a line that says so. Returns a string
    (empty when no record ships with this softlin)."""
    for i, page in enumerate(pages):
        if not isinstance(page, str):
            raise TypeError(f"args[{i}]: expected a page name (str), got {type(page).__name__}")
    record = committed_data("seed_record.json")
    if record is None:
        return ""
    lines = []
    for page in pages:
        modes = record.get("pages", {}).get(page)
        if not modes:
            lines.append(f"{page}: not in the seed record")
            continue
        for mode, runs in modes.items():
            held = sum(run["passed"] for run in runs.values())
            failed = [seed for seed, run in runs.items() if not run["passed"]]
            seeds = seed_ranges(runs)
            note = f"; failed at seed {', '.join(failed)}" if failed else ""
            lines.append(
                f"{page}, {mode} mode: all checks held at {held} of {len(runs)} seeds ({seeds}){note}"
            )
    return "\n".join(lines)


def seed_ranges(seeds):
    """Seeds (ints or their strings) as short ranges, in order: ``["0", "1", "2", "5"]`` gives
    ``"0-2, 5"``."""
    if isinstance(seeds, str) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds: expected a collection of seeds, got {type(seeds).__name__}")
    seeds = list(seeds)
    if not all(isinstance(seed, (int, str)) and str(seed).isdigit() for seed in seeds):
        raise ValueError(f"seeds: expected non-negative integer seeds, got {seeds!r}")
    values = sorted(int(seed) for seed in seeds)
    parts, start = [], None
    for i, value in enumerate(values):
        start = value if start is None else start
        if i + 1 == len(values) or values[i + 1] != value + 1:
            parts.append(str(value) if value == start else f"{start}-{value}")
            start = None
    return ", ".join(parts)
