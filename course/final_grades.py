#!/usr/bin/env python
"""The course grade of every student, from the three sets' gradebooks and the checks' marks, by the
default grading scheme of the book's page *Problem sets and grading* (the syllabus's weights).

Shipped beside ``grade_all.py`` in the built problem sets (``make problem-sets``); it needs nothing but
Python's standard library.

    python final_grades.py graded/                       # graded/grades-ps*.csv and graded/checks.csv
    python final_grades.py graded/ --out course-grades.csv
    python final_grades.py graded/ --interim             # part-way through the term
    python final_grades.py graded/ --set3-report-only    # the lighter load: set 3 is its report
    python final_grades.py graded/ --letters A=90,B=80,C=70,D=60,F=0   # and a letter per grade

**Inputs.** ``FOLDER/grades-ps1_measures.csv``, ``grades-ps2_concentration.csv`` and
``grades-ps3_regression.csv``, the gradebooks ``grade_all.py`` writes (each set graded from its own
folder of submissions into the same ``--out`` folder, ``graded/`` by default), with their hand marks in;
and ``FOLDER/checks.csv``, the marks of the two ten-minute checks: columns ``student``, ``check1`` and
``check2``, 0 to 4 each (``written_check.py --seed SEED --set N`` writes their sheets and keys), or
``excused`` (:data:`EXCUSED`) for a check a student was excused from: the other check then carries the
checks' whole weight, and a student excused from both is graded on the sets and the report, over
their 70 % (``counted_percent``). Where
``checks.csv`` is missing it is written with a row per student and empty marks, to fill in, and the
script stops. A student is the name of their notebook without ``.ipynb``, in lower case: keep each
student's file name the same in every set (their student ID, ``12345678.ipynb``). Optionally,
``FOLDER/roster.csv`` (or ``--roster``), the class list: a ``student`` column of those IDs; every student
on it gets a row (what they did not hand in counts 0, and is named), the ``checks.csv`` template lists
them, and a notebook whose name is not on it is named on stderr.

**The scheme** (:data:`WEIGHTS`), each part on its own:

* **sets, 30 %**: the points awarded in sets 1 and 2 and in set 3's questions other than the report
  (``total_awarded``, the autograded points and the hand marks), over the points possible there (10, 12
  and 9: 31);
* **report, 40 %**: set 3's question 5 (:data:`REPORT`), 0 to 6, as marked in its gradebook column;
* **checks, 30 %**, 15 each: ``check1`` and ``check2``, each over 4.

Other weights: ``--weights 40,30,30`` (sets, report, checks, in percent, summing to 100), as the
syllabus a lecturer edits may set them.

**The lighter load** (``--set3-report-only``; the book's page *Problem sets and grading*, "A lighter
load"): set 3 handed out as its report alone. The sets' part is then sets 1 and 2 alone (22 points as
built), and set 3's gradebook gives the report's mark (question 5) and nothing else: its other
questions, autograded at 0 and never marked by hand, are not counted and need no marks.

The course grade is the sum of each part's weight times its share (points over points possible).
A set a student did not hand in counts 0 (it is named on stderr, in case the file was named
otherwise). A grade is left empty, and the student named on stderr with what is missing, when a hand
mark, the report's mark or a check's mark is not in yet, or a mark lies outside its range; the exit
status is then 1 (the parts whose marks are all in still show their percentages). It writes ``FOLDER/course-grades.csv`` (or ``--out``): one row per student with
each part's points and percentage, the weights counted (``counted_percent``, 100) and the course
grade in percent (one decimal), and prints the same table. A run that stops (a mark that is not a
number, two rows for one student) removes the earlier output file, which would no longer match the
marks, and says so.

**Letters** (``--letters A=90,B=80,C=70,D=60,F=0``): each band's lowest percentage, from the highest
down to 0; a column ``letter`` is added, empty where the grade is. No bands are built in: the
percentages that make a letter are the institution's.

**Interim grades** (``--interim``), part-way through the term, count only what is in so far; the
course grade is then over the weights counted (``counted_percent``). Left out: a set whose gradebook
is not written yet (named on stderr), a set whose hand marks a student lacks (``total_awarded``
empty), a check with no mark, and both checks where ``checks.csv`` is missing (its template is
written, to fill in as the checks are marked). Set 3 without the report's mark counts its other
questions when all their marks are in; the report counts whenever its mark is in. The sets weigh 30 % times the share of their 31 points
counted (set 1 alone: 9.7 %), their percentage being over the points counted. A set not handed in
still counts 0, and a mark out of range still leaves the grade empty, with exit status 1. It writes
``FOLDER/interim-grades.csv`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import re
import sys
from pathlib import Path

#: The sets' gradebooks, in ``grade_all.py``'s names (``grades-NAME.csv``).
SETS = ("ps1_measures", "ps2_concentration", "ps3_regression")
#: A question's column in a gradebook (q1, q2a, ...), as grade_all.py names them.
QUESTION = re.compile(r"q\d+[a-z]?")
#: The report: set 3's question 5, graded by hand, out of its 6 points.
REPORT = ("ps3_regression", "q5")
#: The checks' columns in ``checks.csv``, each out of :data:`CHECK_POINTS`.
CHECKS = ("check1", "check2")
CHECK_POINTS = 4.0
#: A check's mark in ``checks.csv`` for a student excused from it (any case): not counted, and the
#: other check carries the checks' weight.
EXCUSED = "excused"
#: Each set's points possible as built (its ``questions.json``), for a set not graded yet.
SET_POINTS = {"ps1_measures": 10.0, "ps2_concentration": 12.0, "ps3_regression": 15.0}
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
    "counted_percent",
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


def delimiter(path: Path) -> str:
    """``;`` for a CSV file whose first line has semicolons and no comma (a spreadsheet saved where the
    decimal mark is a comma), else ``,``; as grade_all.py reads it."""
    first = path.read_text().split("\n", 1)[0] if path.exists() else ""
    return ";" if ";" in first and "," not in first else ","


def _decimal(row: dict, sep: str) -> dict:
    """``row`` with a semicolon file's decimal commas (``1,5``) read as points (``1.5``), in place."""
    if sep == ";":
        for key, value in row.items():
            if isinstance(value, str) and re.fullmatch(r"-?\d+,\d+", value.strip()):
                row[key] = value.strip().replace(",", ".")
    return row


