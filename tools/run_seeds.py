#!/usr/bin/env python
"""Execute chapters at several seeds and count how many pass: every assert of a chapter must hold
whatever ``seed`` a reader sets in its parameters cell.

    .venv/bin/python tools/run_seeds.py 03_concentration --mode default --seeds 0-9
    .venv/bin/python tools/run_seeds.py all --mode fast --seeds 0-9 -j 2

Each run is a papermill execution of the chapter's MyST source with ``mode``, ``device="cpu"`` and
``seed`` injected (executed notebooks go to ``_build/seeds/``, not into the book). Prints one line per run
and a table of counts; exits 1 if any run failed (the failing cell's error is printed).

``--record`` also writes the results into the committed seed record ``book/data/seed_record.json``
(per page, mode and seed: passed or not, the seconds, the first line of a failure; the commit and the
machine of each run), which the pages cite when they speak of seeds:

    .venv/bin/python tools/run_seeds.py all --mode default --seeds 0-9 -j 2 --record
    .venv/bin/python tools/run_seeds.py all --mode fast --seeds 0-19,21 -j 2 --record
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_book import ROOT, execute_one, notebook_chapters, page_name
from checkout import git

RECORD = ROOT / "book" / "data" / "seed_record.json"


def record_runs(records, runs, mode, path=RECORD):
    """Merge this invocation's runs into the seed record at ``path`` (a page, mode and seed run again
    replaces its entry)."""
    import json
    import platform
    import time

    doc = json.loads(path.read_text()) if path.exists() else {}
    doc["description"] = (
        "Every lesson and lab executed at several seeds (tools/run_seeds.py --record): per page, "
        "mode and seed, whether all its checks held, and the run's time and commit"
    )
    pages = doc.setdefault("pages", {})
    commit = (git("rev-parse", "HEAD") or "").strip()[:12]
    # the record itself does not make the tree dirty (an earlier page's runs were written to it)
    changed = (git("status", "--porcelain", "--untracked-files=no") or "").splitlines()
    dirty = any(not line.endswith(str(path.relative_to(ROOT))) for line in changed if line.strip())
    for run, rec in zip(runs, records):
        entry = pages.setdefault(rec["chapter"], {}).setdefault(mode, {})
        entry[str(run[5]["seed"])] = {
            "passed": rec["error"] is None,
            "seconds": rec["seconds"],
            "error": None if rec["error"] is None else rec["error"].strip().splitlines()[-1][:200],
            "commit": commit + ("+dirty" if dirty else ""),
            "machine": f"{os.cpu_count()} cores, {platform.machine()}",
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
        }
    path.write_text(json.dumps(doc, indent=1, sort_keys=True))


def parse_seeds(text: str) -> list[int]:
    """``"0-9"`` -> 0..9, ``"1,4,8"`` -> [1, 4, 8]."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "chapters", nargs="+", help="pages (03_concentration, labs/03_concentration), or 'all'"
    )
    ap.add_argument("--mode", choices=("fast", "default", "paper"), default="default")
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument(
        "--record", action="store_true", help=f"merge the results into {RECORD.relative_to(ROOT)}"
    )
    args = ap.parse_args(argv)
    known = {page_name(c): c for c in notebook_chapters()}
    stems = list(known) if args.chapters == ["all"] else args.chapters
    unknown = set(stems) - set(known)
    if unknown:
        ap.error(f"unknown chapters {sorted(unknown)}; known: {sorted(known)}")
    os.environ.setdefault(
        "SOFTLIN_STATIC_EXPLORERS", "check"
    )  # no site: explorers check, not draw all
    out_dir = ROOT / "_build" / "seeds"
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = [
        (
            str(known[s]),
            str(out_dir / f"{s.replace('/', '-')}-{args.mode}-seed{seed}.ipynb"),
            args.mode,
            "cpu",
            max(1, 2 // args.jobs),
            {"seed": seed},
        )
        for s in stems
        for seed in parse_seeds(args.seeds)
    ]
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
        records = list(pool.map(execute_one, *zip(*runs)))
    counts = {}
    for run, rec in zip(runs, records):
        seed = run[5]["seed"]
        ok = rec["error"] is None
        counts.setdefault(rec["chapter"], [0, 0])[0 if ok else 1] += 1
        status = "pass" if ok else "FAIL: " + rec["error"].strip().splitlines()[-1][:200]
        print(
            f"{rec['chapter']} mode={args.mode} seed={seed}: {rec['seconds']:.0f} s, {status}",
            flush=True,
        )
    if args.record:
        record_runs(records, runs, args.mode)
    print("\n| chapter | mode | passed | failed |\n|---|---|---:|---:|")
    for stem, (good, bad) in counts.items():
        print(f"| {stem} | {args.mode} | {good} | {bad} |")
    return 0 if all(bad == 0 for _, bad in counts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
