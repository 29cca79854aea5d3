#!/usr/bin/env python
"""The course grade of every student, from the three sets' gradebooks and the checks' marks, by the
default grading scheme of the book's page *Problem sets and grading* (the syllabus's weights).

Shipped beside ``grade_all.py`` in the built problem sets (``make problem-sets``); it needs nothing but
Python's standard library.

    python final_grades.py graded/                       # graded/grades-ps*.csv and graded/checks.csv
    python final_grades.py graded/ --out course-grades.csv

**Inputs.** ``FOLDER/grades-ps1_measures.csv``, ``grades-ps2_concentration.csv`` and
``grades-ps3_regression.csv``, the gradebooks ``grade_all.py`` writes (each set graded from its own
folder of submissions into the same ``--out`` folder, ``graded/`` by default), with their hand marks in;
and ``FOLDER/checks.csv``, the marks of the two ten-minute checks: columns ``student``, ``check1`` and
``check2``, 0 to 4 each (``written_check.py --seed SEED --set N`` writes their sheets and keys). Where
``checks.csv`` is missing it is written with a row per student and empty marks, to fill in, and the
script stops. A student is the name of their notebook without ``.ipynb``: keep each student's file
name the same in every set (``alice.ipynb``).

**The scheme** (:data:`WEIGHTS`), each part on its own:

* **sets, 30 %**: the points awarded in sets 1 and 2 and in set 3's questions other than the report
  (``total_awarded``, the autograded points and the hand marks), over the points possible there (10, 12
  and 9: 31);
* **report, 40 %**: set 3's question 5 (:data:`REPORT`), 0 to 6, as marked in its gradebook column;
* **checks, 30 %**, 15 each: ``check1`` and ``check2``, each over 4.

A set a student did not hand in counts 0 (it is named on stderr, in case the file was named
otherwise). A grade is left empty, and the student named on stderr with what is missing, when a hand
mark, the report's mark or a check's mark is not in yet, or a mark lies outside its range; the exit
status is then 1. It writes ``FOLDER/course-grades.csv`` (or ``--out``): one row per student with
each part's points and percentage and the course grade in percent (one decimal), and prints the same
table.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

#: The sets' gradebooks, in ``grade_all.py``'s names (``grades-NAME.csv``).
SETS = ("ps1_measures", "ps2_concentration", "ps3_regression")
#: The report: set 3's question 5, graded by hand, out of its 6 points.
REPORT = ("ps3_regression", "q5")
#: The checks' columns in ``checks.csv``, each out of :data:`CHECK_POINTS`.
CHECKS = ("check1", "check2")
CHECK_POINTS = 4.0
#: The default scheme's weights, in percent (book/grading.md, book/syllabus.md).
WEIGHTS = {"sets": 30.0, "report": 40.0, "checks": 30.0}
COLUMNS = (
    "student",
    "sets_awarded",
    "sets_possible",
    "report",
    *CHECKS,
    "sets_percent",
    "report_percent",
    "checks_percent",
    "course_percent",
)


def _number(text: str, what: str) -> float | None:
    """``text`` as a number, None when empty; a SystemExit naming ``what`` when it is not a number."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise SystemExit(f"final_grades: {what} is {text!r}, expected a number") from None


def read_gradebook(path: Path) -> dict[str, dict]:
    """The rows of a set's gradebook, by student (the file's name without ``.ipynb``)."""
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        needed = {"file", "total_awarded", "total_possible"}
        if not reader.fieldnames or not needed <= set(reader.fieldnames):
            raise SystemExit(
                f"final_grades: {path} has the columns {reader.fieldnames}, expected a gradebook of "
                f"grade_all.py (with {sorted(needed)})"
            )
        rows = {}
        for row in reader:
            student = Path(row["file"]).stem
            if student in rows:
                raise SystemExit(f"final_grades: {path} has two rows for {student!r}")
            rows[student] = row
        return rows


def read_checks(path: Path) -> dict[str, dict]:
    """The checks' marks, by student."""
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        needed = ["student", *CHECKS]
        if not reader.fieldnames or not set(needed) <= set(reader.fieldnames):
            raise SystemExit(
                f"final_grades: {path} has the columns {reader.fieldnames}, expected {needed}"
            )
        return {row["student"].strip(): row for row in reader if row["student"].strip()}


def possible(gradebooks: dict[str, dict[str, dict]]) -> dict[str, float]:
    """The points possible per set, from its gradebook's ``total_possible`` (the same in every row)."""
    out = {}
    for name, rows in gradebooks.items():
        totals = {_number(r["total_possible"], f"{name}'s total_possible") for r in rows.values()}
        if len(totals) != 1:
            raise SystemExit(f"final_grades: {name}'s rows disagree on total_possible: {totals}")
        out[name] = totals.pop()
    return out


