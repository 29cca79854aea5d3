#!/usr/bin/env python
"""Build the course's graded problem sets with otter-grader, and grade submissions locally (no Docker).

    python tools/problem_sets.py                       # every set -> _build/problem-sets/ (`make problem-sets`)
    python tools/problem_sets.py ps2_concentration     # one set
    python tools/problem_sets.py --grade ps1_measures submission.ipynb [...]   # score submissions

One problem set per session, ``course/problem_sets/psN_name.md``: a MyST notebook (jupytext) written in
otter-grader's assignment format (raw cells ``# BEGIN QUESTION`` ... ``# END QUESTION``, solutions between
``# BEGIN SOLUTION`` and ``# END SOLUTION`` or marked ``# SOLUTION``, test cells with a ``TEST CONFIG``
giving their points and whether they are ``hidden``; manually graded questions carry their model answer
and rubric as their solution). ``otter assign`` turns each into

* ``_build/problem-sets/psN_name/student/psN_name.ipynb``: the student version, solutions removed, the
  public checks kept in the notebook (``grader.check("q1")``);
* ``_build/problem-sets/psN_name/autograder/``: the solution notebook (model answers and rubrics
  included) and ``autograder.zip`` with the public and the hidden tests;

Before ``otter assign``, the setup cell's ``@main`` becomes the commit the set is built from
(:func:`pin_setup`, ``git rev-parse HEAD`` as ``tools/colab_notebooks.py`` does for the lessons), so a
student notebook installs ``softlin`` at the commit whose hidden tests grade it, as the student copies of
the lessons do; outside git the sources' ``@main`` stays.

This script also adds ``_build/problem-sets/psN_name/rubric.md`` (points per question, the manual
questions' model answers and rubrics), ``_build/problem-sets/README.md`` and
``_build/problem-sets/student-versions.zip``. ``otter assign`` runs every test against the solution
notebook, so a set whose solution fails its own tests does not build.

Grading runs the submission in this environment (``otter.api.grade_submission``: no container, no
network; softlin and torch must be installed, as ``make install`` does), and prints the points of each
question; the manually graded questions are listed with their points, to be graded by hand with the
rubric. Why otter-grader rather than nbgrader: one source notebook gives the student version and the
autograder, with public and hidden tests and points per test case, in the notebook format students
already use; grading needs neither a course database nor Jupyter server extensions, and otter runs the
tests without Docker.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "course" / "problem_sets"
OUT = ROOT / "_build" / "problem-sets"
QUESTION = re.compile(r"```\{raw-cell\}\n# BEGIN QUESTION\n(?P<config>.*?)```", re.S)


def sets() -> list[str]:
    """The problem sets' names, in session order (``psN_name``)."""
    return sorted(p.stem for p in SOURCES.glob("ps*.md"))


def questions(name: str) -> list[dict]:
    """Each question's ``name``, ``points`` and ``manual`` flag, from the source's question configs."""
    import yaml

    text = (SOURCES / f"{name}.md").read_text()
    out = []
    for m in QUESTION.finditer(text):
        cfg = yaml.safe_load(m.group("config"))
        out.append(
            {"name": cfg["name"], "points": float(cfg["points"]), "manual": bool(cfg.get("manual"))}
        )
    return out


def rubric(name: str) -> str:
    """The rubric page of a set: points per question, and each manual question with its model answer."""
    import jupytext

    nb = jupytext.read(SOURCES / f"{name}.md")
    qs = {q["name"]: q for q in questions(name)}
    title = (
        next(c.source for c in nb.cells if c.cell_type == "markdown").splitlines()[0].lstrip("# ")
    )
    lines = [
        f"# {title}: points and rubrics",
        "",
        "| question | points | graded |",
        "|---|---:|---|",
    ]
    lines += [
        f"| {q['name']} | {q['points']:g} | {'by hand (rubric below)' if q['manual'] else 'autograder'} |"
        for q in qs.values()
    ]
    total = sum(q["points"] for q in qs.values())
    auto = sum(q["points"] for q in qs.values() if not q["manual"])
    lines += [f"| **total** | **{total:g}** | {auto:g} by the autograder |", ""]
    current, inside = None, False
    for cell in nb.cells:
        src = cell.source.strip()
        if cell.cell_type == "raw" and src.startswith("# BEGIN QUESTION"):
            current = re.search(r"name:\s*(\S+)", src).group(1)
        elif cell.cell_type == "raw" and src == "# BEGIN SOLUTION" and qs[current]["manual"]:
            inside = True
            lines += [f"## {current} ({qs[current]['points']:g} points, by hand)", ""]
        elif cell.cell_type == "raw" and src == "# END SOLUTION":
            inside = False
        elif inside and cell.cell_type == "markdown":
            lines += [cell.source.strip(), ""]
    return "\n".join(lines)


SETUP_INSTALL = re.compile(r"(%pip install -q git\+\S+)@main\b")


def pin_setup(nb, commit: str | None, name: str = "set"):
    """Point the setup cell's install of softlin at ``commit`` (in place; ``None`` keeps ``@main``)."""
    setup = [c for c in nb.cells if c.cell_type == "code" and SETUP_INSTALL.search(c.source)]
    if len(setup) != 1:
        raise SystemExit(f"problem_sets: {name} needs one setup cell installing softlin @main")
    if commit:
        cell = setup[0]
        cell.source = SETUP_INSTALL.sub(rf"\1@{commit}", cell.source).replace(
            "# Setup:",
            f"# Built from commit {commit[:12]} of the book: softlin is installed at that commit, so that\n"
            "# the set and its library agree.\n# Setup:",
            1,
        )
    return nb


