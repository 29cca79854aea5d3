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
  collated answers: full points for ada, half for cleo, none for ben; the report's sheet filled item by
  item (ada 1 on each of the six items, cleo 0.5, ben 0); then ``--reuse``, which writes the feedback;
* ``final_grades.py rehearsal/graded --interim`` before the checks are marked, the checks' marks
  entered in ``rehearsal/graded/checks.csv`` (ada 4 and 4, cleo 3 and 2, ben 1 and ``excused``), and
  ``final_grades.py rehearsal/graded``: the course grades.

It then checks what the default scheme gives: ada 100.0 %; ben 7.5 % (no set, no report, one check of
1 on 4 carrying the checks' 30 %); cleo strictly between; every autograded point of ada's, none of
ben's, and cleo's points on every question but one per set. Exit status 0 when all of this holds, 1
(naming what failed) otherwise. Read the files it leaves as you will read your class's: the gradebooks
(``rehearsal/graded/grades-NAME.csv``), the feedback (``rehearsal/graded/feedback/``), the collated
answers (``rehearsal/graded/by-question/``) and the course grades (``course-grades.csv``).

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


def enter_report_marks(graded: Path) -> None:
    path = graded / "report-marks-ps3_regression.csv"
    rows, columns, sep = read_csv(path)
    items = [c for c in columns if c not in ("file", "reader", "note")]
    for row in rows:
        for item in items:
            row[item] = f"{REPORT[Path(row['file']).stem]:g}"
    write_csv(path, rows, columns, sep)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", type=Path, default=HERE / "rehearsal", help="default: ./rehearsal (emptied first)"
    )
    args = parser.parse_args(argv)
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
    print(f"rehearse: {time.perf_counter() - start:.0f} s; everything is in {out}")
    if failed:
        print("rehearse: NOT as expected:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    print("rehearse: every point and grade is as expected: grading works on this machine.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