def read_gradebook(path: Path) -> dict[str, dict]:
    """The rows of a set's gradebook, by student (the file's name without ``.ipynb``); comma or
    semicolon separated (:func:`delimiter`)."""
    sep = delimiter(path)
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle, delimiter=sep)
        needed = {"file", "total_awarded", "total_possible"}
        if not reader.fieldnames or not needed <= set(reader.fieldnames):
            raise SystemExit(
                f"final_grades: {path} has the columns {reader.fieldnames}, expected a gradebook of "
                f"grade_all.py (with {sorted(needed)})"
            )
        rows = {}
        for row in reader:
            student = Path(row["file"]).stem.lower()  # Dave.ipynb and dave.ipynb: one student
            if student in rows:
                raise SystemExit(f"final_grades: {path} has two rows for {student!r}")
            rows[student] = _decimal(row, sep)
        return rows


def read_checks(path: Path) -> dict[str, dict]:
    """The checks' marks, by student; comma or semicolon separated (:func:`delimiter`)."""
    sep = delimiter(path)
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle, delimiter=sep)
        needed = ["student", *CHECKS]
        if not reader.fieldnames or not set(needed) <= set(reader.fieldnames):
            raise SystemExit(
                f"final_grades: {path} has the columns {reader.fieldnames}, expected {needed}"
            )
        rows = {}
        for row in reader:
            student = row["student"].strip().lower()  # Alice and alice: one student
            if not student:
                continue
            if student in rows:
                raise SystemExit(f"final_grades: {path} has two rows for {student!r}")
            rows[student] = _decimal(row, sep)
        return rows


def add_check_rows(path: Path, students: list[str]) -> None:
    """Append an empty row for each of ``students`` to the checks' marks ``path``, in its own
    delimiter and columns: students graded, or put on the class list, after the file was written."""
    sep = delimiter(path)
    with path.open(newline="") as handle:
        fields = next(csv.reader(handle, delimiter=sep))
    text = path.read_text()
    with path.open("a", newline="") as handle:
        if text and not text.endswith("\n"):
            handle.write("\r\n" if "\r\n" in text else "\n")
        writer = csv.DictWriter(handle, fieldnames=fields, delimiter=sep)
        writer.writerows({"student": s} for s in students)