def build(name: str, out: Path = OUT, commit: str | None = None) -> Path:
    """Run ``otter assign`` on one set; return its output folder. ``commit``: where the setup cell
    installs softlin (default: the checkout's ``HEAD``; ``""`` keeps ``@main``)."""
    import jupytext
    import nbformat
    from colab_notebooks import checkout_commit
    from otter.assign import main as otter_assign

    master_dir = out / "masters"
    master_dir.mkdir(parents=True, exist_ok=True)
    nb = jupytext.read(SOURCES / f"{name}.md")
    nb.metadata.pop("jupytext", None)
    pin_setup(nb, checkout_commit(ROOT) if commit is None else (commit or None), name)
    master = master_dir / f"{name}.ipynb"
    nbformat.write(nb, master)
    result = out / name
    shutil.rmtree(result, ignore_errors=True)
    otter_assign(str(master), str(result), no_pdfs=True)
    student = result / "student" / f"{name}.ipynb"
    autograder = result / "autograder" / "autograder.zip"
    for stamped in (result / "autograder").glob(f"{name}-autograder_*.zip"):
        stamped.rename(autograder)  # otter names it by the time of the build
    for path in (student, autograder):
        if not path.exists():
            raise SystemExit(f"problem_sets: otter assign wrote no {path}")
    (result / "rubric.md").write_text(rubric(name))
    return result


def readme(names: list[str], out: Path = OUT) -> None:
    lines = [
        "# Problem sets (built by `make problem-sets`, tools/problem_sets.py)",
        "",
        "| set | points | autograded | by hand | student version | autograder |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name in names:
        qs = questions(name)
        total = sum(q["points"] for q in qs)
        auto = sum(q["points"] for q in qs if not q["manual"])
        lines.append(
            f"| {name} | {total:g} | {auto:g} | {total - auto:g} | {name}/student/{name}.ipynb | "
            f"{name}/autograder/autograder.zip |"
        )
    lines += [
        "",
        "Grade a submission (no Docker): `.venv/bin/python tools/problem_sets.py --grade NAME FILE.ipynb`.",
        "Each set's rubric.md gives the points per question and the rubrics of the questions graded by hand.",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


def zip_students(names: list[str], out: Path = OUT) -> Path:
    target = out / "student-versions.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for name in names:
            z.write(out / name / "student" / f"{name}.ipynb", f"{name}.ipynb")
    return target


def grade(name: str, submission: Path, out: Path = OUT) -> dict:
    """Grade one submission against the set's autograder (public and hidden tests), in this Python
    environment; return ``{"questions": {q: (score, possible)}, "auto": (score, possible),
    "manual": {q: possible}}``."""
    from otter.api import grade_submission

    autograder = out / name / "autograder" / "autograder.zip"
    if not autograder.exists():
        raise SystemExit(f"{autograder} does not exist: build the set first (make problem-sets)")
    results = grade_submission(str(submission), str(autograder), quiet=True)
    qs = {q["name"]: q for q in questions(name)}
    scores = {}
    for q in qs.values():
        if q["manual"]:
            continue
        result = results.results.get(q["name"])
        scores[q["name"]] = (float(result.score) if result else 0.0, q["points"])
    return {
        "questions": scores,
        "auto": (sum(s for s, _ in scores.values()), sum(p for _, p in scores.values())),
        "manual": {q["name"]: q["points"] for q in qs.values() if q["manual"]},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "names", nargs="*", help="sets to build (default: all); with --grade, NAME FILE..."
    )
    ap.add_argument("--grade", action="store_true", help="grade submissions: NAME FILE [FILE ...]")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    known = sets()
    if args.grade:
        if len(args.names) < 2 or args.names[0] not in known:
            ap.error(f"--grade takes a set ({known}) and one or more notebooks")
        for path in args.names[1:]:
            r = grade(args.names[0], Path(path), args.out)
            detail = ", ".join(f"{q} {s:g}/{p:g}" for q, (s, p) in r["questions"].items())
            manual = ", ".join(f"{q} /{p:g}" for q, p in r["manual"].items())
            print(
                f"{path}: autograded {r['auto'][0]:g}/{r['auto'][1]:g} ({detail}); by hand: {manual}"
            )
            print(json.dumps(r))
        return 0
    names = args.names or known
    unknown = sorted(set(names) - set(known))
    if unknown:
        ap.error(f"unknown problem sets {unknown}; known: {known}")
    from colab_notebooks import checkout_commit, uncommitted_library

    if checkout_commit(ROOT) and uncommitted_library(ROOT):
        print(
            "note: lib/ has uncommitted changes; the sets install softlin at "
            f"{checkout_commit(ROOT)[:12]}",
            file=sys.stderr,
        )
    for name in names:
        result = build(name, args.out)
        print(
            f"problem_sets: {name} -> {result.relative_to(ROOT) if result.is_relative_to(ROOT) else result}"
        )
    readme(known if not args.names else names, args.out)
    zip_students(names, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