def course_row(
    student: str, gradebooks: dict[str, dict[str, dict]], checks: dict, report_points: float
) -> tuple[dict, list[str]]:
    """One student's row of :data:`COLUMNS`, and what keeps the grade from being computed (empty
    when it is). The report's points come out of set 3's total and into the report's part."""
    missing, awarded = [], 0.0
    tops = possible(gradebooks)
    report_set, report_q = REPORT
    report = None
    for name, rows in gradebooks.items():
        row = rows.get(student)
        if row is None:  # not handed in: 0 points (named by main)
            continue
        total = _number(row["total_awarded"], f"{student}'s total_awarded in {name}")
        if total is None:
            missing.append(f"{name}: hand marks (total_awarded is empty)")
            continue
        if name == report_set:
            report = _number(row.get(report_q, ""), f"{student}'s {report_q} in {name}")
            if report is None:
                missing.append(f"{name}: the report's mark ({report_q})")
                continue
            total -= report
        awarded += total
    sets_possible = sum(tops.values()) - report_points
    marks = {}
    for column in CHECKS:
        mark = _number(checks.get(student, {}).get(column, ""), f"{student}'s {column}")
        if mark is None:
            missing.append(f"checks.csv: {column}")
        elif not 0 <= mark <= CHECK_POINTS:
            missing.append(f"checks.csv: {column} is {mark:g}, expected 0 to {CHECK_POINTS:g}")
        marks[column] = mark
    if report_set not in {n for n, rows in gradebooks.items() if student in rows}:
        report = 0.0  # set 3 not handed in: no report either
    row = {
        "student": student,
        "sets_awarded": f"{awarded:g}",
        "sets_possible": f"{sets_possible:g}",
    }
    row["report"] = "" if report is None else f"{report:g}"
    row.update({c: "" if marks[c] is None else f"{marks[c]:g}" for c in CHECKS})
    if missing:
        row.update(dict.fromkeys(COLUMNS[len(CHECKS) + 4 :], ""))
        return row, missing
    parts = {
        "sets": awarded / sets_possible,
        "report": report / report_points,
        "checks": sum(marks[c] for c in CHECKS) / (CHECK_POINTS * len(CHECKS)),
    }
    for part, share in parts.items():
        row[f"{part}_percent"] = f"{100 * share:.1f}"
    row["course_percent"] = f"{sum(WEIGHTS[p] * s for p, s in parts.items()):.1f}"
    return row, []


def report_points(folder: Path) -> float:
    """The report question's points, from set 3's ``questions.json`` beside this script (6 as built)."""
    import json

    for base in (folder, folder.parent, Path(__file__).resolve().parent):
        found = base / REPORT[0] / "questions.json"
        if found.exists():
            for q in json.loads(found.read_text()):
                if q["name"] == REPORT[1]:
                    return float(q["points"])
    return 6.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 1)[0],
        epilog="See the module's docstring (the top of this file) for the scheme.",
    )
    ap.add_argument("folder", type=Path, help="where grade_all.py wrote the gradebooks (graded/)")
    ap.add_argument(
        "--checks", type=Path, default=None, help="the checks' marks (default: FOLDER/checks.csv)"
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="where to write (default: FOLDER/course-grades.csv)"
    )
    args = ap.parse_args(argv)
    folder = args.folder
    if not folder.is_dir():
        ap.error(f"argument folder: got {str(folder)!r}, expected the folder of the gradebooks")
    gradebooks = {}
    for name in SETS:
        path = folder / f"grades-{name}.csv"
        if not path.exists():
            ap.error(
                f"no {path}: grade set {name} first (python grade_all.py {name} ... --out {folder})"
            )
        gradebooks[name] = read_gradebook(path)
    students = sorted(set().union(*(set(rows) for rows in gradebooks.values())))
    checks_path = args.checks or folder / "checks.csv"
    if not checks_path.exists():
        with checks_path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["student", *CHECKS])
            writer.writerows([[s, "", ""] for s in students])
        print(
            f"final_grades: wrote {checks_path} with a row per student ({len(students)}): fill in "
            f"{' and '.join(CHECKS)} (0 to {CHECK_POINTS:g} each), then run again",
            file=sys.stderr,
        )
        return 1
    checks = read_checks(checks_path)
    stray = sorted(set(checks) - set(students))
    if stray:
        print(f"final_grades: {checks_path} names {stray}, who have no set graded", file=sys.stderr)
    points = report_points(folder)
    rows, status = [], 0
    for student in students:
        for name, book in gradebooks.items():
            if student not in book:
                print(
                    f"final_grades: {student}: no {name} in its gradebook, counted 0",
                    file=sys.stderr,
                )
        row, missing = course_row(student, gradebooks, checks, points)
        if missing:
            status = 1
            print(f"final_grades: {student}: no grade yet: {'; '.join(missing)}", file=sys.stderr)
        rows.append(row)
    out = args.out or folder / "course-grades.csv"
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    width = max([len(s) for s in students] + [7])
    print(f"{'student':{width}}  sets  report  checks  course (%)")
    for row in rows:
        print(
            f"{row['student']:{width}}  {row['sets_percent']:>5} {row['report_percent']:>6} "
            f"{row['checks_percent']:>7}  {row['course_percent']:>6}"
        )
    print(f"final_grades: {out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
