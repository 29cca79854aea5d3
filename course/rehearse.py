"""Rehearse the term's grading before term, on a mock class of three, in a few minutes.

Run it in the kit's ``problem-sets/`` folder, once the grader is installed (README.md, step 1)::

    python rehearse.py

It writes ``rehearsal/`` (removed first if it exists) and runs there, command by command, what the
term asks of a lecturer, printing each command before it runs it:

* a mock class for each set, in ``rehearsal/setN/``: ``ada.ipynb``, the set's solution notebook (every
  autograded point; her written answers are the model answers, so ``--completion`` leaves them to you
  as copies); ``ben.ipynb``, the blank student version (no point); ``cleo.ipynb``, the solution with
  its first autograded function put back as the blank version has it (every point but that question's);
* each set graded as after its deadline, ``grade_all.py NAME rehearsal/setN --collate --completion``
  (set 3 with ``--except-question q5``), into ``rehearsal/graded/``;
* the hand marks that ``--completion`` left empty, entered as a lecturer would after reading the
  collated answers: full points for ada, half for cleo, none for ben; the report's sheet (where ben's
  blank notebook already has zeros, noted "no report", and ada's report an empty row) filled item by
  item (ada 1 on each of the six items, cleo 0.5, ben 0); then ``--reuse``, which writes the feedback;
* ``final_grades.py rehearsal/graded --interim`` before the checks are marked, the checks' marks
  entered in ``rehearsal/graded/checks.csv`` (ada 4 and 4, cleo 3 and 2, ben 1 and ``excused``), and
  ``final_grades.py rehearsal/graded``: the course grades.

It then checks what the default scheme gives: ada 100.0 %; ben 7.5 % (no set, no report, one check of
1 on 4 carrying the checks' 30 %); cleo strictly between; every autograded point of ada's, none of
ben's, and cleo's points on every question but one per set.

Then the hard cases, in ``rehearsal/hard/`` (its ``graded/`` starts as a copy of the term's), each
command's exit status and output checked:

1. **a notebook that cannot be read**: ``dan.ipynb``, half a file (an upload cut short), in set 1's
   folder: ``--reuse`` grades the others from their kept results, names dan NOT GRADED, exits 1;
2. **graded by hand**: ``--by-hand dan.ipynb`` gives him a row to fill in (exit 0); his marks entered
   (half of every question, read from the file as text), a later run without the option still grades
   him by hand (``graded/by-hand-NAME.json`` remembers) and writes his feedback with his total;
3. **a mark out of range**: 1 typed for ben's 0.5-point question: ``--reuse`` exits 1 naming it and
   leaves his total empty; corrected, exit 0;
4. **a late submission that copies a classmate**: ``late/eve.ipynb``, cleo's notebook, graded alone
   with ``--completion``: compared with the class graded before, named as alike cleo's, and her
   written answers left unmarked for you;
5. **a resubmission**: ``late/cleo.ipynb``, her notebook corrected after the deadline, graded alone:
   her row's autograded points rise to every point, her hand marks stay;
6. **a second reader**: a second reading of cleo's report (all six items 1) added to set 3's sheet:
   ``q5`` becomes the mean of the two readings, 4.5;
7. **sets not handed in**: dan and eve handed in set 1 alone. ``final_grades.py`` adds their rows to
   ``checks.csv`` and exits 1 (their checks are not marked); marked, it exits 0, their missing sets
   counted 0 and named.

``graded/hidden-checks-NAME.md`` lists every student's failed hidden checks, for you alone.
Exit status 0 when all of this holds, 1 (naming what failed) otherwise. Read the files it leaves as
you will read your class's: the gradebooks (``rehearsal/graded/grades-NAME.csv``), the feedback
(``rehearsal/graded/feedback/``), the collated answers (``rehearsal/graded/by-question/``), the course
grades (``course-grades.csv``), and the same under ``rehearsal/hard/graded/``.

It needs what grading needs (otter-grader, torch, scipy, softlin; README.md, step 1) and no network.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETS = ("ps1_measures", "ps2_concentration", "ps3_regression")
#: (ada, cleo, ben): the share of a hand-graded question's points the mock lecturer enters
HAND = {"ada": 1.0, "cleo": 0.5, "ben": 0.0}
#: the report's six items for each student (0, 0.5 or 1 each)
REPORT = {"ada": 1.0, "cleo": 0.5, "ben": 0.0}
#: the checks' marks (0 to 4, or excused)
CHECKS = {"ada": ("4", "4"), "cleo": ("3", "2"), "ben": ("1", "excused")}


def run(*args) -> int:
    """Run a kit script with this Python in the kit's folder, printing the command first (paths
    relative to the folder); its exit status."""
    shown = [os.path.relpath(a, HERE) if isinstance(a, Path) else str(a) for a in args]
    print(f"\n$ python {' '.join(shown)}", flush=True)
    return subprocess.run([sys.executable, *shown], check=False, cwd=HERE).returncode


def code_source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def mock_class(out: Path) -> dict[str, str]:
    """Write the three notebooks of each set; return the question cleo leaves blank, per set."""
    blanked = {}
    for n, name in enumerate(SETS, 1):
        folder = out / f"set{n}"
        folder.mkdir(parents=True)
        solution = HERE / name / "autograder" / f"{name}.ipynb"
        student = HERE / name / "student" / f"{name}.ipynb"
        for path in (solution, student):
            if not path.exists():
                raise SystemExit(f"rehearse: no {path}; run me in the kit's problem-sets/ folder")
        shutil.copyfile(solution, folder / "ada.ipynb")
        shutil.copyfile(student, folder / "ben.ipynb")
        nb, blank = json.loads(solution.read_text()), json.loads(student.read_text())
        stubs = [
            code_source(c)
            for c in blank["cells"]
            if c["cell_type"] == "code" and code_source(c).startswith("def ")
        ]
        first = stubs[0].split("\n", 1)[0]  # "def tilt_coefficients(x, p):"
        hits = [
            c
            for c in nb["cells"]
            if c["cell_type"] == "code" and code_source(c).split("\n", 1)[0] == first
        ]
        if len(hits) != 1:
            raise SystemExit(f"rehearse: {name}: {len(hits)} cells start with {first!r}")
        hits[0]["source"] = stubs[0]
        hits[0]["outputs"] = []
        (folder / "cleo.ipynb").write_text(json.dumps(nb, indent=1))
        following = nb["cells"][nb["cells"].index(hits[0]) + 1 :]
        check = next(code_source(c) for c in following if "grader.check(" in code_source(c))
        blanked[name] = check.split('"')[1]  # grader.check("q1") -> q1
    return blanked


def read_csv(path: Path) -> tuple[list[dict], list[str], str]:
    """The rows, columns and delimiter of a CSV that grade_all.py or final_grades.py wrote."""
    text = path.read_text()
    sep = ";" if text.split("\n", 1)[0].count(";") > text.split("\n", 1)[0].count(",") else ","
    reader = csv.DictReader(text.splitlines(), delimiter=sep)
    return list(reader), list(reader.fieldnames or []), sep


def write_csv(path: Path, rows: list[dict], columns: list[str], sep: str) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, delimiter=sep)
        writer.writeheader()
        writer.writerows(rows)


def number(text: str) -> float:
    return float(text.replace(",", "."))


def enter_hand_marks(graded: Path, name: str) -> int:
    """Fill the empty hand marks of the set's gradebook (:data:`HAND`); how many were entered."""
    questions = json.loads((HERE / name / "questions.json").read_text())
    manual = {q["name"]: q["points"] for q in questions if q["manual"] and q["name"] != "q5"}
    path = graded / f"grades-{name}.csv"
    rows, columns, sep = read_csv(path)
    entered = 0
    for row in rows:
        share = HAND[Path(row["file"]).stem]
        for q, points in manual.items():
            if not (row.get(q) or "").strip():
                row[q] = f"{share * points:g}"
                entered += 1
    write_csv(path, rows, columns, sep)
    return entered