def read_roster(path: Path) -> list[str]:
    """The class list: a CSV with a ``student`` column (others, a name or an e-mail, are ignored),
    one row per student, each the name of their notebooks without ``.ipynb`` (their student ID);
    comma or semicolon separated. Every student on it gets a row of the course grades, with what
    they lack named."""
    sep = delimiter(path)
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle, delimiter=sep)
        if not reader.fieldnames or "student" not in reader.fieldnames:
            raise SystemExit(
                f"final_grades: {path} has the columns {reader.fieldnames}, expected a 'student' "
                "column (the class list: one student ID per row)"
            )
        students: list[str] = []
        for row in reader:
            student = (row["student"] or "").strip().lower()
            if not student:
                continue
            if student in students:
                raise SystemExit(f"final_grades: {path} has two rows for {student!r}")
            students.append(student)
    if not students:
        raise SystemExit(f"final_grades: {path} lists no student")
    return students


def possible(gradebooks: dict[str, dict[str, dict]]) -> dict[str, float]:
    """The points possible per set, from its gradebook's ``total_possible`` (the same in every row)."""
    out = {}
    for name, rows in gradebooks.items():
        totals = {_number(r["total_possible"], f"{name}'s total_possible") for r in rows.values()}
        if len(totals) != 1:
            raise SystemExit(f"final_grades: {name}'s rows disagree on total_possible: {totals}")
        out[name] = totals.pop()
    return out


def parse_weights(text: str) -> dict[str, float]:
    """``--weights``: three percentages, the sets', the report's and the checks', summing to 100."""
    import argparse

    parts = text.split(",")
    try:
        values = [float(x) for x in parts]
    except ValueError:
        values = []
    if len(values) != 3 or any(v < 0 for v in values) or abs(sum(values) - 100) > 1e-9:
        raise argparse.ArgumentTypeError(
            f"got {text!r}, expected three non-negative percentages SETS,REPORT,CHECKS summing to "
            "100, e.g. 30,40,30"
        )
    return dict(zip(WEIGHTS, values))


def parse_letters(text: str) -> list[tuple[str, float]]:
    """``--letters``: the letter bands, ``LETTER=LOWEST_PERCENT`` separated by commas, from the
    highest band down, the last one at 0 so that every grade gets a letter (``A=90,B=80,C=70,D=60,
    F=0``). A grade gets the first band whose lowest percentage it reaches, compared at the one
    decimal written (:func:`letter`)."""
    import argparse

    bands: list[tuple[str, float]] = []
    for part in text.split(","):
        name, _, low = part.partition("=")
        try:
            bands.append((name.strip(), float(low)))
        except ValueError:
            bands = []
            break
    lows = [low for _, low in bands]
    if (
        not bands
        or any(not name for name, _ in bands)
        or any(a <= b for a, b in itertools.pairwise(lows))
        or lows[-1] != 0
        or lows[0] > 100
    ):
        raise argparse.ArgumentTypeError(
            f"got {text!r}, expected LETTER=LOWEST_PERCENT bands from the highest down, the "
            "percentages decreasing and the last 0, e.g. A=90,B=80,C=70,D=60,F=0"
        )
    return bands


def letter(percent: str, bands: list[tuple[str, float]]) -> str:
    """The letter of a course grade ``percent`` (the one-decimal text of ``course_percent``) by
    ``bands`` (:func:`parse_letters`); empty where the grade is."""
    if not percent:
        return ""
    return next(name for name, low in bands if float(percent) >= low)


