#!/usr/bin/env python
"""Grade a folder of submissions of one problem set with otter, and write a gradebook and feedback that
students may see (points and the checks' messages, never the hidden tests' code).

Shipped beside the built problem sets (``_build/problem-sets/grade_all.py``, by ``make problem-sets``),
so that it runs without the book's repository: run it with the Python where otter-grader 7.0.0 and the
softlin wheel of the same folder are installed (its README.md says how).

    python grade_all.py ps1_measures submissions/          # every submissions/*.ipynb
    python grade_all.py ps1_measures a.ipynb b.ipynb --out graded

For each submission FILE.ipynb it runs ``otter run -a NAME/autograder/autograder.zip`` into
``OUT/results/FILE/`` (keep those: their text quotes the hidden tests), then writes

* ``OUT/grades-NAME.csv``: the gradebook, one row per submission, with the columns of
  ``tools/problem_sets.py --grade --csv`` (:func:`write_gradebook`, which that script imports from
  here): ``file``; one per question, in the set's order: the points the autograder awarded, or empty
  for a question graded by hand, for the grader to fill in from the set's rubric.md; then
  ``auto_awarded``, ``auto_possible``, ``manual_awarded`` (empty: the grader's sum of the hand-graded
  points), ``manual_possible`` and ``total_possible``. The questions, their points and which are graded
  by hand come from ``NAME/questions.json``, written by the build;
* ``OUT/feedback/FILE.md``: the same points, and for each failed check its message (the sentence the set
  wrote for it: what is wrong, never the test), to return to the student.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MESSAGE = re.compile(r"^\s*(\w+) - (\d+) message: (.*)$")
RESULT = re.compile(r"^\s*(\w+) - (\d+) result:\s*$")


def run_otter(autograder: Path, submission: Path, results: Path) -> dict:
    """otter's results.json for ``submission``, graded by ``autograder`` into ``results``."""
    results.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "otter",
            "run",
            "-a",
            str(autograder),
            "-o",
            str(results),
            str(submission),
        ],
        capture_output=True,
        text=True,
        check=False,  # a notebook that fails to run still gets results.json, read below
    )
    found = results / "results.json"
    if not found.exists():
        raise SystemExit(
            f"grade_all: otter run left no results.json for {submission} (exit {done.returncode}):\n"
            f"{done.stderr[-2000:]}"
        )
    return json.loads(found.read_text())


def feedback(results: dict) -> tuple[dict[str, tuple[float, float]], dict[str, list[str]]]:
    """({question: (points, possible)}, {question: messages of its failed checks}) from otter's results:
    the hidden checks' entries carry the points; a check's message is kept when its result says it
    failed, and no other line of the output (the output quotes the tests' code)."""
    points, failed = {}, {}
    for test in results["tests"]:
        if test.get("max_score") is None:  # "Public Tests": no points, and the same messages
            continue
        q = test["name"]
        points[q] = (float(test.get("score") or 0.0), float(test["max_score"]))
        messages, lines = {}, test.get("output", "").splitlines()
        for k, line in enumerate(lines):
            m = MESSAGE.match(line)
            if m:
                messages[m[2]] = m[3].strip()
            r = RESULT.match(line)
            if r and k + 1 < len(lines) and "failed" in lines[k + 1] and r[2] in messages:
                failed.setdefault(q, []).append(messages[r[2]])
    return points, failed


#: Each set's questions, in its order, with their points and whether they are graded by hand: written
#: beside the set's rubric.md by ``tools/problem_sets.py`` (``[{"name", "points", "manual"}, ...]``).
QUESTIONS = "questions.json"
#: The gradebook's columns after ``file`` and the questions' (``tools/problem_sets.py`` writes the same).
TOTALS = ("auto_awarded", "auto_possible", "manual_awarded", "manual_possible", "total_possible")


def read_questions(path: Path) -> list[dict]:
    """A set's questions from its ``questions.json`` (:data:`QUESTIONS`)."""
    if not path.exists():
        raise SystemExit(
            f"grade_all: no {path}: the set's list of questions; rebuild the sets (make problem-sets)"
        )
    questions = json.loads(path.read_text())
    expected = "a list of {name, points, manual} objects"
    if not isinstance(questions, list) or not all(
        isinstance(q, dict) and {"name", "points", "manual"} <= set(q) for q in questions
    ):
        raise SystemExit(f"grade_all: {path} holds {str(questions)[:200]!r}, expected {expected}")
    return questions