REPORT_SHEET = "report-marks-ps3_regression.csv"


def enter_report_marks(graded: Path) -> None:
    path = graded / REPORT_SHEET
    rows, columns, sep = read_csv(path)
    items = [c for c in columns if c not in ("file", "reader", "note")]
    for row in rows:
        for item in items:
            row[item] = f"{REPORT[Path(row['file']).stem]:g}"
    write_csv(path, rows, columns, sep)


def grade(*args) -> subprocess.CompletedProcess:
    """Run a kit script like :func:`run`, its output captured, echoed, and returned for checking."""
    shown = [os.path.relpath(a, HERE) if isinstance(a, Path) else str(a) for a in args]
    print(f"\n$ python {' '.join(shown)}", flush=True)
    done = subprocess.run(
        [sys.executable, *shown], check=False, cwd=HERE, capture_output=True, text=True
    )
    print(done.stdout + done.stderr, end="", flush=True)
    return done


def row_of(gradebook: Path, student: str) -> dict:
    return next(r for r in read_csv(gradebook)[0] if Path(r["file"]).stem == student)


def set_cells(gradebook: Path, student: str, values: dict) -> None:
    """Type ``values`` into ``student``'s row of ``gradebook``, as a lecturer edits the CSV."""
    rows, columns, sep = read_csv(gradebook)
    for row in rows:
        if Path(row["file"]).stem == student:
            row.update(values)
    write_csv(gradebook, rows, columns, sep)