def course_row(
    student: str,
    gradebooks: dict[str, dict[str, dict]],
    checks: dict,
    report_points: float,
    tops: dict[str, float],
    interim: bool = False,
    weights: dict[str, float] | None = None,
    report_only: bool = False,
) -> tuple[dict, list[str]]:
    """One student's row of :data:`COLUMNS`, and what keeps the grade from being computed (empty
    when it is). The report's points come out of set 3's total and into the report's part.
    ``tops`` holds every set's points possible (:func:`possible`, and :func:`set_points` for a set
    not in yet). With ``interim``, a mark not in yet leaves its part out instead (module docstring);
    only a mark out of range keeps the grade from being computed. With ``report_only`` (the lighter
    load), set 3 gives its report's mark alone and the sets' part is sets 1 and 2."""
    weights = weights or WEIGHTS
    missing, wrong = [], []
    awarded = counted = 0.0  # the sets' points awarded and possible, over the sets counted
    report_set, report_q = REPORT
    report = None  # None: not counted (not in yet)
    for name, rows in gradebooks.items():
        top = tops[name] - (report_points if name == report_set else 0.0)
        row = rows.get(student)
        if name == report_set and report_only:  # the report alone; its other questions not set
            report = (
                0.0 if row is None else _number(row.get(report_q, ""), f"{student}'s {report_q}")
            )
            if report is None:
                missing.append(f"{name}: the report's mark ({report_q})")
            elif not 0 <= report <= report_points:
                wrong.append(f"{name}: {report_q} is {report:g}, expected 0 to {report_points:g}")
                missing.append(wrong[-1])
            continue
        if row is None:  # not handed in: 0 points (named by main), and no report either
            counted += top
            if name == report_set:
                report = 0.0
            continue
        total = _number(row["total_awarded"], f"{student}'s total_awarded in {name}")
        if name == report_set and (total is not None or interim):
            report = _number(row.get(report_q, ""), f"{student}'s {report_q} in {name}")
            if report is None:
                missing.append(f"{name}: the report's mark ({report_q})")
                others = [q for q in row if QUESTION.fullmatch(q) and q != report_q]
                if interim and others and all((row[q] or "").strip() for q in others):
                    # the report not marked yet: set 3's other questions count on their own
                    awarded += sum(_number(row[q], f"{student}'s {q} in {name}") for q in others)
                    counted += top
                continue
            if total is not None:
                total -= report
        if total is None:
            missing.append(
                f"{name}: hand marks (total_awarded is empty: enter them, then run "
                f"python grade_all.py {name} FOLDER --reuse, which adds them up)"
            )
            continue
        awarded += total
        counted += top
    sets_total = sum(tops.values()) - (tops[report_set] if report_only else report_points)
    marks, excused = {}, []
    for column in CHECKS:
        text = checks.get(student, {}).get(column, "")
        if (text or "").strip().lower() == EXCUSED:
            excused.append(column)
            marks[column] = None
            continue
        try:
            mark = _number(text, f"{student}'s {column}")
        except SystemExit as exc:
            raise SystemExit(f"{exc.code} (0 to {CHECK_POINTS:g}) or {EXCUSED!r}") from None
        if mark is None:
            missing.append(f"checks.csv: {column}")
        elif not 0 <= mark <= CHECK_POINTS:
            wrong.append(f"checks.csv: {column} is {mark:g}, expected 0 to {CHECK_POINTS:g}")
            missing.append(wrong[-1])
        marks[column] = mark
    row = {
        "student": student,
        "sets_awarded": f"{awarded:g}",
        "sets_possible": f"{counted if interim else sets_total:g}",
    }
    row["report"] = "" if report is None else f"{report:g}"
    row.update({c: "" if marks[c] is None else f"{marks[c]:g}" for c in CHECKS})
    row.update(dict.fromkeys(excused, EXCUSED))
    row.update(dict.fromkeys(COLUMNS[COLUMNS.index("sets_percent") :], ""))
    missing = wrong if interim else missing
    if (
        missing
    ):  # no course grade; the parts whose marks are all in (and in range) still show theirs
        sets_in = not any(m.startswith(SETS) for m in missing)
        if sets_in and awarded is not None and sets_total:
            row["sets_percent"] = f"{100 * awarded / sets_total:.1f}"
        if report is not None and 0 <= report <= report_points:
            row["report_percent"] = f"{100 * report / report_points:.1f}"
        known = [marks[c] for c in CHECKS if marks[c] is not None]
        if (
            known
            and len(known) + len(excused) == len(CHECKS)
            and all(0 <= m <= CHECK_POINTS for m in known)
        ):
            row["checks_percent"] = f"{100 * sum(known) / (CHECK_POINTS * len(known)):.1f}"
        return row, missing
    # each part counted: (weight, share); the sets weigh by the share of their points counted, and
    # the checks, of equal weight each, as one part over the checks counted, an excused check's
    # weight carried by the other (when it is counted)
    parts = {}
    if counted:
        parts["sets"] = (weights["sets"] * (counted / sets_total), awarded / counted)
    if report is not None:
        parts["report"] = (weights["report"], report / report_points)
    marked = [marks[c] for c in CHECKS if marks[c] is not None]
    if marked:
        each = weights["checks"] / len(CHECKS)
        parts["checks"] = (
            each * (len(marked) + len(excused)),
            sum(marked) / (CHECK_POINTS * len(marked)),
        )
    for part, (_, share) in parts.items():
        row[f"{part}_percent"] = f"{100 * share:.1f}"
    weight = sum(w for w, _ in parts.values())
    if weight:
        row["counted_percent"] = f"{weight:.1f}"
        row["course_percent"] = f"{sum(w * s for w, s in parts.values()) * (100 / weight):.1f}"
    return row, []