def gradebook_header(questions: list[dict]) -> list[str]:
    """The gradebook's columns: ``file``, one per question (in the set's order), then :data:`TOTALS`."""
    return ["file", *(q["name"] for q in questions), *TOTALS]


def gradebook_row(file: str, questions: list[dict], awarded: dict[str, float]) -> list[str]:
    """One submission's row of the gradebook (:func:`gradebook_header`'s columns). ``awarded``: the
    points the autograder awarded, by question (an autograded question missing from it, one otter
    could not run, gets 0). Every column holds points awarded unless its name ends in ``_possible``; a
    question graded by hand, and ``manual_awarded``, are left empty for the grader."""
    auto = [q for q in questions if not q["manual"]]
    stray = sorted(set(awarded) - {q["name"] for q in auto})
    if stray:
        raise ValueError(
            f"awarded: points for {stray} of {file}, expected points only for the autograded "
            f"questions {[q['name'] for q in auto]}"
        )
    got = sum(float(awarded.get(q["name"], 0.0)) for q in auto)
    possible = sum(float(q["points"]) for q in auto)
    by_hand = sum(float(q["points"]) for q in questions if q["manual"])
    cells = ["" if q["manual"] else f"{float(awarded.get(q['name'], 0.0)):g}" for q in questions]
    return [
        file,
        *cells,
        f"{got:g}",
        f"{possible:g}",
        "",
        f"{by_hand:g}",
        f"{possible + by_hand:g}",
    ]


def write_gradebook(path: Path, questions: list[dict], rows: list[tuple[str, dict]]) -> None:
    """Write the CSV gradebook ``path``: :func:`gradebook_header`, then one :func:`gradebook_row` per
    ``(file, awarded)`` of ``rows``."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(gradebook_header(questions))
        for file, awarded in rows:
            writer.writerow(gradebook_row(file, questions, awarded))


def write_feedback(path: Path, name: str, submission: str, points: dict, failed: dict) -> None:
    got = sum(p for p, _ in points.values())
    possible = sum(m for _, m in points.values())
    lines = [
        f"# {name}: {submission}",
        "",
        f"Autograded points: {got:g} of {possible:g} (the questions graded by hand come separately).",
        "",
        "| question | points |",
        "|---|---|",
        *(f"| {q} | {p:g} of {m:g} |" for q, (p, m) in points.items()),
        "",
    ]
    for q, messages in failed.items():
        lines += [f"**{q}**: a check failed.", *(f"- {text}" for text in messages), ""]
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the set, e.g. ps1_measures (a folder beside this script)")
    parser.add_argument("submissions", nargs="+", type=Path, help="notebooks, or folders of them")
    parser.add_argument("--out", type=Path, default=Path("graded"), help="default: ./graded")
    args = parser.parse_args(argv)
    autograder = HERE / args.name / "autograder" / "autograder.zip"
    if not autograder.exists():
        sets = sorted(p.name for p in HERE.glob("ps*_*") if p.is_dir())
        raise SystemExit(f"grade_all: no set {args.name!r} beside this script; the sets are {sets}")
    files = []
    for s in args.submissions:
        if not s.exists():
            raise SystemExit(f"grade_all: submission {s} does not exist")
        files += sorted(s.glob("*.ipynb")) if s.is_dir() else [s]
    if not files:
        raise SystemExit(f"grade_all: no .ipynb among {[str(s) for s in args.submissions]}")
    questions = read_questions(HERE / args.name / QUESTIONS)
    rows = []
    (args.out / "feedback").mkdir(parents=True, exist_ok=True)
    for f in files:
        points, failed = feedback(run_otter(autograder, f, args.out / "results" / f.stem))
        write_feedback(args.out / "feedback" / f"{f.stem}.md", args.name, f.name, points, failed)
        rows.append((f.name, {q: p for q, (p, _) in points.items()}))
        total = sum(p for p, _ in points.values())
        print(f"{f.name}: {total:g} of {sum(m for _, m in points.values()):g} autograded points")
    gradebook = args.out / f"grades-{args.name}.csv"
    write_gradebook(gradebook, questions, rows)
    print(f"grade_all: {gradebook} and {args.out / 'feedback'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