def hard_cases(out: Path) -> list[str]:
    """The hard cases of the module's docstring, in ``out/hard/``; what did not go as expected."""
    failed = []

    def expect(ok, what):
        print(f"rehearse: {'as expected' if ok else 'NOT as expected'}: {what}", flush=True)
        if not ok:
            failed.append(what)

    hard = out / "hard"
    graded = hard / "graded"
    shutil.copytree(out / "graded", graded)
    name = SETS[0]
    questions = json.loads((HERE / name / "questions.json").read_text())
    book = graded / f"grades-{name}.csv"
    class1 = hard / "set1"
    shutil.copytree(out / "set1", class1)
    print(f"\nrehearse: the hard cases, in {hard}")

    # 1. a notebook cut short in the upload
    text = (out / "set1" / "ada.ipynb").read_text()
    (class1 / "dan.ipynb").write_text(text[: len(text) // 2])
    done = grade("grade_all.py", name, class1, "--out", graded, "--reuse")
    expect(
        done.returncode == 1 and "dan.ipynb: NOT GRADED" in done.stderr,
        "1. a notebook cut short is named NOT GRADED, the others graded, exit status 1",
    )
    # 2. graded by hand, then remembered
    done = grade("grade_all.py", name, class1, "--out", graded, "--reuse", "--by-hand", "dan.ipynb")
    expect(
        done.returncode == 0 and "dan.ipynb: graded by hand" in done.stdout,
        "2. --by-hand gives dan a row to fill in, exit status 0",
    )
    set_cells(book, "dan", {q["name"]: f"{q['points'] / 2:g}" for q in questions})
    print(f"rehearse: dan's row filled in {book.name}: half of every question")
    done = grade("grade_all.py", name, class1, "--out", graded, "--reuse")
    total = sum(q["points"] for q in questions)
    dan = row_of(book, "dan")
    expect(
        done.returncode == 0
        and dan["total_awarded"]
        and number(dan["total_awarded"]) == total / 2
        and f"Total: {total / 2:g}" in (graded / "feedback" / name / "dan.md").read_text(),
        f"2. a later run without --by-hand grades dan by hand again: total {total / 2:g}, feedback",
    )
    # 3. a mark out of range
    half_point = next(q["name"] for q in questions if q["manual"] and q["points"] == 0.5)
    kept = row_of(book, "ben")[half_point]
    set_cells(book, "ben", {half_point: "1"})
    print(f"rehearse: 1 typed for ben's {half_point} (0.5 points)")
    done = grade("grade_all.py", name, class1, "--out", graded, "--reuse")
    expect(
        done.returncode == 1
        and "ben.ipynb: hand marks out of range" in done.stderr
        and not row_of(book, "ben")["total_awarded"],
        f"3. a mark of 1 on the 0.5 points of {half_point} is named, ben's total left empty, exit 1",
    )
    set_cells(book, "ben", {half_point: kept})
    done = grade("grade_all.py", name, class1, "--out", graded, "--reuse")
    expect(
        done.returncode == 0 and row_of(book, "ben")["total_awarded"],
        "3. corrected, ben's total is back, exit status 0",
    )
    # 4. a late notebook, cleo's copied
    late = hard / "late"
    late.mkdir()
    shutil.copyfile(out / "set1" / "cleo.ipynb", late / "eve.ipynb")
    done = grade("grade_all.py", name, late / "eve.ipynb", "--out", graded, "--completion")
    flagged = [
        line for line in done.stderr.splitlines() if line.startswith("grade_all: eve.ipynb: near")
    ]
    eve = row_of(book, "eve")
    manual = [q["name"] for q in questions if q["manual"]]
    expect(
        done.returncode == 0
        and flagged
        and "cleo.ipynb's answer" in flagged[0]
        and all(not eve[q] for q in manual),
        "4. a late eve, cleo's notebook, graded alone: named as alike cleo's, left unmarked",
    )
    set_cells(book, "eve", dict.fromkeys(manual, "0") | {"comments": "Copied: see me."})
    print("rehearse: eve's written answers marked 0 after reading them, with a comment")
    # 5. cleo's resubmission, corrected
    shutil.copyfile(out / "set1" / "ada.ipynb", late / "cleo.ipynb")
    before = row_of(book, "cleo")
    done = grade("grade_all.py", name, late / "cleo.ipynb", "--out", graded)
    cleo = row_of(book, "cleo")
    auto = [q for q in questions if not q["manual"]]
    expect(
        done.returncode == 0
        and all(number(cleo[q["name"]]) == q["points"] for q in auto)
        and all(cleo[q] == before[q] for q in manual),
        "5. cleo's corrected notebook, graded alone: every autograded point, her hand marks kept",
    )
    # 6. a second reader of cleo's report
    sheet = graded / "report-marks-ps3_regression.csv"
    rows, columns, sep = read_csv(sheet)
    second = dict.fromkeys(columns, "") | {"file": "cleo.ipynb", "reader": "second"}
    second.update({c: "1" for c in columns if c not in ("file", "reader", "note")})
    write_csv(sheet, [*rows, second], columns, sep)
    print("rehearse: a second reading of cleo's report added to the sheet (every item 1)")
    done = grade("grade_all.py", SETS[2], out / "set3", "--out", graded, "--reuse")
    q5 = row_of(graded / f"grades-{SETS[2]}.csv", "cleo")["q5"]
    expect(
        done.returncode == 0 and q5 and number(q5) == 4.5,
        f"6. cleo's report, read twice (3 and 6): q5 is their mean, 4.5 (got {q5!r})",
    )
    # 7. two students with set 1 alone
    done = grade("final_grades.py", graded)
    checks = graded / "checks.csv"
    listed = {r["student"] for r in read_csv(checks)[0]}
    expect(
        done.returncode == 1 and {"dan", "eve"} <= listed,
        "7. final_grades adds dan and eve to checks.csv and exits 1 until their checks are marked",
    )
    rows, columns, sep = read_csv(checks)
    for row in rows:
        if row["student"] in ("dan", "eve"):
            row["check1"], row["check2"] = "2", "2"
    write_csv(checks, rows, columns, sep)
    done = grade("final_grades.py", graded)
    grades = {r["student"]: r for r in read_csv(graded / "course-grades.csv")[0]}
    expect(
        done.returncode == 0
        and all(grades[s]["course_percent"] for s in ("dan", "eve"))
        and all(s in done.stderr for s in ("dan", "eve")),
        "7. checks marked: every grade in, dan's and eve's missing sets counted 0 and named",
    )
    hidden = graded / f"hidden-checks-{name}.md"
    expect(
        hidden.exists() and "## ben.ipynb" in hidden.read_text(),
        f"the failed hidden checks, for you alone, in {hidden.relative_to(out)}",
    )
    return failed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", type=Path, default=HERE / "rehearsal", help="default: ./rehearsal (emptied first)"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from grade_all import require_grading_packages

    require_grading_packages("rehearse")
    out = args.out.resolve()
    start = time.perf_counter()
    shutil.rmtree(out, ignore_errors=True)
    blanked = mock_class(out)
    graded = out / "graded"
    print(f"rehearse: a mock class of three (ada, ben, cleo) for each set, in {out}")
    failed = []
    for n, name in enumerate(SETS, 1):
        extra = ["--except-question", "q5"] if name == "ps3_regression" else []
        rc = run(
            "grade_all.py",
            name,
            out / f"set{n}",
            "--out",
            graded,
            "--collate",
            "--completion",
            *extra,
        )
        if rc:
            failed.append(f"grade_all.py {name} --collate --completion exited {rc}")
        entered = enter_hand_marks(graded, name)
        print(f"rehearse: {entered} hand marks entered in grades-{name}.csv, as after reading them")
        if name == "ps3_regression":
            rows = {Path(r["file"]).stem: r for r in read_csv(graded / REPORT_SHEET)[0]}
            ben, ada = rows.get("ben", {}), rows.get("ada", {})
            if not (
                ben.get("note", "").startswith("no report")
                and all(ben.get(i) == "0" for i in ("a", "b", "d"))
                and ada.get("a") == ""
            ):
                failed.append(
                    f"{REPORT_SHEET}: ben's blank notebook should get zeros (no report), ada's "
                    f"report an empty row to mark; got ben {ben}, ada {ada}"
                )
            enter_report_marks(graded)
            print("rehearse: the report's six items marked in report-marks-ps3_regression.csv")
        rc = run("grade_all.py", name, out / f"set{n}", "--out", graded, "--reuse")
        if rc:
            failed.append(f"grade_all.py {name} --reuse exited {rc}")
    run("final_grades.py", graded, "--interim")  # the checks are not marked yet
    if not (graded / "checks.csv").exists():
        run("final_grades.py", graded)  # writes the checks' template (and exits 1: marks missing)
    rows, columns, sep = read_csv(graded / "checks.csv")
    for row in rows:
        row["check1"], row["check2"] = CHECKS[row["student"]]
    write_csv(graded / "checks.csv", rows, columns, sep)
    print("rehearse: the checks' marks entered in checks.csv")
    rc = run("final_grades.py", graded)
    if rc:
        failed.append(f"final_grades.py exited {rc}")

    # what the default scheme gives this class
    grades = {r["student"]: r for r in read_csv(graded / "course-grades.csv")[0]}
    course = {
        s: number(grades[s]["course_percent"]) if grades[s]["course_percent"] else None
        for s in HAND
    }
    if course["ada"] != 100.0:
        failed.append(f"ada's course grade is {course['ada']}, not 100.0")
    if course["ben"] != 7.5:
        failed.append(f"ben's course grade is {course['ben']}, not 7.5")
    if not (course["ben"] or 0) < (course["cleo"] or -1) < 100.0:
        failed.append(f"cleo's course grade {course['cleo']} is not between ben's and ada's")
    for name in SETS:
        rows = {Path(r["file"]).stem: r for r in read_csv(graded / f"grades-{name}.csv")[0]}
        questions = json.loads((HERE / name / "questions.json").read_text())
        for q in (q for q in questions if not q["manual"]):
            got = {s: number(rows[s][q["name"]]) for s in HAND}
            cleo = 0.0 if q["name"] == blanked[name] else q["points"]
            want = {"ada": q["points"], "ben": 0.0, "cleo": cleo}
            if got != want:
                failed.append(f"{name} {q['name']}: points {got}, expected {want}")
    print(
        "\nrehearse: course grades (default scheme):", ", ".join(f"{s} {course[s]}" for s in HAND)
    )
    failed += hard_cases(out)
    print(f"rehearse: {time.perf_counter() - start:.0f} s; everything is in {out}")
    if failed:
        print("rehearse: NOT as expected:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    print(
        "rehearse: every point and grade is as expected, the hard cases too: grading works on "
        "this machine."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