def _built_questions(folder: Path, name: str) -> list[dict] | None:
    """Set ``name``'s questions, from its ``questions.json`` beside this script (or the folder's)."""
    import json

    for base in (folder, folder.parent, Path(__file__).resolve().parent):
        found = base / name / "questions.json"
        if found.exists():
            return json.loads(found.read_text())
    return None


def report_points(folder: Path) -> float:
    """The report question's points, from set 3's ``questions.json`` beside this script (6 as built)."""
    for q in _built_questions(folder, REPORT[0]) or []:
        if q["name"] == REPORT[1]:
            return float(q["points"])
    return 6.0


def set_points(folder: Path, name: str) -> float:
    """A set's points possible, from its ``questions.json`` beside this script (:data:`SET_POINTS`
    when there is none): for a set whose gradebook is not in yet (``--interim``)."""
    questions = _built_questions(folder, name)
    return sum(float(q["points"]) for q in questions) if questions else SET_POINTS[name]


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
        "--out",
        type=Path,
        default=None,
        help="where to write (default: FOLDER/course-grades.csv, or FOLDER/interim-grades.csv)",
    )
    ap.add_argument(
        "--interim",
        action="store_true",
        help="part-way through the term: count only the gradebooks and marks in so far",
    )
    ap.add_argument(
        "--set3-report-only",
        action="store_true",
        help="the lighter load: set 3 was handed out as its report alone (question 5); the sets' "
        "part counts sets 1 and 2, and set 3's gradebook gives the report's mark only",
    )
    ap.add_argument(
        "--weights",
        type=parse_weights,
        default=WEIGHTS,
        metavar="SETS,REPORT,CHECKS",
        help="the scheme's weights in percent, summing to 100 (default: 30,40,30, the syllabus's)",
    )
    ap.add_argument(
        "--roster",
        type=Path,
        default=None,
        help="the class list, a CSV with a 'student' column (default: FOLDER/roster.csv when "
        "there is one): every student on it gets a row, and the checks.csv template lists them",
    )
    ap.add_argument(
        "--letters",
        type=parse_letters,
        default=None,
        metavar="A=90,B=80,...,F=0",
        help="also write each course grade's letter (a column 'letter'), by these bands: each "
        "letter's lowest percentage, from the highest band down, the last 0",
    )
    args = ap.parse_args(argv)
    folder = args.folder
    if not folder.is_dir():
        ap.error(f"argument folder: got {str(folder)!r}, expected the folder of the gradebooks")
    out = args.out or folder / ("interim-grades.csv" if args.interim else "course-grades.csv")
    # an earlier output would outlive a run that stops on a bad mark, and be read as current
    stale = out.exists()
    out.unlink(missing_ok=True)
    try:
        return _grades(args, ap, folder, out)
    except SystemExit as exc:
        if stale:
            note = f"final_grades: the earlier {out} was removed: it no longer matched the marks"
            if isinstance(exc.code, str):
                raise SystemExit(f"{exc.code}\n{note}") from None
            print(note, file=sys.stderr)
        raise


def _grades(args, ap, folder: Path, out: Path) -> int:
    """The body of :func:`main`, once ``out`` (where the grades go) is known and cleared."""
    gradebooks, absent = {}, []
    for name in SETS:
        path = folder / f"grades-{name}.csv"
        if not path.exists():
            if args.interim:
                absent.append(name)
                continue
            ap.error(
                f"no {path}: grade set {name} first (python grade_all.py {name} ... --out {folder})"
            )
        gradebooks[name] = read_gradebook(path)
    if not gradebooks:
        ap.error(f"no gradebook in {folder} (grades-NAME.csv): grade a set first (grade_all.py)")
    if absent:
        print(
            f"final_grades: not counted yet, no gradebook in {folder}: {', '.join(absent)}",
            file=sys.stderr,
        )
    graded = set().union(*(set(rows) for rows in gradebooks.values()))
    roster_path = args.roster or folder / "roster.csv"
    roster = read_roster(roster_path) if args.roster or roster_path.exists() else None
    unknown = sorted(graded - set(roster or graded))
    if unknown:  # a file named otherwise than the list says, or a student missing from it
        print(
            f"final_grades: not on the class list {roster_path}: {unknown}. Their grades are "
            "computed all the same (rows below); a notebook named otherwise than its student's ID: "
            "rename it and grade its set again; a student missing from the list: add them",
            file=sys.stderr,
        )
    students = sorted(graded | set(roster or ()))
    checks_path = args.checks or folder / "checks.csv"
    if not checks_path.exists():
        with checks_path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["student", *CHECKS])
            writer.writerows([[s, "", ""] for s in students])
        print(
            f"final_grades: wrote {checks_path} with a row per student ({len(students)}): fill in "
            f"{' and '.join(CHECKS)} (0 to {CHECK_POINTS:g} each, or {EXCUSED})"
            + (": the checks are not counted yet" if args.interim else ", then run again"),
            file=sys.stderr,
        )
        if not args.interim:
            return 1
    checks = read_checks(checks_path)
    newcomers = [s for s in students if s not in checks]
    if newcomers:  # put on the class list, or graded, after checks.csv was written
        add_check_rows(checks_path, newcomers)
        checks = read_checks(checks_path)
        print(
            f"final_grades: {checks_path} had no row for {newcomers}: added, empty, for their "
            "marks",
            file=sys.stderr,
        )
    stray = sorted(set(checks) - set(students))
    if stray:  # sat a check but handed in nothing: still graded (their sets count 0)
        print(
            f"final_grades: {checks_path} names {stray}, who have no set graded: their sets and "
            "report count 0",
            file=sys.stderr,
        )
        students = sorted({*students, *stray})
    points = report_points(folder)
    tops = possible(gradebooks) | {name: set_points(folder, name) for name in absent}
    rows, status = [], 0
    for student in students:
        for name, book in gradebooks.items():
            if student not in book:
                print(
                    f"final_grades: {student}: no {name} in its gradebook, counted 0",
                    file=sys.stderr,
                )
        row, missing = course_row(
            student,
            gradebooks,
            checks,
            points,
            tops,
            args.interim,
            args.weights,
            args.set3_report_only,
        )
        if missing:
            status = 1
            print(f"final_grades: {student}: no grade yet: {'; '.join(missing)}", file=sys.stderr)
        elif all(row[c] == EXCUSED for c in CHECKS):  # allowed, but never silent
            print(
                f"final_grades: {student}: excused from every check, so graded on the other parts "
                f"alone ({row['counted_percent']} % of the scheme, its counted_percent): give a "
                "make-up check if your rules ask for one",
                file=sys.stderr,
            )
        elif args.interim and not row["course_percent"]:  # a late student, say: named, not silent
            print(
                f"final_grades: {student}: nothing counted yet (no set with all its hand marks in, "
                "no report mark, no check mark)",
                file=sys.stderr,
            )
        elif float(row["course_percent"]) == 0:  # blank sets, say: right, but never silent
            print(
                f"final_grades: {student}: 0 on every part counted"
                + (" so far" if args.interim else "")
                + ": check that their work was handed in, and graded from the right files",
                file=sys.stderr,
            )
        rows.append(row)
    if args.letters:
        for row in rows:
            row["letter"] = letter(row["course_percent"], args.letters)
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(
            handle, fieldnames=[*COLUMNS, *(["letter"] if args.letters else [])]
        )
        writer.writeheader()
        writer.writerows(rows)
    width = max([len(s) for s in students] + [7])
    if args.interim:
        print(f"{'student':{width}}  sets  report  checks  counted  interim (%)")
    else:
        print(f"{'student':{width}}  sets  report  checks  course (%)")
    for row in rows:
        counted = f"  {row['counted_percent']:>7}" if args.interim else ""
        print(
            f"{row['student']:{width}}  {row['sets_percent']:>5} {row['report_percent']:>6} "
            f"{row['checks_percent']:>7}{counted}  {row['course_percent']:>6}"
            + (f"  {row['letter']}" if args.letters else "")
        )
    print(f"final_grades: {out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
