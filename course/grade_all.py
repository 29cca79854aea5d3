#!/usr/bin/env python
"""Grade a folder of submissions of one problem set with otter, and write a gradebook and feedback that
students may see (points, the failed public checks' messages, and only how many hidden checks failed).

Shipped beside the built problem sets (``_build/problem-sets/grade_all.py``, by ``make problem-sets``),
so that it runs without the book's repository: run it with the Python where otter-grader 7.0.0 and the
softlin wheel of the same folder are installed (its README.md says how).

    python grade_all.py ps1_measures submissions/          # every submissions/*.ipynb
    python grade_all.py ps1_measures a.ipynb b.ipynb --out graded
    python grade_all.py ps1_measures submissions/ --collate  # also each hand-graded question's answers
    python grade_all.py ps1_measures submissions/ --reuse    # feedback again, with the hand marks
    python grade_all.py ps1_measures submissions/ --completion  # hand marks for completion, to read over
    python grade_all.py ps3_regression subs/ --completion --except-question q5  # the report by its rubric

For each submission FILE.ipynb it runs ``otter run -a NAME/autograder/autograder.zip`` into
``OUT/results/NAME/FILE/`` (keep those: their text quotes the hidden tests). A submission otter cannot grade
(no results: an empty notebook, another set's), or one that runs past ``--timeout`` seconds (a loop that
never ends), is named and left out, the others are graded, and the exit status is then 1. So is it when
a hand mark in the gradebook lies outside its range (:func:`mark_problems`: 1 typed for a question of
0.5 points): that row gets no total and its feedback no hand mark until the mark is corrected. Then it writes

* ``OUT/grades-NAME.csv``: the gradebook, one row per submission, with the columns of
  ``tools/problem_sets.py --grade --csv`` (:func:`write_gradebook`, which that script imports from
  here): ``file``; one per question, in the set's order: the points the autograder awarded, or empty
  for a question graded by hand, for the grader to fill in from the set's rubric.md; then
  ``auto_awarded``, ``auto_possible``, ``manual_awarded`` (the sum of the hand marks, once all are in:
  :func:`add_up`), ``manual_possible``, ``total_awarded`` and ``total_possible``; last ``comments``,
  empty, for the grader's words to the student, which the feedback quotes. The questions, their points
  and which are graded by hand come from ``NAME/questions.json``, written by the build. A gradebook
  already there is merged, not overwritten (:func:`merge_gradebook`): other files' rows stay, and a
  regraded file keeps the hand marks and comments filled in;
* ``OUT/feedback/NAME/FILE.md``, to return to the student: per question, the points; the messages of its
  failed public checks (the sentence the set wrote for each, never the test's code), which the student
  could already read by running ``grader.check`` in the notebook; the errors the student's code raised
  in its checks (:func:`raised`: "NameError: name 'f' is not defined" when a cell stopped before
  defining ``f``); and how many of its hidden checks failed, nothing more: a hidden check's message states its inputs and expected values (e.g. "C is about
  3.81 for ..."), which would let a student pass it without solving the question (:func:`feedback`);
  and the hand marks and comments the gradebook already holds for that file. ``--reuse`` rewrites the feedback from
  the kept results, without running otter again, once the hand marks are in;
* for set 3, ``OUT/report-marks-ps3_regression.csv``, the report's marking sheet (:func:`report_sheet`):
  a row per reading, the six items of its rubric in columns ``a``, ``b``, ``c1``, ``c2``, ``c3`` and
  ``d`` (0, 0.5 or 1 each), a second reader's reading in a row of its own, a notebook with no report
  a row of zeros (:data:`NO_REPORT`). Once a reading's six items
  are in, the report's column (``q5``) is their sum, or the readings' mean, replacing what it held
  (:func:`report_marks`); the feedback quotes the items, and a report read once at a band's edge is
  named for a second reading;
* ``OUT/hidden-checks-NAME.md``, for the grader alone (:func:`write_hidden_checks`): every notebook
  graded so far with the messages of its failed hidden checks; never return it;
* with ``--by-hand FILE``, ``OUT/by-hand-NAME.json`` (:func:`by_hand_record`): the files graded by
  hand, which later runs grade by hand without the option;
* with ``--collate``, ``OUT/by-question/NAME-qN.md`` for each question graded by hand: the
  question's model answer and rubric from the set's rubric.md (folded), then every
  submission's answer to it, one after the other (:func:`write_collated`), its code's outputs from a
  rerun of the notebook (:func:`rerun`; ``--no-rerun`` keeps the saved ones), with a flag where a
  cell raises on rerun or does not reproduce its saved output (:func:`rerun_notes`).

With ``--collate`` or ``--completion`` it also names near-copies (:func:`near_copies`): a written
answer at least :data:`ALIKE` alike the model answer of the set's rubric.md (the solutions are
public), or another student's, and one pasting :data:`PARTLY` of the model answer's sentences
(:func:`pasted`); and the code a student wrote for an autograded question that is
:data:`CODE_SOLUTION_ALIKE` alike the solution's code or :data:`ALIKE` alike another student's, from :data:`CODE_MIN_TOKENS` tokens of the
student's own on (:func:`code_copies`: the template handed out, comments and layout left out;
not against the solution on a question whose prompt prescribes the code, ``prescribed`` in
questions.json).
They are named on stderr and in the collated files, and ``--completion`` leaves a written answer
holding the model answer, whole or in part, or another student's, unmarked, for the grader to read;
a code flag changes no autograded point. The marks a
``--completion`` run enters reach the feedback with ``--reuse``, once read; marks already in the
gradebook stay in it.

Public and hidden are told apart by otter's own results (``results.json``): its "Public Tests" entry
summarises the public test cases only (otter's ``summary(public_only=True)``: the checks in the student
notebook), while each question's entry, which carries the points, lists every case, public and hidden,
under the same case names (``q2 - 3``). A failed case of a question's entry is public when the "Public
Tests" entry lists it as failed too, and its message is taken from there; every other failed case is
hidden and only counted. Without a "Public Tests" entry every failure counts as hidden.

The messages of every check, hidden ones included, are for the grader: otter's ``results.json`` (kept in
``OUT/results/``) and ``tools/problem_sets.py``'s rubric.md show them.
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MESSAGE = re.compile(r"^\s*(\w+) - (\d+) message: (.*)$")
RESULT = re.compile(r"^\s*(\w+) - (\d+) result:\s*$")


#: What grading imports (module: the package that provides it), README.md's step 1 installs them all.
GRADING_PACKAGES = {
    "otter": "otter-grader==7.0.0",
    "ipykernel": "ipykernel",
    "torch": "torch",
    "scipy": "scipy",
    "softlin": "the softlin wheel beside this script",
}


def require_grading_packages(prog: str) -> None:
    """Stop with a message naming what this Python lacks of :data:`GRADING_PACKAGES` (before any
    submission is run, instead of every one failing alike), and how to install it."""
    import importlib.util

    missing = [
        f"{m} ({p})" for m, p in GRADING_PACKAGES.items() if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise SystemExit(
            f"{prog}: this Python ({sys.executable}) cannot import {', '.join(missing)}; grading "
            "needs them all. Install them into it as README.md, step 1, says (torch from its CPU "
            "index first, then: pip install otter-grader==7.0.0 ipykernel torch scipy "
            "./softlin-*.whl), or run this script with the Python where they are installed."
        )


class NotGraded(Exception):
    """otter left no results for a submission (not a notebook of this set, or an empty one)."""


#: Seconds a submission may take to grade before it is left out (``--timeout``): the sets' solutions
#: grade in about a minute on two CPU cores.
TIMEOUT = 900.0


def run_otter(autograder: Path, submission: Path, results: Path, timeout: float = TIMEOUT) -> dict:
    """otter's results.json for ``submission``, graded by ``autograder`` into ``results``, in at most
    ``timeout`` seconds.

    Raises
    ------
    NotGraded, with the end of otter's error output, when otter leaves no results.json, or when it
    runs past ``timeout`` seconds (otter is then stopped)."""
    if not timeout > 0:
        raise ValueError(f"timeout: got {timeout!r} seconds, expected a positive number")
    results.mkdir(parents=True, exist_ok=True)
    try:
        done = _otter(autograder, submission, results, timeout)
    except subprocess.TimeoutExpired:
        raise NotGraded(
            f"otter ran past the timeout of {timeout:g} s and was stopped (a cell that never ends? "
            "grade it alone with a larger --timeout)"
        ) from None
    found = results / "results.json"
    if not found.exists():
        last = [line for line in done.stderr.strip().splitlines() if line.strip()][-1:]
        hint = ""
        if last and "for assignment 'None'" in last[0]:  # no otter metadata: not a set's notebook
            hint = (
                "; this notebook carries no set's name: a solution sheet, or a notebook not "
                "started from the student version, which the grader cannot match to a set"
            )
        raise NotGraded(
            f"otter run left no results.json (exit {done.returncode}"
            + (f"; it said: {last[0].strip()[:300]}" if last else "")
            + hint
            + ")"
        )
    return json.loads(found.read_text())


def _otter(autograder: Path, submission: Path, results: Path, timeout: float):
    return subprocess.run(
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
        timeout=timeout,
        check=False,  # a notebook that fails to run still gets results.json, read by run_otter
    )


#: The entry of otter's results that summarises the public test cases only (``visibility: visible``).
PUBLIC = "Public Tests"


def _cases(output: str) -> dict[str, tuple[str, bool, str | None]]:
    """The test cases an otter summary (a ``results.json`` entry's ``output``) lists: ``{case name
    ("q2 - 3"): (question, failed, message)}``, the message being the case's failure message (or
    success message) as otter printed it, or None. A summary that says "All test cases passed!" lists
    no case. Only the summary's own lines are read: its "message" and "result" lines, and the line
    after each "result" line (passed or failed); the tests' code and tracebacks are not kept."""
    cases, lines = {}, output.splitlines()
    messages: dict[str, str] = {}
    for k, line in enumerate(lines):
        m = MESSAGE.match(line)
        if m:
            text = [m[3].strip()]
            for more in lines[k + 1 :]:  # a message of several lines runs to the next blank line
                if not more.strip() or MESSAGE.match(more) or RESULT.match(more):
                    break
                text.append(more.strip())
            messages[f"{m[1]} - {m[2]}"] = " ".join(text)
            continue
        r = RESULT.match(line)
        if r:
            case = f"{r[1]} - {r[2]}"
            after = next((x for x in lines[k + 1 :] if x.strip()), "")
            cases[case] = (r[1], "failed" in after, messages.get(case))
    return cases


def feedback(
    results: dict,
) -> tuple[dict[str, tuple[float, float]], dict[str, list[str | None]], dict[str, int]]:
    """What a student may see of otter's ``results`` (its results.json): ``({question: (points,
    possible)}, {question: messages of its failed public checks}, {question: how many of its hidden
    checks failed})``. A failed public check without a message gives None in its list.

    The questions' entries (those with a ``max_score``) carry the points and list every test case; the
    "Public Tests" entry (:data:`PUBLIC`) lists the public ones only, under the same names. A failed case
    is public when the "Public Tests" entry lists it as failed, and its message is taken from that entry
    alone; any other failed case is hidden, and only counted (its message states the hidden inputs and
    expected values). Without a "Public Tests" entry, every failed case counts as hidden."""
    points, public_failed, hidden = _split(results)
    return points, public_failed, {q: len(messages) for q, messages in hidden.items()}


def hidden_failures(results: dict) -> dict[str, list[str | None]]:
    """For the grader only: ``{question: the messages of its failed hidden checks}`` in otter's
    ``results``, as otter printed them (None for a check without a message). A hidden check's message
    states its inputs and expected values, so it never reaches a student (:func:`feedback` counts
    them); ``OUT/hidden-checks-NAME.md`` gathers them (:func:`write_hidden_checks`)."""
    return _split(results)[2]


def _split(results: dict):
    """The points, the failed public checks' messages and the failed hidden checks' messages of
    otter's ``results``, per question (:func:`feedback` says how they are told apart)."""
    tests = results.get("tests", [])
    public = next((t for t in tests if t.get("name") == PUBLIC), None)
    public_cases = _cases(public.get("output", "")) if public else {}
    points, public_failed, hidden = {}, {}, {}
    for test in tests:
        if test.get("max_score") is None:  # "Public Tests" and otter's notices: no points
            continue
        q = test["name"]
        points[q] = (float(test.get("score") or 0.0), float(test["max_score"]))
        for case, (_, failed, message) in _cases(test.get("output", "")).items():
            if not failed:
                continue
            seen = public_cases.get(case)
            if seen is not None and seen[1]:
                public_failed.setdefault(q, []).append(seen[2])
            else:
                hidden.setdefault(q, []).append(message)
    return points, public_failed, hidden


#: The line that ends the traceback of an error raised in a check: ``NameError: name 'f' is not
#: defined``. AssertionError is a check that failed, not an error of the student's code.
ERROR = re.compile(r"^\s*((?!AssertionError\b)[A-Za-z_][\w.]*(?:Error|Exception)):\s?(.*)$")


def _errors(output: str) -> dict[str, str]:
    """``{case name: its error line}`` for the cases of an otter summary whose code raised an error
    (other than an AssertionError): the last line of the traceback that follows "Exception raised:"."""
    errors, case, inside = {}, None, False
    for line in output.splitlines():
        r = RESULT.match(line)
        if r:
            case, inside = f"{r[1]} - {r[2]}", False
            continue
        if "Exception raised:" in line:
            inside = True
            continue
        m = ERROR.match(line) if inside and case else None
        if m:
            errors.setdefault(case, f"{m[1]}: {m[2]}".strip().rstrip(":"))
            inside = False
    return errors


def raised(results: dict) -> dict[str, list[str]]:
    """The errors a student's code raised in a question's checks, ``{question: [line, ...]}``, each line
    once, in otter's order. A public check's error is given whole (the student sees it by running
    ``grader.check``); a hidden check's by its type alone, except a NameError, whose message names only
    what the student was to define (so no hidden input or expected value is shown)."""
    tests = results.get("tests", [])
    public = next((t for t in tests if t.get("name") == PUBLIC), None)
    public_errors = _errors(public.get("output", "")) if public else {}
    found: dict[str, list[str]] = {}
    for test in tests:
        if test.get("max_score") is None:
            continue
        for case, error in _errors(test.get("output", "")).items():
            kind, shown = error.split(":", 1)[0], error
            if case not in public_errors and kind != "NameError":
                if any(seen.split(":", 1)[0] == kind for seen in found.get(test["name"], [])):
                    continue  # a public check already shows this error whole
                shown = f"{kind} (in a hidden check)"
            if shown not in found.setdefault(test["name"], []):
                found[test["name"]].append(shown)
    return {q: lines for q, lines in found.items() if lines}


#: Each set's questions, in its order, with their points and whether they are graded by hand: written
#: beside the set's rubric.md by ``tools/problem_sets.py`` (``[{"name", "points", "manual"}, ...]``).
QUESTIONS = "questions.json"
#: The gradebook's columns after ``file`` and the questions' (``tools/problem_sets.py`` writes the same).
TOTALS = (
    "auto_awarded",
    "auto_possible",
    "manual_awarded",
    "manual_possible",
    "total_awarded",
    "total_possible",
)
#: The gradebook's last column: the grader's words to the student, quoted in the feedback.
COMMENTS = "comments"


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


def _points(most: float) -> str:
    """``"1 point"``, ``"0.5 points"``: the unit of an amount of points, after the amount."""
    return f"{most:g} point" if most == 1 else f"{most:g} points"


def gradebook_header(questions: list[dict]) -> list[str]:
    """The gradebook's columns: ``file``, one per question (in the set's order), then :data:`TOTALS`,
    then :data:`COMMENTS`."""
    return ["file", *(q["name"] for q in questions), *TOTALS, COMMENTS]


def gradebook_row(file: str, questions: list[dict], awarded: dict[str, float]) -> list[str]:
    """One submission's row of the gradebook (:func:`gradebook_header`'s columns). ``awarded``: the
    points the autograder awarded, by question (an autograded question missing from it, one otter
    could not run, gets 0). Every column holds points awarded unless its name ends in ``_possible``; a
    question graded by hand, ``manual_awarded`` and ``total_awarded`` are left empty for the grader
    (:func:`add_up` fills the last two once the hand marks are in)."""
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
        "",
        f"{possible + by_hand:g}",
        "",
    ]


def write_gradebook(path: Path, questions: list[dict], rows: list[tuple[str, dict]]) -> None:
    """Write the CSV gradebook ``path``: :func:`gradebook_header`, then one :func:`gradebook_row` per
    ``(file, awarded)`` of ``rows``."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(gradebook_header(questions))
        for file, awarded in rows:
            writer.writerow(gradebook_row(file, questions, awarded))


def delimiter(path: Path) -> str:
    """The field separator of the CSV file ``path``: ``;`` where its first line has semicolons and no
    comma (a spreadsheet saved in a locale whose decimal mark is a comma, as Excel does in much of
    Europe), else ``,``. The file is read and written back with it, and a semicolon file's marks
    with their decimal comma (``1,5``: :func:`_decimal`)."""
    first = path.read_text().split("\n", 1)[0] if path.exists() else ""
    return ";" if ";" in first and "," not in first else ","


def _decimal(row: dict, sep: str, to: str) -> dict:
    """``row`` with its decimal numbers written with ``to`` (``.`` or ``,``) as their decimal mark,
    in a semicolon-separated file (``sep``; :func:`delimiter`) only, whose spreadsheet writes
    ``1,5``; in place. Returns ``row``."""
    if sep == ";":
        other = "," if to == "." else "."
        for key, value in row.items():
            if isinstance(value, str) and re.fullmatch(rf"-?\d+\{other}\d+", value.strip()):
                row[key] = value.strip().replace(other, to)
    return row


def marks_in(path: Path, questions: list[dict]) -> dict[str, dict[str, str]]:
    """The hand marks the gradebook ``path`` holds now, ``{file: {question: mark}}`` (non-empty ones
    only; ``{}`` where there is no gradebook yet)."""
    if not path.exists():
        return {}
    sep = delimiter(path)
    manual = [q["name"] for q in questions if q["manual"]]
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter=sep))
    return {
        r["file"]: {q: r[q].strip() for q in manual if (r.get(q) or "").strip()}
        for r in rows
        if r.get("file")
    }


def merge_gradebook(
    path: Path,
    questions: list[dict],
    rows: list[tuple[str, dict]],
    prefill: dict[str, dict[str, str]] | None = None,
    entered: dict[str, dict[str, str]] | None = None,
    hand: list[str] | tuple[str, ...] = (),
) -> list[dict]:
    """Write ``rows`` into the gradebook ``path``, keeping what it already holds: the rows of the files
    not graded now stay as they are (a gradebook saved with semicolons, :func:`delimiter`, is read
    and written back so), and a regraded file keeps the hand marks filled in (its columns of
    questions graded by hand, ``manual_awarded`` and ``comments``), while its autograded columns are rewritten; new
    files are appended. A gradebook whose columns are not this set's is left alone (SystemExit).
    ``prefill`` (``--completion``, :func:`completion_marks`): per file, hand marks to enter where its
    cell is still empty; a mark already there is never replaced. ``entered`` (the report's sheet,
    :func:`report_marks`): per file, hand marks that replace what the gradebook holds. ``hand``
    (``--by-hand``): files otter does not run, whose row is the grader's, every question's column
    included: kept as typed (a new one gets a row with every mark empty), its ``auto_awarded`` the sum
    of its autograded columns once each holds a mark in range (:func:`hand_auto`). Returns the
    gradebook's rows, as dicts of its columns."""
    header = gradebook_header(questions)
    kept: dict[str, dict] = {}
    sep = delimiter(path)
    if path.exists():
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle, delimiter=sep)
            if reader.fieldnames != header:
                raise SystemExit(
                    f"grade_all: {path} has the columns {reader.fieldnames}, not this set's "
                    f"{header}; move it aside (it is not overwritten)"
                )
            kept = {row["file"]: _decimal(row, sep, ".") for row in reader}
    by_hand = [q["name"] for q in questions if q["manual"]] + ["manual_awarded", COMMENTS]
    for file, awarded in rows:
        row = dict(zip(header, gradebook_row(file, questions, awarded)))
        old = kept.get(file, {})
        row.update({c: old[c] for c in by_hand if old.get(c, "").strip()})
        for q, mark in (prefill or {}).get(file, {}).items():
            if not row[q].strip() and not row["manual_awarded"].strip():
                row[q] = mark
        kept[file] = row
    for file in hand:
        if file not in kept:
            row = dict(zip(header, gradebook_row(file, questions, {})))
            row.update({q["name"]: "" for q in questions})
            kept[file] = row
        kept[file]["auto_awarded"] = hand_auto(kept[file], questions)
    for file, marks in (entered or {}).items():
        if file in kept:
            if any(not m.strip() for m in marks.values()):  # a mark withdrawn: its sum goes too
                kept[file]["manual_awarded"] = ""
            kept[file].update(marks)
    for row in kept.values():
        add_up(row, questions)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, delimiter=sep)
        writer.writeheader()
        writer.writerows(_decimal(dict(row), sep, ",") for row in kept.values())
    return list(kept.values())


def mark_problems(row: dict, questions: list[dict]) -> list[str]:
    """The hand marks of a gradebook row that lie outside their range: each question's mark must lie
    between 0 and its points, and ``manual_awarded``, when the grader typed it, between 0 and
    ``manual_possible``. One line per mark out of range ("q1b = 1, expected 0 to 0.5") or that is not
    a number ("q1b = '0,5', expected a number from 0 to 0.5, with a decimal point"): the row then gets
    no total and its feedback no hand mark (:func:`add_up`), as for a mark out of range."""
    problems = []
    limits = [(q["name"], float(q["points"])) for q in questions if q["manual"]]
    limits.append(("manual_awarded", sum(p for _, p in limits)))
    for name, most in limits:
        typed = row.get(name, "").strip()
        try:
            bad = typed and not 0 <= float(typed) <= most
        except ValueError:
            problems.append(
                f"{name} = {typed!r}, expected a number from 0 to {most:g}, with a decimal point"
            )
            continue
        if bad:
            problems.append(f"{name} = {typed}, expected 0 to {most:g}")
    return problems


def hand_auto(row: dict, questions: list[dict]) -> str:
    """A ``--by-hand`` row's ``auto_awarded``: the sum of its autograded questions' columns, typed by
    the grader, once each holds a number from 0 to the question's points; else empty (no total yet)."""
    total = 0.0
    for q in questions:
        if q["manual"]:
            continue
        try:
            mark = float(row.get(q["name"], "").strip())
        except ValueError:
            return ""
        if not 0 <= mark <= float(q["points"]):
            return ""
        total += mark
    return f"{total:g}"


def hand_problems(row: dict, questions: list[dict]) -> list[str]:
    """A ``--by-hand`` row's autograded columns that are missing, not numbers or out of range, one
    line each, as :func:`mark_problems` says them."""
    problems = []
    for q in questions:
        if q["manual"]:
            continue
        typed, most = row.get(q["name"], "").strip(), float(q["points"])
        try:
            bad = not typed or not 0 <= float(typed) <= most
        except ValueError:
            bad = True
        if bad:
            problems.append(f"{q['name']} = {typed or 'empty'}, expected 0 to {most:g}")
    return problems


def add_up(row: dict, questions: list[dict]) -> dict:
    """Fill a gradebook row's sums, in place: ``manual_awarded`` is the sum of the hand marks once every
    question graded by hand has one (a number); otherwise it keeps what the grader typed (a grade for
    completion, say), or stays empty. ``total_awarded`` is ``auto_awarded`` plus ``manual_awarded``
    when both are known. A row with a mark out of range (:func:`mark_problems`) gets no sum it would
    feed: ``total_awarded`` stays empty, and so does ``manual_awarded`` unless the grader typed it (with
    every question's mark in, it was their sum, and is emptied).
    Returns ``row``."""
    marks = [row.get(q["name"], "").strip() for q in questions if q["manual"]]
    if mark_problems(row, questions):
        row["total_awarded"] = ""
        if marks and all(marks):  # the sum of these marks, from an earlier run: no longer theirs
            row["manual_awarded"] = ""
        return row
    try:
        if marks and all(marks):
            row["manual_awarded"] = f"{sum(float(m) for m in marks):g}"
        auto, manual = row["auto_awarded"].strip(), row.get("manual_awarded", "").strip()
        # a --by-hand row whose autograded marks are not all in has no auto_awarded yet
        row["total_awarded"] = f"{float(auto) + float(manual):g}" if auto and manual else ""
    except ValueError as exc:
        raise SystemExit(f"grade_all: {row['file']}: a mark is not a number ({exc})") from None
    return row


#: The report (set 3's question 5, book/grading.md) and the six items of its rubric, (a), (b), (c)'s
#: three and (d), each marked 0, 0.5 or 1 (:data:`ITEM_MARKS`) by each reader in its sheet.
REPORT = ("ps3_regression", "q5")
REPORT_ITEMS = ("a", "b", "c1", "c2", "c3", "d")
ITEM_MARKS = (0.0, 0.5, 1.0)
#: The report sheet's columns: the file, who read it (1, 2, or a name), the items, a note (the
#: graders' own, never copied into feedback: the report talk's record, as oral-checks.md says).
SHEET = ("file", "reader", *REPORT_ITEMS, "note")
#: The bands' lower edges (A, B, C): a report at one, or half a point below it, changes band with a
#: half point either way, and gets a second reading (:func:`report_marks`).
BAND_EDGES = (5.5, 4.0, 2.5)


#: The note of a report sheet's row filled with zeros for a notebook with no report in it.
NO_REPORT = "no report in the notebook: 0 entered (replace the zeros if it came another way)"


def report_sheet(
    out: Path, name: str, files: list[str], no_report: set[str] | frozenset[str] = frozenset()
) -> list[dict]:
    """``out/report-marks-NAME.csv``, the report's marking sheet (:data:`SHEET`): a row per reading,
    each item of the rubric in its own column. A file graded now without a row gets one (reader 1,
    items empty; for a file of ``no_report``, whose notebook holds no report, every item 0, with the
    note :data:`NO_REPORT`); the rows already there, a second reader's included, are kept as they
    are. Returns its rows."""
    path = out / f"report-marks-{name}.csv"
    rows: list[dict] = []
    sep = delimiter(path)
    if path.exists():
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle, delimiter=sep)
            if reader.fieldnames != list(SHEET):
                raise SystemExit(
                    f"grade_all: {path} has the columns {reader.fieldnames}, expected {list(SHEET)}; "
                    "move it aside (it is not overwritten)"
                )
            rows = [_decimal(row, sep, ".") for row in reader]
    have = {row["file"] for row in rows}
    for f in files:
        if f not in have:
            row = dict.fromkeys(SHEET, "") | {"file": f, "reader": "1"}
            if f in no_report:
                row |= dict.fromkeys(REPORT_ITEMS, "0") | {"note": NO_REPORT}
            rows.append(row)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=SHEET, delimiter=sep)
        writer.writeheader()
        writer.writerows(_decimal(dict(row), sep, ",") for row in rows)
    return rows


def report_marks(rows: list[dict]) -> tuple[dict[str, str], dict[str, str], list[str], list[str]]:
    """The report's mark per file from its sheet's ``rows`` (:func:`report_sheet`): the sum of a
    reading's six items, or the mean of the readings' sums where two readers (or more) marked it.
    Returns ``(marks, items, problems, second)``: ``{file: "4.5"}``; ``{file: "a 1, b 0.5, ..."}``,
    the items as the feedback quotes them (each reading's, separated by " / "); one line per reading
    that is not counted (an item missing, or other than 0, 0.5 or 1, or one reader twice), naming
    the file, the reader and what is wrong; and the files read once whose points lie at a band's
    edge or half a point below it (:data:`BAND_EDGES`), for a second reading. A reading with no item
    marked is not begun, and neither counted nor named."""
    readings: dict[str, list[tuple[str, list[float]]]] = {}
    problems = []
    for row in rows:
        file, reader = row["file"].strip(), row["reader"].strip() or "1"
        typed = [(row.get(item) or "").strip() for item in REPORT_ITEMS]
        if not any(typed):
            continue
        try:
            values = [float(t) for t in typed]
        except ValueError:
            values = []
        if len(values) != len(REPORT_ITEMS) or any(v not in ITEM_MARKS for v in values):
            got = ", ".join(f"{i} {t or '(empty)'}" for i, t in zip(REPORT_ITEMS, typed))
            problems.append(
                f"{file}, reader {reader}: got {got}; expected each of the six items 0, 0.5 or 1"
            )
            continue
        if any(r == reader for r, _ in readings.get(file, [])):
            problems.append(f"{file}: reader {reader} has two rows; keep one")
            continue
        readings.setdefault(file, []).append((reader, values))
    marks, items, second = {}, {}, []
    for file, read in readings.items():
        sums = [sum(v) for _, v in read]
        marks[file] = f"{sum(sums) / len(sums):g}"
        items[file] = " / ".join(
            ", ".join(f"{i} {v:g}" for i, v in zip(REPORT_ITEMS, values)) for _, values in read
        )
        if len(read) == 1 and any(edge - 0.5 <= sums[0] <= edge for edge in BAND_EDGES):
            second.append(file)
    return marks, items, problems, second


def report_entries(rows: list[dict], marks: dict[str, str]) -> dict[str, dict[str, str]]:
    """The report's marks to enter in the gradebook (``merge_gradebook``'s ``entered``): each counted
    mark of :func:`report_marks`, and an empty q5 for a file whose readings were begun but none could
    be counted (an item out of range, say), so that a mark entered before does not stay in silently:
    its total waits, and ``final_grades.py`` names the mark as missing."""
    begun = {r["file"].strip() for r in rows if any((r.get(i) or "").strip() for i in REPORT_ITEMS)}
    entries = {f: {REPORT[1]: m} for f, m in marks.items()}
    entries.update({f: {REPORT[1]: ""} for f in sorted(begun - set(marks))})
    return entries


#: The marker lines otter leaves around a question graded by hand in a student notebook.
BEGIN, END = "<!-- BEGIN QUESTION -->", "<!-- END QUESTION -->"
HEADING = re.compile(r"\*\*Question (\d+[a-z]?)\b")


def template_cells(nb: dict) -> dict[str, set[str]]:
    """The cells of the blank set that ``nb`` was handed out as (the student version beside this
    script, ``NAME/student/NAME.ipynb``, NAME from otter's metadata), by question graded by hand:
    ``{"q5": {source, ...}}``. Empty where that file is not there (a synthetic notebook, or a run
    from the repository)."""
    name = str((nb.get("metadata", {}).get("otter") or {}).get("assignment_name") or "")
    path = HERE / name / "student" / f"{name}.ipynb"
    if not re.fullmatch(r"[\w-]+", name) or not path.exists():
        return {}
    if path not in _TEMPLATES:
        blank = answers_by_hand(json.loads(path.read_text()), template=False)
        _TEMPLATES[path] = {
            q: {"".join(c.get("source", [])).strip() for c in cells} for q, cells in blank.items()
        }
    return _TEMPLATES[path]


_TEMPLATES: dict[Path, dict[str, set[str]]] = {}


def answers_by_hand(notebook: Path | dict, template: bool = True) -> dict[str, list[dict]]:
    """The cells a student wrote for each question graded by hand of ``notebook`` (a file, or a
    notebook already read): ``{"q1a": [cell, ...]}``, the cells after the question's prompt (the cell
    that opens with otter's ``BEGIN QUESTION`` marker) up to its ``END QUESTION`` marker. With
    ``template``, a cell left as the blank set has it (:func:`template_cells`: set 3's report cell
    with its comment line and ``...``) is left out: it is no answer, and two such cells are no copy."""
    nb = notebook if isinstance(notebook, dict) else json.loads(notebook.read_text())
    cells = nb["cells"]
    found: dict[str, list[dict]] = {}
    current = None
    for cell in cells:
        text = "".join(cell.get("source", []))
        if current is not None and END in text:
            current = None
        if BEGIN in text:
            heading = HEADING.search(text.split(BEGIN, 1)[1])
            current = f"q{heading[1]}" if heading else None
            if current:
                found[current] = []
            continue
        if current is not None:
            found[current].append(cell)
    blank = template_cells(nb) if template else {}
    if blank:
        found = {
            q: [c for c in cells if "".join(c.get("source", [])).strip() not in blank.get(q, set())]
            for q, cells in found.items()
        }
    return found


#: The text otter leaves in a student notebook's answer cell for a question graded by hand.
PLACEHOLDER = "_Type your answer here, replacing this text._"


def answered(cells: list[dict]) -> bool:
    """Whether a student wrote an answer in ``cells`` (:func:`answers_by_hand`'s cells of one
    question): a Markdown cell with text other than otter's :data:`PLACEHOLDER`, or a code cell with a
    line that is neither empty, a comment nor ``...``, or whose comments hold a written answer (at
    least :data:`THIN_WORDS` words: "# your answer" does not)."""
    for cell in cells:
        text = "".join(cell.get("source", [])).strip()
        if cell.get("cell_type") == "markdown" and text and text != PLACEHOLDER:
            return True
        if cell.get("cell_type") == "code":
            lines = [ln.strip() for ln in text.splitlines()]
            if any(ln and not ln.startswith("#") and ln not in ("...", "pass") for ln in lines):
                return True
            comments = " ".join(ln.lstrip("#") for ln in lines if ln.startswith("#"))
            if len(comments.split()) >= THIN_WORDS:
                return True
    return False


CHECK = re.compile(r"""grader\.check\(\s*["'](q\w+)["']\s*\)""")


def _placeholder_only(source: str) -> bool:
    """Whether a code cell's ``source`` is still the student version's template: nothing but ``...``,
    ``name = ...``, a bare name, comments, and ``def`` headers whose body is a docstring and ``...``
    (or ``pass``). Code that does not parse counts as an answer (something was typed)."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False

    def empty(node: ast.stmt) -> bool:
        if isinstance(node, ast.Pass):
            return True
        if isinstance(node, ast.Expr):
            return isinstance(node.value, ast.Name) or (
                isinstance(node.value, ast.Constant)
                and (node.value.value is Ellipsis or isinstance(node.value.value, str))
            )
        if isinstance(node, ast.Assign):
            return isinstance(node.value, ast.Constant) and node.value.value is Ellipsis
        if isinstance(node, ast.FunctionDef):
            return all(empty(n) for n in node.body)
        return False

    return all(empty(node) for node in tree.body)


def unanswered_autograded(notebook: Path | dict) -> set[str]:
    """The autograded questions of ``notebook`` (a file, or a notebook already read) whose answer
    cells, the code cells just above the question's ``grader.check("qN")`` cell, all still hold the
    student version's template (:func:`_placeholder_only`). Their feedback says "not answered"
    rather than quoting the errors a missing answer raises in the checks."""
    nb = notebook if isinstance(notebook, dict) else json.loads(notebook.read_text())
    cells, found = nb.get("cells", []), set()
    for k, cell in enumerate(cells):
        m = CHECK.search("".join(cell.get("source", [])))
        if cell.get("cell_type") != "code" or not m:
            continue
        answers = []
        for above in reversed(cells[:k]):
            if above.get("cell_type") != "code" or CHECK.search("".join(above.get("source", []))):
                break
            answers.append("".join(above.get("source", [])))
        if answers and all(_placeholder_only(a) for a in answers):
            found.add(m[1])
    return found


#: A written answer with fewer words and formula symbols than this per point of its question (this
#: many at least), no code and at most one line of formula is too thin to pass for completion unread
#: ("I think it is linear.", a bare "r = 1"; a 25-word argument for 3 points): see :func:`thin`. A
#: sentence or two of explanation for a point, or a derivation of two lines, passes.
THIN_WORDS = 15


def thin(cells: list[dict], points: float = 1.0) -> bool:
    """Whether an :func:`answered` question's ``cells`` hold only a thin answer for a question of
    ``points`` points: no code line, fewer than :data:`THIN_WORDS` words and formula symbols per
    point (and at least :data:`THIN_WORDS`; a formula's letters, LaTeX commands and numbers each
    count as one: a derivation written as one line of LaTeX is not thin), and at most one line with
    a formula (a ``$`` or an ``=``): an answer with its work shown has more of one or the other."""
    text, code = [], False
    for cell in cells:
        source = "".join(cell.get("source", [])).strip()
        if cell.get("cell_type") == "code":
            code |= answered([cell])
        elif source != PLACEHOLDER:
            text.append(source)
    markdown = "\n".join(text)
    prose = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " ", markdown, flags=re.S)
    formulas = " ".join(re.findall(r"\$\$.*?\$\$|\$[^$]*\$", markdown, flags=re.S))
    symbols = re.findall(
        r"\\?[A-Za-z]+|\d+(?:\.\d+)?", formulas
    )  # x, \lambda, 2: a formula's words
    formula_lines = sum(any(c in line for c in "$=") for line in markdown.splitlines())
    least = THIN_WORDS * max(1.0, float(points))
    return not code and len(prose.split()) + len(symbols) < least and formula_lines <= 1


#: An answered question whose answer names fewer than this many of its model answer's terms
#: (:func:`key_terms`) is left unmarked by ``--completion``, for the grader to read: filler ("I
#: computed it with autograd and it works") names none or one; a derivation of the student's own
#: names the law, the quantities and the symbols the model answer uses (several).
ON_TOPIC_TERMS = 2
#: Words too common to tell a topic (and LaTeX's layout commands), left out of :func:`key_terms`.
COMMON_WORDS = frozenset(
    "which their there these those where about would could should other because since first every "
    "while after before being under above still again given gives takes their them they then than "
    "that this with from into only each both also such thus hence whose what when answer lesson "
    "question write wrote words think mathbb mathrm mathcal mathbf operatorname frac tfrac dfrac "
    "left right qquad quad cdot cdots ldots dots text textstyle displaystyle begin aligned limits "
    "big bigg".split()
)


def _stems(text: str, min_letters: int) -> set[str]:
    """The words of ``text`` (prose, and formulas' LaTeX commands without their backslash) of at
    least ``min_letters`` letters, in lower case, cut to their first six letters (so that
    "cumulant" and "cumulants" are one term), without :data:`COMMON_WORDS`."""
    words = (w.lower() for w in re.findall(r"[A-Za-z]+", text))
    return {w[:6] for w in words if len(w) >= min_letters and w not in COMMON_WORDS}


def key_terms(model: str) -> set[str]:
    """A model answer's terms (:func:`_stems`): its prose words of five letters or more and its
    formulas' LaTeX commands of three or more (``\\lambda``, ``\\int``, ``\\kappa``)."""
    commands = " ".join(re.findall(r"\\([A-Za-z]{3,})", model))
    return _stems(_prose(model), 5) | _stems(commands, 3)


#: Phrases by which an answer says that its author is unsure of it: ``--completion`` leaves such an
#: answer unmarked, for the grader to read (:func:`hedged`), however long it is.
HEDGES = (
    "not sure",
    "unsure",
    "no idea",
    "don't know",
    "dont know",
    "do not know",
    "not certain",
    "not confident",
    "i guess",
    "i think",
    "i believe",
    "maybe",
    "todo",
)


def hedged(cells: list[dict]) -> str:
    """The first of :data:`HEDGES` that an answer's ``cells`` hold (any case; in its prose or its
    code's comments), or ``""``: an answer that says it is unsure is left for the grader, not
    marked complete unread."""
    text = (
        " ".join(
            "".join(c.get("source", []))
            for c in cells
            if "".join(c.get("source", [])).strip() != PLACEHOLDER
        )
        .lower()
        .replace("\u2019", "'")
    )
    return next((h for h in HEDGES if re.search(rf"(?<![a-z]){re.escape(h)}(?![a-z])", text)), "")


def off_topic(cells: list[dict], model: str) -> bool:
    """Whether an answered question's ``cells`` name fewer than :data:`ON_TOPIC_TERMS` of the model
    answer's :func:`key_terms` (all of them, where it has fewer): ``--completion`` leaves such an
    answer for the grader to read. A flag, not a verdict: an answer in the student's own words
    names the law and the quantities the question is about."""
    terms = key_terms(model)
    named = terms & _stems(answer_text(cells), 3)
    return len(named) < min(ON_TOPIC_TERMS, len(terms))


#: The words by which a question graded by hand asks for a derivation, in its heading
#: ("**Question 3a (1.5 points, graded by hand): show your derivation.**").
DERIVATION = re.compile(r"show your derivation|derive", re.I)


def derivation_questions(notebook: Path | dict) -> set[str]:
    """The questions of ``notebook`` whose prompt (the cell that opens with otter's ``BEGIN
    QUESTION`` marker) asks for a derivation in its heading's line (:data:`DERIVATION`)."""
    nb = notebook if isinstance(notebook, dict) else json.loads(notebook.read_text())
    found = set()
    for cell in nb["cells"]:
        text = "".join(cell.get("source", []))
        if BEGIN in text:
            prompt = text.split(BEGIN, 1)[1].strip()
            heading = HEADING.search(prompt)
            if heading and DERIVATION.search(prompt.splitlines()[0] if prompt else ""):
                found.add(f"q{heading[1]}")
    return found


def formula_free(cells: list[dict]) -> bool:
    """Whether an answer holds no formula at all: no ``$``, no ``=`` or ``<``/``>`` in its prose,
    no code. A derivation needs at least one: ``--completion`` leaves such an answer to a question
    that asks for one (:func:`derivation_questions`) for the grader to read."""
    text = answer_text([c for c in cells if c.get("cell_type") != "code"])
    code = answered([c for c in cells if c.get("cell_type") == "code"])
    return not code and not re.search(r"[$=<>≤≥]", text)


#: A phrase that a rubric quotes as earning no credit ('No credit for "the settings differ"') is
#: looked for in the answers when it has at least this many words (a bare "yes" is not).
NO_CREDIT_WORDS = 3


def no_credit_phrases(rubric: Path) -> dict[str, list[str]]:
    """The phrases each question's rubric quotes as earning no credit, in lower case: the quoted
    phrases ("...") after "No credit" in its paragraphs, of :data:`NO_CREDIT_WORDS` words or more.
    ``{}`` where the file is missing."""
    found = {}
    for q, body in rubric_sections(rubric).items():
        phrases = []
        for paragraph in re.split(r"\n\s*\n", body):
            _, said, rest = " ".join(paragraph.split()).partition("No credit")
            quoted = re.findall(r'"([^"]+)"|\u201c([^\u201d]+)\u201d', rest) if said else []
            phrases += [
                "".join(pair).lower()
                for pair in quoted
                if len("".join(pair).split()) >= NO_CREDIT_WORDS
            ]
        if phrases:
            found[q] = phrases
    return found


def says_no_credit(cells: list[dict], phrases: list[str]) -> str:
    """The first of ``phrases`` (:func:`no_credit_phrases`) that the answer holds, any case and
    spacing, or ``""``."""
    text = " ".join(answer_text(cells).lower().replace("\u2019", "'").split())
    return next((p for p in phrases if " ".join(p.split()) in text), "")


def unsupported(
    notebook: Path,
    questions: list[dict],
    skip: tuple[str, ...] = (),
    no_credit: dict[str, list[str]] | None = None,
) -> dict[str, str]:
    """Why ``--completion`` leaves an answered question of ``notebook`` (but those in ``skip``)
    unmarked for lack of substance, where it does: ``{question: reason}`` for a derivation with no
    formula (:func:`formula_free`) and an answer holding its rubric's no-credit phrase
    (:func:`says_no_credit`), what the console and the collated files say of them."""
    answers, derivations = answers_by_hand(notebook), derivation_questions(notebook)
    found = {}
    for q in (q["name"] for q in questions if q["manual"] and q["name"] not in skip):
        cells = answers.get(q, [])
        if not answered(cells):
            continue
        if q in derivations and formula_free(cells):
            found[q] = "a derivation with no formula ($, =, < or >) and no code"
        elif phrase := says_no_credit(cells, (no_credit or {}).get(q, [])):
            found[q] = f'it holds a phrase its rubric gives no credit ("{phrase}")'
    return found


def completion_marks(
    notebook: Path,
    questions: list[dict],
    skip: tuple[str, ...] = (),
    model: dict[str, str] | None = None,
    no_credit: dict[str, list[str]] | None = None,
) -> dict[str, str]:
    """Hand marks for completion (the default grading of book/grading.md, ``--completion``): each
    question graded by hand, but those in ``skip``, gets its full points when :func:`answered`, else 0;
    a :func:`thin` answer gets no mark, for the grader to read and mark (:func:`thin_answers` names
    them), nor one that says it is unsure (:func:`hedged`), nor one with no formula to a question
    that asks for a derivation (:func:`formula_free`, :func:`derivation_questions`), nor one that
    holds a phrase its rubric quotes as earning no credit (``no_credit``,
    :func:`no_credit_phrases`), nor, where ``model`` (:func:`model_answers`) has the question's
    model answer, one that names too few of its terms (:func:`off_topic`: filler). They are a first
    pass for the grader to read over, not a judgement of the work."""
    unknown = sorted(set(skip) - {q["name"] for q in questions if q["manual"]})
    if unknown:
        raise SystemExit(
            f"grade_all: --except-question got {unknown}, expected questions graded by hand of this "
            f"set: {[q['name'] for q in questions if q['manual']]}"
        )
    answers = answers_by_hand(notebook)
    derivations = derivation_questions(notebook)
    marks = {}
    for q in questions:
        if q["manual"] and q["name"] not in skip:
            cells = answers.get(q["name"], [])
            if not answered(cells):
                marks[q["name"]] = "0"
            elif (
                not thin(cells, q["points"])
                and not hedged(cells)
                and not (q["name"] in derivations and formula_free(cells))
                and not says_no_credit(cells, (no_credit or {}).get(q["name"], []))
                and not (model and q["name"] in model and off_topic(cells, model[q["name"]]))
            ):
                marks[q["name"]] = f"{float(q['points']):g}"
    return marks


#: A written answer is named as a near-copy when it holds this share of the model answer of the
#: set's rubric.md (:func:`covers`; the solutions are public), or is this alike another student's
#: (:func:`alike`). An answer written independently scores well under it (about 0.4 for a careful
#: paraphrase of a model answer: the formulas are shared, the sentences are not); a copy with a few
#: words changed scores above 0.9. A flag is for the grader to read, not a verdict.
ALIKE = 0.8

#: An answer that pastes part of a model answer's sentences: at least this share of the model answer's
#: prose (its words outside formulas) found verbatim in the answer's prose, in runs of at least
#: :data:`PASTED_RUN` words, and at least two such runs' worth of words (:func:`pasted`). Formulas are
#: left out because every right answer shares them: an answer written independently, formulas alike,
#: scored 0.22 on set 1's question 2a (its model has 27 words of prose), an honest paraphrase 0; half
#: of a model answer pasted, the rest the student's, scores 0.34 to 0.69 on the sets' model answers.
PARTLY = 0.3
PASTED_RUN = 6


#: An answer is compared for near-copies from this many words and symbols (:func:`_words`) on.
COPY_MIN_WORDS = 12

#: An answer named as a near-copy of the model answer (:data:`ALIKE`, formulas included) must also hold
#: this share of the model's prose, its words outside formulas (:func:`copies_prose`), where the model
#: has :data:`COPY_MIN_WORDS` words of prose or more: a derivation redone in the student's own sentences
#: shares the model's formulas, not its sentences. On set 2's question 1a a lecturer's own-words answer
#: scored 0.82 overall but 0.54 on prose; the model answer with a few words changed, 0.99 and 0.95.
PROSE_ALIKE = 0.7


def copies_prose(answer: str, model: str) -> bool:
    """Whether ``answer`` holds :data:`PROSE_ALIKE` of ``model``'s prose (:func:`covers` on the words
    outside formulas, :func:`_prose`); True where the model has fewer than :data:`COPY_MIN_WORDS`
    words of prose, which says nothing either way."""
    if len(_words(_prose(model))) < COPY_MIN_WORDS:
        return True
    return covers(_prose(answer), _prose(model)) >= PROSE_ALIKE


def model_answers(rubric: Path) -> dict[str, str]:
    """Each question graded by hand's model answer, from the set's ``rubric.md`` (the paragraphs from
    "**Model answer.**" to the question's rubric): ``{"q1a": text}``; none for a question without one
    (set 3's report), nor where the file is missing."""
    if not rubric.exists():
        return {}
    found = {}
    for section in re.split(r"^## ", rubric.read_text(), flags=re.M)[1:]:
        name = section.split(maxsplit=1)[0]
        answer = re.search(r"\*\*Model answer\.\*\*(.*?)(?=^\*\*Rubric|\Z)", section, re.S | re.M)
        if answer:
            found[name] = answer[1].strip()
    return found


def rubric_sections(rubric: Path) -> dict[str, str]:
    """Each question graded by hand's section of the set's ``rubric.md`` (from its ``## qN`` heading
    to the next, heading left out): its model answer and rubric, or for the report its items and
    calibration reports. ``{}`` where the file is missing."""
    if not rubric.exists():
        return {}
    sections = re.split(r"^## ", rubric.read_text(), flags=re.M)[1:]
    found = {}
    for section in sections:
        heading, _, body = section.partition("\n")
        if re.fullmatch(r"q\d+[a-z]?", heading.split(maxsplit=1)[0] if heading else ""):
            found[heading.split(maxsplit=1)[0]] = body.strip()
    return found


def full_credit(rubric: Path) -> dict[str, str]:
    """Each question graded by hand's criterion for full credit, from its rubric in the set's
    ``rubric.md``, on one line: the text after "Full credit:" up to the partial marks, or, for a
    rubric written part by part, its whole paragraph. It is what a completion mark's feedback quotes,
    for the student to check the answer against (the solution sheets print the same rubrics).
    ``{}`` where the file is missing."""
    found = {}
    for q, body in rubric_sections(rubric).items():
        m = re.search(r"\*\*Rubric[^*]*\*\*\s*(.+?)(?=\n\s*\n|\Z)", body, re.S)
        if not m:
            continue
        text = " ".join(m[1].split())
        full = re.match(r"Full credit:\s*(.+?)(?=\s+(?:Partial\b|No credit\b)|\Z)", text)
        found[q] = full[1] if full else text
    return found


def completion_record(out: Path, name: str) -> Path:
    """The file where ``--completion`` records the marks it entered, ``{file: {question: mark}}``:
    the feedback says a hand mark is *for completion* while the gradebook still holds that mark (one
    the grader changed is the grader's own)."""
    return out / f"completion-{name}.json"


def _words(text: str) -> list[str]:
    """The words and symbols of an answer, in lower case, without Markdown's emphasis."""
    return re.findall(r"\w+|[^\s\w*_`]", text.lower())


def alike(a: str, b: str) -> float:
    """How alike two students' answers are, 0 to 1: difflib's ratio of their :func:`_words` (twice
    the words they share, in order, over the words of both)."""
    import difflib

    return difflib.SequenceMatcher(None, _words(a), _words(b), autojunk=False).ratio()


def similar(a: str, b: str) -> float:
    """How alike two students' answers are for a near-copy flag: :func:`alike`, or, where both have
    at least twice :data:`COPY_MIN_WORDS` words and numbers (punctuation and a formula's signs not
    counted), how much of one the other holds (:func:`covers`, each way): an answer pasted whole
    into a longer one (a code cell added below) scores 1, while a one-line result that a longer
    derivation also reaches (``E e^{aX} = 2/(2-a), so T = 1/(2-a)``) is too short to be held."""
    score = alike(a, b)
    if min(len(re.findall(r"\w+", a)), len(re.findall(r"\w+", b))) >= 2 * COPY_MIN_WORDS:
        score = max(score, covers(a, b), covers(b, a))
    return score


def covers(answer: str, model: str) -> float:
    """How much of ``model`` (a model answer) ``answer`` holds, 0 to 1: the share of the model's
    :func:`_words` that difflib matches, in order, in the answer's (a copy with words of its own
    added still covers it all)."""
    import difflib

    theirs, ours = _words(answer), _words(model)
    blocks = difflib.SequenceMatcher(None, theirs, ours, autojunk=False).get_matching_blocks()
    return sum(b.size for b in blocks) / max(len(ours), 1)


def _prose(text: str) -> str:
    """``text`` without its formulas (``$...$`` and ``$$...$$``)."""
    return re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.S)


def pasted(answer: str, model: str) -> tuple[float, int]:
    """How much of ``model``'s prose ``answer`` pastes: the share of the model's prose words (formulas
    left out, :func:`_prose`) that difflib finds in the answer's prose in runs of at least
    :data:`PASTED_RUN` words, and how many words that is."""
    import difflib

    theirs, ours = _words(_prose(answer)), _words(_prose(model))
    blocks = difflib.SequenceMatcher(None, theirs, ours, autojunk=False).get_matching_blocks()
    words = sum(b.size for b in blocks if b.size >= PASTED_RUN)
    return words / max(len(ours), 1), words


def answer_text(cells: list[dict]) -> str:
    """A student's answer to one question (:func:`answers_by_hand`'s cells) as text: its Markdown but
    otter's placeholder, and its code."""
    texts = ("".join(c.get("source", [])).strip() for c in cells)
    return "\n".join(t for t in texts if t and t != PLACEHOLDER)


def near_copies(
    files: list[Path],
    questions: list[dict],
    model: dict[str, str],
    skip: tuple[str, ...] = (),
    threshold: float = ALIKE,
    partly: float = PARTLY,
    solution: Path | dict | None = None,
    blank: Path | dict | None = None,
) -> dict[str, dict[str, str]]:
    """The answers graded by hand (but those in ``skip``) that hold the model answer (:func:`covers`)
    or are :func:`alike` another submission's, at ``threshold`` or more: ``{file name: {question:
    what it is alike}}``,
    e.g. ``{"bob.ipynb": {"q1a": "the model answer (0.93)"}}``, or ``"the model answer, in part
    (0.45 of its sentences pasted)"`` for one that pastes ``partly`` of the model's prose or more
    (:func:`pasted`). Blank answers, and answers of fewer
    than :data:`COPY_MIN_WORDS` words and symbols, are not compared (two "No." are not a copy); a
    derivation in formulas is (its symbols count). The autograded questions' code alike the
    ``solution`` notebook's or another submission's (:func:`code_copies`, ``blank`` the student
    version) is named under the question's name as well, ``{"dora.ipynb": {"q1": "anna.ipynb's code
    (1.00)"}}``: a flag only, which changes no autograded point."""
    answers = {f.name: answers_by_hand(f) for f in files}
    found: dict[str, dict[str, str]] = {}
    for q in (q["name"] for q in questions if q["manual"] and q["name"] not in skip):
        texts = {
            name: answer_text(cells)
            for name, by_q in answers.items()
            if answered(cells := by_q.get(q, []))
            and len(_words(answer_text(cells))) >= COPY_MIN_WORDS
        }
        for name, text in texts.items():
            if (
                q in model
                and (score := covers(text, model[q])) >= threshold
                and copies_prose(text, model[q])
            ):
                found.setdefault(name, {})[q] = f"the model answer ({score:.2f})"
            elif q in model:
                share, words = pasted(text, model[q])
                if share >= partly and words >= 2 * PASTED_RUN:
                    found.setdefault(name, {})[q] = (
                        f"the model answer, in part ({share:.2f} of its sentences pasted)"
                    )
        names = sorted(texts)
        for i, one in enumerate(names):
            for other in names[i + 1 :]:
                if (score := similar(texts[one], texts[other])) >= threshold:
                    for a, b in ((one, other), (other, one)):
                        said = found.setdefault(a, {})
                        said[q] = "; ".join(
                            filter(None, (said.get(q), f"{b}'s answer ({score:.2f})"))
                        )
    for name, flagged in code_copies(files, questions, solution, blank, threshold, skip).items():
        found.setdefault(name, {}).update(flagged)
    return found


#: The code a student wrote for an autograded question is compared for near-copies
#: (:func:`code_copies`) from this many tokens of the student's own on (:func:`own_tokens`: without
#: the template handed out, comments and layout), and so is the solution's. Honest answers to a
#: two-line function coincide: set 1's ``tilted_limit`` written as ``return 1 / (2 - a) if a < 2
#: else math.inf`` is 16 tokens, and the solution's body 23. From 40 tokens on, six answers to
#: set 1's questions 1 and 3 written otherwise than the solution (central moments summed with ``@``
#: or ``sum``, or derivatives by autograd; the tilted mean by arithmetic or with tensors) scored
#: 0.17 to 0.52 alike the solution's code and one another, well under :data:`ALIKE`; the sets'
#: solutions, pasted as the solution sheet has them, hold 47 to 195 tokens each: all are compared.
CODE_MIN_TOKENS = 40


def autograded_code(notebook: Path | dict) -> dict[str, list[str]]:
    """The code cells of each autograded question of ``notebook`` (a file, or a notebook already
    read), their sources: ``{"q1": [source, ...]}``, the code cells after the question's prompt (the
    Markdown cell with its heading, ``**Question 1 (...``, not inside otter's ``BEGIN QUESTION``
    markers) up to its ``grader.check("q1")`` cell, or, in the solution sheet, which has no checks,
    up to the next prompt. A Markdown cell of the student's among them is passed over; code cells
    after the check, before the next prompt, are not the answer. A student notebook, otter's
    solution notebook and the solution sheet are read alike."""
    nb = notebook if isinstance(notebook, dict) else json.loads(notebook.read_text())
    found: dict[str, list[str]] = {}
    current, cells = None, []
    for cell in nb.get("cells", []):
        text = "".join(cell.get("source", []))
        code = cell.get("cell_type") == "code"
        check = CHECK.search(text) if code else None
        heading = None if code else HEADING.search(text)
        if heading or check or BEGIN in text or END in text or (code and "grader.check" in text):
            if check or current:
                found.setdefault(check[1] if check else current, []).extend(cells)
            current = f"q{heading[1]}" if heading and BEGIN not in text else None
            cells = []
        elif code:
            cells.append(text)
    if current:
        found.setdefault(current, []).extend(cells)
    return found


def code_tokens(sources: list[str]) -> list[str]:
    """The tokens of code cells' ``sources``, in order, by Python's ``tokenize``, without comments,
    line breaks and indentation: two codes that differ only in layout and comments give the same
    tokens. A cell that does not tokenize (a bracket or a string left open, an indentation that
    matches no block) gives its words and symbols instead, its ``#`` comments left out."""
    import io
    import tokenize

    layout = {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
        tokenize.ENDMARKER,
    }
    found = []
    for source in sources:
        try:
            found += [
                t.string
                for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type not in layout and t.string.strip()
            ]
        except (tokenize.TokenError, SyntaxError):
            found += re.findall(r"\w+|[^\w\s]", re.sub(r"#[^\n]*", "", source))
    return found


def own_tokens(sources: list[str], template: list[str]) -> list[str]:
    """The tokens of code cells' ``sources`` (:func:`code_tokens`) less those of the template handed
    out, ``template`` (the student version's cells' tokens: a function's header and docstring,
    ``...``): the tokens that difflib does not match, in order, with the template's."""
    return _unmatched(code_tokens(sources), template)


def _unmatched(ours: list[str], theirs: list[str]) -> list[str]:
    """The tokens of ``ours`` that difflib does not match, in order, with ``theirs``."""
    import difflib

    kept, start = [], 0
    for block in difflib.SequenceMatcher(None, ours, theirs, autojunk=False).get_matching_blocks():
        kept += ours[start : block.a]
        start = block.a + block.size
    return kept


#: Code whose own tokens the solution's hold, in order, to this share or more is named as the
#: solution's in part (:func:`code_copies`), even where the solution has lines the student left out
#: (a demonstration ``print``) and the ratio of the two falls under :data:`ALIKE`: a pasted body of
#: 58 tokens held whole in a solution of 88 scores 0.79 by ratio, 1.0 held.
CODE_HELD = 0.95

#: Code is named as the solution's by ratio (:func:`code_copies`) from this score on, above
#: :data:`ALIKE`: a lecturer's own answers to set 3, written without the solution at hand, scored
#: 0.81 and 0.83 alike the solution's code (the calls a question names, and the set's variable
#: names, are shared); a pasted solution scores 1.0, and one with a line or two changed above 0.9.
CODE_SOLUTION_ALIKE = 0.9


def _token_ratio(a: list[str], b: list[str], threshold: float) -> float:
    """difflib's ratio of two token lists, or an upper bound of it under ``threshold`` (difflib's
    quick ratios, which spare the full comparison of code that cannot be alike)."""
    import difflib

    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.real_quick_ratio() < threshold or matcher.quick_ratio() < threshold:
        return matcher.quick_ratio()
    return matcher.ratio()


def code_copies(
    files: list[Path],
    questions: list[dict],
    solution: Path | dict | None = None,
    blank: Path | dict | None = None,
    threshold: float = ALIKE,
    skip: tuple[str, ...] = (),
) -> dict[str, dict[str, str]]:
    """The code written for the autograded questions (but those in ``skip``) that is alike the
    ``solution``'s (a notebook: :func:`solution_notebook`) or another submission's, at ``threshold``
    or more (the solution's at :data:`CODE_SOLUTION_ALIKE` or more): ``{file name: {question: what it
    is alike}}``, e.g. ``{"emil.ipynb": {"q1": "the
    solution's code (1.00)"}}``, ``{"dora.ipynb": {"q1": "anna.ipynb's code (1.00)"}}``. Each
    question's code (:func:`autograded_code`) is compared by difflib's ratio of its own tokens
    (:func:`own_tokens`: less what ``blank``, the student version handed out, already held there);
    code with fewer than :data:`CODE_MIN_TOKENS` tokens of its own is not compared (honest answers
    to a short function coincide), nor a question left as the template. Code the solution holds
    whole, or nearly (:data:`CODE_HELD`), is named as the solution's in part, but on a question
    ``prescribed`` in ``questions`` (its prompt gives the calls to make). Two submissions are
    named as alike only where they are more alike each other than either is to the solution: where a
    question dictates the code, honest answers are alike the solution's too. Without ``solution``
    the submissions are compared with each other only. A renamed variable is not seen through. A
    flag for the grader to read: it changes no autograded point."""
    names = [q["name"] for q in questions if not q["manual"] and q["name"] not in skip]
    prescribed = {q["name"] for q in questions if q.get("prescribed")}
    template = autograded_code(blank) if blank is not None else {}
    theirs = autograded_code(solution) if solution is not None else {}
    code = {f.name: autograded_code(f) for f in files}
    found: dict[str, dict[str, str]] = {}

    def flag(file: str, q: str, what: str) -> None:
        said = found.setdefault(file, {})
        said[q] = "; ".join(filter(None, (said.get(q), what)))

    for q in names:
        blank_tokens = code_tokens(template.get(q, []))
        own = {
            name: tokens
            for name, by_q in code.items()
            if len(tokens := own_tokens(by_q.get(q, []), blank_tokens)) >= CODE_MIN_TOKENS
        }
        model = own_tokens(theirs.get(q, []), blank_tokens)
        to_model = {}  # how alike the solution's code each answer is: its ratio, or its share held
        for name, tokens in own.items():
            if len(model) < CODE_MIN_TOKENS:
                continue
            score = _token_ratio(tokens, model, 0.0)
            held = 1 - len(_unmatched(tokens, model)) / len(tokens)
            to_model[name] = max(score, held)
            if q in prescribed:  # the prompt gives the calls: honest code is the solution's
                continue
            if score >= max(threshold, CODE_SOLUTION_ALIKE):
                flag(name, q, f"the solution's code ({score:.2f})")
            elif held >= CODE_HELD:
                flag(name, q, f"the solution's code, in part ({held:.2f} of it held there)")
        ordered = sorted(own)
        for i, one in enumerate(ordered):
            for other in ordered[i + 1 :]:
                score = _token_ratio(own[one], own[other], threshold)
                # two answers are named as alike only where they are more alike each other than
                # either is to the solution: code a question dictates (how to draw the tokens)
                # makes honest answers alike the solution's, and a pasted solution alike them
                explained = max(to_model.get(one, 0.0), to_model.get(other, 0.0))
                if score >= threshold and score > explained:
                    flag(one, q, f"{other}'s code ({score:.2f})")
                    flag(other, q, f"{one}'s code ({score:.2f})")
    return found


def solution_notebook(name: str) -> Path | None:
    """Set ``name``'s solution notebook as the kit ships it, whose code :func:`code_copies` compares
    the students' with: otter's (``NAME/autograder/NAME.ipynb``, kept by the grader), else the
    solution sheet (``NAME/solutions/NAME-solutions.ipynb``: the same code without otter's markers,
    which are comments); None where neither is beside this script."""
    if not re.fullmatch(r"[\w-]+", name):
        return None
    for path in (
        HERE / name / "autograder" / f"{name}.ipynb",
        HERE / name / "solutions" / f"{name}-solutions.ipynb",
    ):
        if path.exists():
            return path
    return None


def by_hand_record(out: Path, name: str) -> Path:
    """Where ``--by-hand`` records the notebooks graded by hand, a list of file names, so that later
    runs (``--reuse``, a late student's) grade them by hand without the option again."""
    return out / f"by-hand-{name}.json"


def write_hidden_checks(out: Path, name: str) -> Path:
    """For the grader only: ``OUT/hidden-checks-NAME.md``, every notebook graded so far (the results
    kept in ``OUT/results/NAME/``) with the messages of its failed hidden checks, per question
    (:func:`hidden_failures`), to see at a glance where a student went wrong. Never return it: the
    messages state the hidden inputs and expected values. Written again on every run."""
    kept = sorted((out / "results" / name).glob("*/results.json"))
    lines = [
        f"# {name}: failed hidden checks, for the grader only",
        "",
        "Never return this file: a hidden check's message states its inputs and expected values. "
        "The feedback for students counts these checks and quotes none.",
        "",
    ]
    passed = []
    for path in kept:
        failures = hidden_failures(json.loads(path.read_text()))
        if not failures:
            passed.append(path.parent.name)
            continue
        lines += [f"## {path.parent.name}.ipynb", ""]
        for q, messages in failures.items():
            said = "; ".join(m or "(no message)" for m in messages)
            lines.append(f"- {q}: {len(messages)} failed: {said}")
        lines.append("")
    if passed:
        lines += [
            "Every hidden check passed: " + ", ".join(f"{s}.ipynb" for s in passed) + ".",
            "",
        ]
    written = out / f"hidden-checks-{name}.md"
    written.write_text("\n".join(lines))
    return written


def submissions_record(out: Path, name: str) -> Path:
    """Where each run records the notebooks it graded, ``{file name: path}``, so that a later run on
    a late student alone compares the new answers with the class's (:func:`class_peers`)."""
    return out / f"submissions-{name}.json"


def class_peers(
    files: list[Path], skip: set[str] = frozenset(), record: Path | None = None
) -> list[Path]:
    """The class's other submissions, not graded now: the notebooks beside ``files`` and those an
    earlier run graded (``record``, :func:`submissions_record`) that still exist, so that a late
    student graded alone is still compared with the class (:func:`near_copies`). Those named in
    ``skip`` or graded now, and those that cannot be read as notebooks, are left out."""
    graded = {f.name for f in files}
    candidates = [
        p for folder in sorted({f.parent for f in files}) for p in sorted(folder.glob("*.ipynb"))
    ]
    if record is not None and record.exists():
        candidates += [Path(p) for p in json.loads(record.read_text()).values()]
    found: dict[str, Path] = {}
    for other in candidates:
        if other.name in graded or other.name in skip or other.name in found or not other.exists():
            continue
        try:
            answers_by_hand(other)
        except (
            OSError,
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
        ):  # a broken notebook of the class: it compares with nothing
            continue
        found[other.name] = other
    return sorted(found.values(), key=lambda p: p.name)


def thin_answers(notebook: Path, questions: list[dict], skip: tuple[str, ...] = ()) -> list[str]:
    """The questions graded by hand (but those in ``skip``) whose answer in ``notebook`` is
    :func:`thin`: ``--completion`` leaves their marks empty and names them."""
    answers = answers_by_hand(notebook)
    return [
        q["name"]
        for q in questions
        if q["manual"]
        and q["name"] not in skip
        and answered(cells := answers.get(q["name"], []))
        and thin(cells, q["points"])
    ]


def _cell_text(cell: dict, figure=None, ran: str = "as the student last ran it") -> str:
    """A cell as Markdown: its text, or its code with what it printed; a figure it drew is written by
    ``figure(png_bytes)``, which returns the figure's relative path (without it, "*(a figure)*"); an
    error it raised is named, with ``ran``, the run its outputs come from."""
    import base64

    source = "".join(cell.get("source", [])).strip()
    if cell.get("cell_type") != "code":
        return source
    shown = [f"```python\n{source}\n```"] if source else []
    for output in cell.get("outputs", []):
        text = output.get("text") or output.get("data", {}).get("text/plain")
        if output.get("output_type") == "error":
            shown.append(
                f"**This cell raised {output.get('ename', 'an error')}: "
                f"{str(output.get('evalue', ''))[:300]}** ({ran})"
            )
        elif "image/png" in output.get("data", {}):
            png = output["data"]["image/png"]
            png = "".join(png) if isinstance(png, list) else png
            shown.append(
                f"![a figure]({figure(base64.b64decode(png))})" if figure else "*(a figure)*"
            )
        elif text:
            shown.append("```text\n" + "".join(text).strip()[:2000] + "\n```")
    return "\n\n".join(shown)


def rerun(notebook: Path, name: str, timeout: float = TIMEOUT) -> dict:
    """``notebook`` executed again, top to bottom, as the grader's copy: every cell run even after
    one raises (nbclient's ``allow_errors``), each stopped after ``timeout`` seconds, in a temporary
    folder where it is named ``NAME.ipynb`` (its setup cell loads the set's checks from it). The
    collated answers show what the code does now (:func:`write_collated`), not only the outputs
    saved in the submission. Returns the executed notebook; raises :class:`NotGraded` where it
    cannot run at all (no kernel, not a notebook). The student's code runs on this machine, as
    under otter."""
    import tempfile

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    try:
        nb = nbformat.read(notebook, as_version=4)
    except (OSError, ValueError, KeyError, AttributeError) as exc:  # not a notebook
        raise NotGraded(f"could not read it to rerun: {exc}") from None
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(notebook, Path(tmp) / f"{name}.ipynb")
        for wheel in HERE.glob("softlin-*.whl"):  # a setup cell that installs finds it
            shutil.copyfile(wheel, Path(tmp) / wheel.name)
        client = NotebookClient(
            nb,
            timeout=timeout,
            allow_errors=True,
            kernel_name="python3",
            resources={"metadata": {"path": tmp}},
            kernel_manager_class=local_kernel_manager(),
        )
        try:
            client.execute()
        except (CellTimeoutError, DeadKernelError) as exc:
            print(f"grade_all: {notebook.name}: the rerun stopped: {exc}", file=sys.stderr)
    return json.loads(nbformat.writes(nb))


def local_kernel_manager():
    """A kernel manager class whose kernels talk to their client over IPC, Unix sockets in Jupyter's
    private runtime folder, each kernel its own, instead of TCP on localhost, where ipykernel warns
    that the traffic is unencrypted (as the book's ``tools/build_book.py``, which this script, shipped
    alone, cannot import); on Windows, where ZeroMQ has no IPC, TCP stays."""
    import os
    import uuid

    import zmq
    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.paths import jupyter_runtime_dir
    from traitlets import default

    class LocalKernelManager(AsyncKernelManager):
        @default("transport")
        def _default_transport(self):
            return "ipc" if zmq.has("ipc") else "tcp"

        def _ip_default(self):
            if self.transport != "ipc":
                return super()._ip_default()
            os.makedirs(jupyter_runtime_dir(), exist_ok=True)
            return os.path.join(jupyter_runtime_dir(), f"kernel-{uuid.uuid4().hex[:16]}-ipc")

    return LocalKernelManager


def _printed(cell: dict) -> str:
    """What a code cell printed (its text outputs, whitespace normalised) and its errors' names."""
    shown = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            shown.append(f"{output.get('ename')}: {output.get('evalue')}")
        text = output.get("text") or output.get("data", {}).get("text/plain")
        if text:
            shown.append("".join(text))
    return " ".join(" ".join(shown).split())


def rerun_notes(submitted: list[dict], again: list[dict]) -> list[str]:
    """What the rerun of one answer's code cells (``again``, cell by cell with ``submitted``) says
    about the outputs saved in the submission: a cell that raises now, a cell whose printed output
    differs from the saved one, a cell that was not run before it was handed in."""
    notes = []
    code = [
        (a, b) for a, b in zip(submitted, again) if a.get("cell_type") == "code" and answered([a])
    ]
    for k, (before, now) in enumerate(code, 1):
        errors = [o for o in now.get("outputs", []) if o.get("output_type") == "error"]
        saved, printed = _printed(before), _printed(now)
        if errors:
            e = errors[0]
            notes.append(
                f"code cell {k} raises {e.get('ename')} on rerun: {str(e.get('evalue'))[:200]}"
            )
        elif not before.get("outputs") and now.get("outputs"):
            notes.append(
                f"code cell {k} was not run in the submission; the output shown is the rerun's"
            )
        elif saved != printed:
            notes.append(
                f"code cell {k} prints something else on rerun than the submission saved (saved: "
                f"{saved[:160]!r}); the output shown is the rerun's"
            )
    return notes


def _figure_writer(folder: Path, stem: str):
    """A function that writes the PNG bytes it is given to ``folder/STEM-K.png`` (K = 1, 2, ...) and
    returns that path relative to ``folder``'s parent, for a Markdown image link."""
    drawn = []

    def save(png: bytes) -> str:
        drawn.append(png)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{stem}-{len(drawn)}.png"
        target.write_bytes(png)
        return f"{folder.name}/{target.name}"

    return save


#: Above each answer of a ``--by-hand`` notebook in the collated files.
BY_HAND_NOTE = (
    "Graded by hand (--by-hand): not run; the outputs shown are those saved in the notebook, and its "
    "row in the gradebook is yours"
)


def write_collated(
    out: Path,
    name: str,
    questions: list[dict],
    files: list[Path],
    copies: dict[str, dict[str, str]] | None = None,
    reruns: dict[str, dict] | None = None,
    rubric: dict[str, str] | None = None,
    status: dict[str, dict[str, str]] | None = None,
    by_hand: frozenset[str] = frozenset(),
) -> list[Path]:
    """``out/by-question/NAME-qN.md`` (and ``.html``, :func:`collated_html`) for each question graded
    by hand: every submission's answer to
    it, one after the other, to mark a question across the class at once, with the figures its cells
    drew (``NAME-qN-figures/FILE-K.png``, shown in place) and the errors they raised, and what an
    answer is alike where :func:`near_copies` (``copies``) found it, and, in every question's
    file, what a submission's code for an autograded question is alike (its points stand); the
    files written. With
    ``reruns`` (file name: the notebook executed again, :func:`rerun`), a code cell shows what it
    prints on rerun, and :func:`rerun_notes` flags a cell that raises now, or whose saved output
    differs from the rerun's. With ``rubric`` (:func:`rubric_sections`), each file opens with its
    question's model answer and rubric, folded (an HTML ``<details>``, which Markdown viewers show).
    ``status`` (``--completion``): per file and question, what the completion pass did, shown above
    the answer ("marked for completion: 1.5", "left for you: ..."). ``by_hand``: the files graded
    ``--by-hand``, said so above each of their answers (not run: the outputs they saved)."""
    copies, reruns, rubric, status = copies or {}, reruns or {}, rubric or {}, status or {}
    folder = out / "by-question"
    folder.mkdir(parents=True, exist_ok=True)
    answers = {f.name: answers_by_hand(f) for f in files}
    auto = [q["name"] for q in questions if not q["manual"]]
    written = []
    for q in (q for q in questions if q["manual"]):
        path = folder / f"{name}-{q['name']}.md"
        # a run on some of the class (a late submission) keeps the others' answers from before
        sections = _answer_sections(path.read_text()) if path.exists() else {}
        for file in answers:
            sections.pop(file, None)
        head = []
        if q["name"] in rubric:
            head += [
                f"<details><summary>The model answer and rubric of {q['name']}</summary>",
                "",
                rubric[q["name"]],
                "",
                "</details>",
                "",
            ]
        figures = folder / f"{name}-{q['name']}-figures"
        for file, by_q in answers.items():
            save = _figure_writer(figures, Path(file).stem)
            submitted, notes = by_q.get(q["name"], []), []
            shown = [(c, "as the student last ran it") for c in submitted]
            again = answers_by_hand(reruns[file]).get(q["name"], []) if file in reruns else []
            if again and len(again) == len(submitted):
                notes = rerun_notes(submitted, again)
                shown = [
                    (now, "on rerun") if before.get("cell_type") == "code" else (before, "")
                    for before, now in zip(submitted, again)
                ]
            # otter's placeholder, left beside an answer written in other cells, is not shown
            cells = [
                t for t in (_cell_text(c, save, ran) for c, ran in shown) if t and t != PLACEHOLDER
            ]
            blank = not cells
            lines = [f"{ANSWER_MARK.format(file=file)}", f"## {file}", ""]
            if file in by_hand:
                lines += [f"*{BY_HAND_NOTE}*", ""]
            if q["name"] in status.get(file, {}):
                lines += [f"*Completion: {status[file][q['name']]}.*", ""]
            if q["name"] in copies.get(file, {}):
                lines += [f"**Near-copy: alike {copies[file][q['name']]}.**", ""]
            if code := [f"{c} alike {copies[file][c]}" for c in auto if c in copies.get(file, {})]:
                lines += [
                    f"**Code near-copy: {'; '.join(code)} (its autograded points stand).**",
                    "",
                ]
            lines += [f"**Rerun: {note}.**" for note in notes] + ([""] if notes else [])
            lines += ["*(no answer)*" if blank else "\n\n".join(cells), ""]
            sections[file] = "\n".join(lines)
        lines = [f"# {name}, {q['name']} ({_points(float(q['points']))}, graded by hand)", ""]
        lines += [f"Rubric: {name}/rubric.md. {len(sections)} submissions.", "", *head]
        lines += [sections[file] for file in sorted(sections)]
        path.write_text("\n".join(lines))
        page = collated_html("\n".join(lines), f"{name}, {q['name']}", folder)
        if page:
            path.with_suffix(".html").write_text(page)
        written.append(path)
    return written


#: Opens each submission's part of a collated file (:func:`write_collated`), so that a later run on
#: some of the class replaces those parts and keeps the others (:func:`_answer_sections`).
ANSWER_MARK = "<!-- answer: {file} -->"


def _answer_sections(text: str) -> dict[str, str]:
    """The submissions' parts of a collated file's ``text``, by file name: each from its
    :data:`ANSWER_MARK` to the next (a student's own headings inside an answer do not split it)."""
    parts = re.split(r"^(?=<!-- answer: .+? -->$)", text, flags=re.M)
    found = {}
    for part in parts[1:]:
        file = re.match(r"<!-- answer: (.+?) -->", part)[1]
        found[file] = part.rstrip("\n") + "\n"
    return found


#: Where a collated page takes MathJax when the kit's own copy (``mathjax/`` beside this script) is
#: missing: the solution sheets' fallback.
MATHJAX_CDN = "https://cdn.jsdelivr.net/npm/mathjax@3.2.2/es5/tex-chtml.js"


def collated_html(markdown: str, title: str, where: Path | None = None) -> str | None:
    """A collated file (:func:`write_collated`) as an HTML page to read in a browser, its formulas
    typeset by MathJax: the kit's copy beside this script (``mathjax/``; by a path relative to
    ``where``, the page's folder, so that the kit moves whole), else :data:`MATHJAX_CDN`.
    Markdown by nbconvert's converter (otter installs nbconvert), which leaves ``$...$`` to MathJax;
    ``None`` where nbconvert is missing (the ``.md`` file is written all the same)."""
    try:
        from nbconvert.filters.markdown_mistune import markdown2html_mistune
    except ImportError:
        return None
    local = HERE / "mathjax" / "startup.js"
    src = local.resolve().as_uri() if local.exists() else MATHJAX_CDN
    if local.exists() and where is not None:
        try:
            src = Path(os.path.relpath(local.resolve(), Path(where).resolve())).as_posix()
        except ValueError:  # another drive (Windows): the absolute address
            pass
    config = {
        "loader": {"load": ["input/tex", "output/chtml"]},
        "tex": {
            "inlineMath": [["$", "$"], ["\\(", "\\)"]],
            "displayMath": [["$$", "$$"], ["\\[", "\\]"]],
            "processEscapes": True,
        },
    }
    fallback = (
        f"var s = document.createElement('script'); s.src = '{MATHJAX_CDN}'; "
        "document.head.appendChild(s);"
    )
    style = (
        "body { font: 15px/1.5 sans-serif; max-width: 52em; margin: 2em auto; padding: 0 1em; } "
        "pre { background: #f4f4f4; padding: 0.5em; overflow-x: auto; } "
        "h2 { border-top: 1px solid #ccc; padding-top: 0.6em; } img { max-width: 100%; }"
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>\n'
        f"<style>{style}</style>\n"
        f"<script>window.MathJax = {json.dumps(config)};</script>\n"
        f'<script defer src="{src}" onerror="{fallback}"></script>\n'
        f"</head><body>\n{markdown2html_mistune(markdown)}\n</body></html>\n"
    )


def completion_status(
    book: dict,
    questions: list[dict],
    prefill: dict,
    copies: dict,
    args,
    thin_by_file: dict[str, list[str]] | None = None,
    hedged_by_file: dict[str, dict[str, str]] | None = None,
    unsupported_by_file: dict[str, dict[str, str]] | None = None,
) -> dict:
    """What ``--completion`` did with each hand-graded answer, for the collated files: the mark it
    entered, or why it left the answer for the grader (a mark already in the gradebook, the question
    left for its rubric, a thin answer (``thin_by_file``: :func:`thin_answers` per file), a near-copy
    of the model answer, an answer that says it is unsure (``hedged_by_file``: per file, question
    and phrase, :func:`hedged`), a derivation with no formula or a no-credit phrase
    (``unsupported_by_file``: :func:`unsupported` per file), an answer that names too few of its
    terms)."""
    thin_by_file, hedged_by_file = thin_by_file or {}, hedged_by_file or {}
    unsupported_by_file = unsupported_by_file or {}
    found: dict[str, dict[str, str]] = {}
    for file, row in book.items():
        for q in (q["name"] for q in questions if q["manual"]):
            mark, entered = row.get(q, "").strip(), prefill.get(file, {}).get(q)
            if q in args.except_question:
                said = "left for you: marked by its rubric (--except-question)"
            elif entered is not None and mark == entered:
                said = f"marked for completion: {entered} (read it over)"
            elif mark:
                said = f"your mark in the gradebook: {mark}"
            elif copies.get(file, {}).get(q, "").startswith("the model answer"):
                said = "left for you: it holds the model answer (below)"
            elif copies.get(file, {}).get(q):
                said = f"left for you: it is alike {copies[file][q]}"
            elif q in thin_by_file.get(file, []):
                said = f"left for you: a thin answer (under {THIN_WORDS} words a point, no code)"
            elif q in hedged_by_file.get(file, {}):
                said = f'left for you: it says it is unsure ("{hedged_by_file[file][q]}")'
            elif q in unsupported_by_file.get(file, {}):
                said = f"left for you: {unsupported_by_file[file][q]}"

            else:
                said = (
                    f"left for you: it names fewer than {ON_TOPIC_TERMS} of the model answer's "
                    "terms (filler?)"
                )
            found.setdefault(file, {})[q] = said
    return found


def _checks(n: int, kind: str) -> str:
    return f"{n} {kind} check" + ("" if n == 1 else "s")


def _unanswered(notebook: Path) -> set[str]:
    """:func:`unanswered_autograded` of a submission, or none when it cannot be read as a notebook
    (its feedback then lists the checks that failed, as for any other answer)."""
    try:
        return unanswered_autograded(notebook)
    except (OSError, ValueError, AttributeError, TypeError):
        return set()


def _zero(mark: str) -> bool:
    """Whether a hand mark, as the gradebook holds it (a decimal comma allowed), is 0."""
    try:
        return float(mark.replace(",", ".")) == 0
    except ValueError:
        return False


def report_lines(report: str) -> list[str]:
    """The feedback's paragraph on the report's items (``report``, as :func:`report_marks` gives
    them), or none where ``report`` is empty: the same in every feedback file."""
    if not report:
        return []
    return [
        f"The report ({REPORT[1]}), item by item (the rubric's (a), (b), (c)'s three and (d), "
        f"each 0, 0.5 or 1; two readings are separated by /): {report}.",
        "",
    ]


def write_feedback(
    path: Path,
    name: str,
    submission: str,
    points: dict[str, tuple[float, float]],
    public_failed: dict[str, list[str | None]],
    hidden_failed: dict[str, int],
    by_hand: dict[str, tuple[str, float]] | None = None,
    total: tuple[str, float] | None = None,
    errors: dict[str, list[str]] | None = None,
    comments: str = "",
    report: str = "",
    unanswered: set[str] | frozenset[str] = frozenset(),
    completion: dict[str, str] | None = None,
) -> None:
    """The student's feedback file ``path`` (Markdown), from :func:`feedback`'s three parts: per
    question its points, how many public and hidden checks failed, and the failed public checks'
    messages; never a hidden check's message. ``by_hand``: the hand marks already in the gradebook,
    ``{question: (mark, possible)}``, listed after the autograded points; ``total``: the set's total
    (awarded, possible) once the gradebook has it; ``errors``: :func:`raised`'s errors, by question;
    ``comments``: the grader's comments from the gradebook, quoted at the top; ``report``: the
    report's items as :func:`report_marks` gives them, after the hand marks; ``unanswered``: the
    autograded questions left as the template (:func:`unanswered_autograded`), said to be not
    answered instead of their failed checks and errors; ``completion``: the hand marks that are
    ``--completion``'s (:func:`completion_record`), each with its rubric's criterion for full credit
    (:func:`full_credit`): the feedback says they were not checked for correctness, and quotes the
    criteria for the student to check the answer against the solution sheet."""
    completion = completion or {}
    errors = errors or {}
    got = sum(p for p, _ in points.values())
    possible = sum(m for _, m in points.values())
    if total:
        summary = f"Total: {total[0]} of {_points(total[1])}; autograded: {got:g} of {possible:g}."
    elif by_hand:
        summary = f"Autograded points: {got:g} of {possible:g}; the hand marks so far are below."
    else:
        summary = (
            f"Autograded points: {got:g} of {possible:g} (the questions graded by hand come "
            "separately)."
        )
    lines = [
        f"# {name}: {submission}",
        "",
        summary,
        "",
        *([f"Comments: {comments.strip()}", ""] if comments.strip() else []),
        "| question | points | public checks failed | hidden checks failed |",
        "|---|---|---|---|",
        *(
            f"| {q} | {p:g} of {m:g} | {len(public_failed.get(q, []))} | {hidden_failed.get(q, 0)} |"
            for q, (p, m) in points.items()
        ),
        "",
    ]
    if by_hand:
        # a completion mark of 0 is an answer left blank: said so, with no criterion to check
        blank = {q for q in completion if q in by_hand and _zero(by_hand[q][0])}

        def how(q: str) -> str:
            if q in blank:
                return "for completion: not answered"
            if q in completion:
                return "for completion: an answer was written; not checked for correctness"
            return "by your grader"

        lines += [
            "| question graded by hand | points | marked |",
            "|---|---|---|",
            *(
                f"| {q} | {mark} of {possible:g} | {how(q)} |"
                for q, (mark, possible) in by_hand.items()
            ),
            "",
        ]
        answered_ = [q for q in completion if q in by_hand and q not in blank]
        criteria = [(q, completion[q]) for q in answered_ if completion[q]]
        if answered_:
            lines += [
                "A mark *for completion* says that you answered the question, not that your answer is "
                "right. Check it against the solution sheet"
                + (": for full credit, the rubric asks for" if criteria else "."),
                "",
                *(f"- **{q}**: {text}" for q, text in criteria),
                *([""] if criteria else []),
            ]
    lines += report_lines(report)
    if any(q not in unanswered for q in (*public_failed, *hidden_failed)):
        lines += [
            'The public checks are those in your notebook: `grader.check("q1")` runs question q1\'s. '
            "The hidden checks try other inputs; only how many of them failed is given here. A "
            "question's points are those of its hidden checks: a failed public check costs nothing "
            "by itself, but warns that hidden ones will likely fail too.",
            "",
        ]
    for q in points:
        public, hidden = public_failed.get(q, []), hidden_failed.get(q, 0)
        if not public and not hidden:
            continue
        p, m = points[q]
        if q in unanswered:
            lines += [
                f"**{q}** ({p:g} of {_points(m)}): not answered (its answer cell still holds the "
                "`...` of the blank set).",
                "",
            ]
            continue
        lines += [f"**{q}** ({p:g} of {_points(m)}):", ""]
        if errors.get(q):
            lines += ["Your code raised an error in its checks:", ""]
            lines += [f"- `{line}`" for line in errors[q]]
            if any(line.startswith("NameError") for line in errors[q]):
                lines.append(
                    "- (a NameError: a cell above stopped with an error before defining that "
                    "name, or the name is misspelt; run the notebook from the top to see where)"
                )
            lines.append("")
        if public:
            lines += [f"{_checks(len(public), 'public')} failed:", ""]
            lines += [
                f"- {text}" if text else f'- (no message: run `grader.check("{q}")` to see it)'
                for text in public
            ]
            lines.append("")
        if hidden:
            lines += [f"{_checks(hidden, 'hidden')} failed.", ""]
    path.write_text("\n".join(lines))


def write_hand_feedback(
    path: Path, name: str, submission: str, row: dict, questions: list[dict], report: str = ""
) -> None:
    """The feedback file ``path`` of a ``--by-hand`` submission, from its gradebook ``row``: its notebook
    could not be run by the autograder, so every question's mark is the grader's; a question not
    marked yet is said so, and the total is given once every mark is in."""
    total, possible = row.get("total_awarded", "").strip(), row.get("total_possible", "")
    summary = (
        f"Total: {total} of {_points(float(possible))}."
        if total
        else "The marks so far are below; the total comes once every question is marked."
    )
    comments = row.get(COMMENTS, "").strip()
    lines = [
        f"# {name}: {submission}",
        "",
        "Your notebook could not be run by the autograder (it did not finish, or could not be read "
        "as a notebook), so your grader marked every question by hand, the computational ones "
        "included.",
        "",
        summary,
        "",
        *([f"Comments: {comments}", ""] if comments else []),
        "| question | points | marked |",
        "|---|---|---|",
        *(
            f"| {q['name']} | {mark} of {float(q['points']):g} | by your grader |"
            if (mark := row.get(q["name"], "").strip())
            else f"| {q['name']} | not marked yet | |"
            for q in questions
        ),
        "",
    ]
    lines += report_lines(report)
    path.write_text("\n".join(lines))


def check_results(results: dict, questions: list[dict], name: str, path: Path) -> None:
    """Refuse otter's ``results`` (read from ``path`` for ``--reuse``) unless they are set ``name``'s:
    the autograded questions and their points as in its ``questions.json``, no score above its
    points. A SystemExit names the file and what differs, so that one set's results never enter
    another set's gradebook."""
    points = feedback(results)[0]
    expected = {q["name"]: float(q["points"]) for q in questions if not q["manual"]}
    found = {q: m for q, (_, m) in points.items()}
    if found != expected:
        raise SystemExit(
            f"grade_all: {path} holds the results of other questions, {found}, not those of "
            f"{name}, {expected}: grade {name} again without --reuse"
        )
    over = {q: p for q, (p, m) in points.items() if p > m}
    if over:
        raise SystemExit(f"grade_all: {path} awards more than the points possible: {over}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Grade a folder of submissions of one problem set with otter; write a gradebook "
        "(CSV) and, per student, feedback that quotes no hidden check.",
        epilog="The docstring at the top of this file says what each output holds.",
    )
    parser.add_argument("name", help="the set, e.g. ps1_measures (a folder beside this script)")
    parser.add_argument("submissions", nargs="+", type=Path, help="notebooks, or folders of them")
    parser.add_argument("--out", type=Path, default=Path("graded"), help="default: ./graded")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="reuse otter's results of an earlier run (OUT/results/NAME/FILE/) instead of running "
        "otter again: to rewrite the feedback with the hand marks entered in the gradebook since "
        "(a submission with no kept results is graded with otter, and named)",
    )
    parser.add_argument(
        "--collate",
        action="store_true",
        help="also write OUT/by-question/NAME-qN.md: every submission's answer to each question "
        "graded by hand, to mark one question across the class, its code's outputs from a rerun "
        "of the notebook (flagged where they differ from the saved ones, or raise)",
    )
    parser.add_argument(
        "--no-rerun",
        action="store_true",
        help="with --collate, show the outputs saved in each submission without running it again",
    )
    parser.add_argument(
        "--completion",
        action="store_true",
        help="mark each question graded by hand for completion: its full points when the student "
        "wrote an answer, 0 otherwise, where its gradebook cell is still empty (read them over); an "
        f"answer of under {THIN_WORDS} words, one formula line at most and no code is named and "
        f"left for you, and so is one that holds the model answer or pastes part of its sentences (with --collate "
        "too: near-copies, of the model answer or between students, are named, and code alike "
        "the solution's or another student's, its autograded points unchanged)",
    )
    parser.add_argument(
        "--except-question",
        action="append",
        default=[],
        metavar="Q",
        help="with --completion, leave question Q for its rubric (set 3's report: q5); repeatable",
    )
    parser.add_argument(
        "--by-hand",
        action="append",
        default=[],
        metavar="FILE",
        help="a submission otter cannot grade (it runs past --timeout, or is not a notebook): not "
        "run; its gradebook row is yours to fill in, every question's column (an autograded "
        "question's points by its rubric), and its feedback is written from that row; repeatable; "
        "recorded in OUT/by-hand-NAME.json, so that later runs (--reuse too) grade it by hand "
        "without the option; with --collate its answers, where the file can be read, join the "
        "class's",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT,
        help=f"seconds one submission may take before it is stopped and left out (default: "
        f"{TIMEOUT:g})",
    )
    args = parser.parse_args(argv)
    require_grading_packages("grade_all")
    if args.except_question and not args.completion:
        parser.error("argument --except-question: only with --completion")
    if not args.timeout > 0:
        raise SystemExit(f"grade_all: --timeout got {args.timeout:g}, expected a positive number")
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
    given = {Path(b).name for b in args.by_hand}
    if stray := sorted(given - {f.name for f in files}):
        raise SystemExit(
            f"grade_all: --by-hand got {stray}, which are not among the submissions given "
            f"({sorted(f.name for f in files)})"
        )
    hand_record = by_hand_record(args.out, args.name)
    remembered = set(json.loads(hand_record.read_text())) if hand_record.exists() else set()
    by_hand = given | (remembered & {f.name for f in files})
    if recalled := sorted(by_hand - given):
        print(
            f"grade_all: graded by hand, as an earlier run's --by-hand recorded in {hand_record}: "
            f"{recalled} (delete a name there to have otter grade that file again)",
            file=sys.stderr,
        )
    if given - remembered:
        args.out.mkdir(parents=True, exist_ok=True)
        hand_record.write_text(json.dumps(sorted(remembered | given), indent=1) + "\n")
    hand_files = [f for f in files if f.name in by_hand]
    questions = read_questions(HERE / args.name / QUESTIONS)
    gradebook = args.out / f"grades-{args.name}.csv"
    existed = gradebook.exists()
    results, skipped = {}, {}
    for f in files:
        if f.name in by_hand:  # the grader's own row: otter does not run it
            continue
        kept = args.out / "results" / args.name / f.stem / "results.json"
        if args.reuse and kept.exists():
            results[f] = json.loads(kept.read_text())
            check_results(results[f], questions, args.name, kept)
            continue
        if args.reuse:
            print(
                f"grade_all: {f.name}: no kept results in {kept.parent}: graded with otter now "
                f"(up to --timeout, {args.timeout:g} s)",
                file=sys.stderr,
            )
        try:
            results[f] = run_otter(
                autograder, f, args.out / "results" / args.name / f.stem, args.timeout
            )
        except NotGraded as exc:  # the others are graded all the same; it is named at the end
            skipped[f] = str(exc)
            print(f"{f.name}: NOT GRADED: {exc}", file=sys.stderr)
    if not results and not hand_files:
        raise SystemExit(f"grade_all: no submission could be graded: {skipped}")
    files = [f for f in files if f in results]
    graded = {f: feedback(r) for f, r in results.items()}
    rows = [(f.name, {q: p for q, (p, _) in g[0].items()}) for f, g in graded.items()]
    model = model_answers(HERE / args.name / "rubric.md")
    no_credit = no_credit_phrases(HERE / args.name / "rubric.md")
    prefill = (
        {
            f.name: completion_marks(f, questions, tuple(args.except_question), model, no_credit)
            for f in files
        }
        if args.completion
        else None
    )
    record_of = submissions_record(args.out, args.name)
    peers = class_peers(files, set(by_hand), record_of) if args.completion or args.collate else []
    args.out.mkdir(parents=True, exist_ok=True)
    seen = json.loads(record_of.read_text()) if record_of.exists() else {}
    seen.update({f.name: str(f.resolve()) for f in files})
    record_of.write_text(json.dumps(seen, indent=1, sort_keys=True) + "\n")
    if peers:
        print(
            f"grade_all: the answers are also compared with {len(peers)} other submission(s) of "
            f"the same folder(s), graded before: {sorted(p.name for p in peers)}",
            file=sys.stderr,
        )
    solution = solution_notebook(args.name)
    if (args.completion or args.collate) and solution is None:
        print(
            f"grade_all: no solution notebook beside this script ({args.name}/autograder/"
            f"{args.name}.ipynb or {args.name}/solutions/{args.name}-solutions.ipynb): the "
            "autograded questions' code is compared between submissions only",
            file=sys.stderr,
        )
    blank = HERE / args.name / "student" / f"{args.name}.ipynb"
    copies = (
        {
            name: flagged
            for name, flagged in near_copies(
                [*files, *peers],
                questions,
                model,
                solution=solution,
                blank=blank if blank.exists() else None,
            ).items()  # every question, the one --except-question leaves to its rubric included
            if name in {f.name for f in files}
        }
        if args.completion or args.collate
        else {}
    )
    hand_graded = {q["name"] for q in questions if q["manual"]}
    for (
        file,
        flagged,
    ) in copies.items():  # a written near-copy (of the model or a peer) is not marked unread
        for q in flagged:
            if prefill and q in hand_graded:
                prefill[file].pop(q, None)
    entered, report_items, second, report_problems = {}, {}, [], False
    if args.name == REPORT[0]:  # the report, item by item, from its sheet
        args.out.mkdir(parents=True, exist_ok=True)
        no_report = set()
        for f in files:  # a notebook with no report: its items are 0, not marks still missing
            try:
                if not answered(answers_by_hand(f).get(REPORT[1], [])):
                    no_report.add(f.name)
            except (OSError, ValueError, KeyError):  # unreadable: marked by hand, as any other
                continue
        sheet_path = args.out / f"report-marks-{args.name}.csv"
        had = sheet_path.read_text() if sheet_path.exists() else ""
        sheet = report_sheet(
            args.out, args.name, [f.name for f in [*files, *hand_files]], no_report
        )
        if new_blank := sorted(  # said once, when their rows are written
            r["file"]
            for r in sheet
            if r["file"] in no_report and not re.search(rf"^{re.escape(r['file'])}[,;]", had, re.M)
        ):
            print(
                f"grade_all: no report in {new_blank}: 0 entered for each item of "
                f"report-marks-{args.name}.csv (replace the zeros if one came another way)",
                file=sys.stderr,
            )
        marks, report_items, problems, second = report_marks(sheet)
        entered = report_entries(sheet, marks)
        for problem in problems:
            print(
                f"grade_all: report-marks-{args.name}.csv: not counted: {problem}", file=sys.stderr
            )
        if emptied := sorted(f for f, m in entered.items() if not m[REPORT[1]]):
            print(
                f"grade_all: {REPORT[1]} left empty for {emptied} until a reading of theirs counts "
                "(exit status 1)",
                file=sys.stderr,
            )
        report_problems = bool(problems)
    before = marks_in(gradebook, questions)  # the hand marks read before this run
    book = {
        row["file"]: row
        for row in merge_gradebook(
            gradebook, questions, rows, prefill, entered, sorted(f.name for f in hand_files)
        )
    }
    thin_by_file = (
        {f.name: thin_answers(f, questions, tuple(args.except_question)) for f in files}
        if args.completion
        else {}
    )
    hedged_by_file: dict[str, dict[str, str]] = {}
    unsupported_by_file: dict[str, dict[str, str]] = {}
    if args.completion:
        for f in files:
            answers = answers_by_hand(f)
            unsure = {
                q["name"]: phrase
                for q in questions
                if q["manual"]
                and q["name"] not in args.except_question
                and q["name"] not in thin_by_file[f.name]
                and not book[f.name][q["name"]].strip()
                and answered(cells := answers.get(q["name"], []))
                and (phrase := hedged(cells))
            }
            if unsure:
                hedged_by_file[f.name] = unsure
                print(
                    f"grade_all: {f.name}: answers that say they are unsure, left for you to mark: "
                    + ", ".join(f'{q} ("{phrase}")' for q, phrase in unsure.items()),
                    file=sys.stderr,
                )
    if args.completion:
        for f in files:
            short = thin_by_file[f.name]
            if short and any(not book[f.name][q].strip() for q in short):
                print(
                    f"grade_all: {f.name}: answers too short to pass for completion unread (under "
                    f"{THIN_WORDS} words a point, one formula line at most, no code), left for you "
                    f"to mark: {short}",
                    file=sys.stderr,
                )
            answers = answers_by_hand(f)
            filler = [
                q["name"]
                for q in questions
                if q["manual"]
                and q["name"] in model
                and q["name"] not in args.except_question
                and q["name"] not in short
                and q["name"] not in hedged_by_file.get(f.name, {})
                and not book[f.name][q["name"]].strip()
                and answered(cells := answers.get(q["name"], []))
                and off_topic(cells, model[q["name"]])
            ]
            if filler:
                print(
                    f"grade_all: {f.name}: answers that name fewer than {ON_TOPIC_TERMS} of their "
                    f"model answer's terms (filler, or an answer off the question), left for you to "
                    f"mark: {filler}",
                    file=sys.stderr,
                )
            lacking = {
                q: why
                for q, why in unsupported(
                    f, questions, tuple(args.except_question), no_credit
                ).items()
                if q not in short
                and q not in hedged_by_file.get(f.name, {})
                and q not in filler
                and not book[f.name][q].strip()
            }
            if lacking:
                unsupported_by_file[f.name] = lacking
                print(
                    f"grade_all: {f.name}: answers left for you to mark: "
                    + "; ".join(f"{q}, {why}" for q, why in lacking.items()),
                    file=sys.stderr,
                )
    for file, flagged in sorted(copies.items()):
        unmarked = ", left unmarked" if args.completion else ""
        said = [f"{q} alike {what}{unmarked}" for q, what in flagged.items() if q in hand_graded]
        if said:
            print(
                f"grade_all: {file}: near-copies (at least {ALIKE:g} alike, or {PARTLY:g} of the "
                "model answer's sentences pasted), for you to read: " + "; ".join(said),
                file=sys.stderr,
            )
        code = [f"{q} alike {what}" for q, what in flagged.items() if q not in hand_graded]
        if code:
            print(
                f"grade_all: {file}: code alike the solution's (at least "
                f"{CODE_SOLUTION_ALIKE:g}) or another submission's (at least {ALIKE:g}), from "
                f"{CODE_MIN_TOKENS} tokens of the student's own, for you to read; its autograded "
                "points stand: " + "; ".join(code),
                file=sys.stderr,
            )
    (args.out / "feedback" / args.name).mkdir(parents=True, exist_ok=True)
    record_path = completion_record(args.out, args.name)
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    if args.completion:
        for file, entered_now in (prefill or {}).items():
            for q, mark in entered_now.items():
                if book[file][q].strip() == mark and not before.get(file, {}).get(q):
                    record.setdefault(file, {})[q] = mark
        record_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    criteria = full_credit(HERE / args.name / "rubric.md")
    out_of_range = {
        name: problems for name, row in book.items() if (problems := mark_problems(row, questions))
    }
    for f in hand_files:
        row = book[f.name]
        write_hand_feedback(
            args.out / "feedback" / args.name / f"{f.stem}.md",
            args.name,
            f.name,
            row,
            questions,
            report_items.get(f.name, ""),
        )
        missing = hand_problems(row, questions)
        print(
            f"{f.name}: graded by hand (--by-hand): "
            + (
                f"total {row['total_awarded']} of {row['total_possible']}"
                if row["total_awarded"].strip()
                else f"enter its marks in {gradebook}, then run again"
                + (f" (autograded columns: {'; '.join(missing)})" if missing else "")
            )
        )
    for f, (points, public_failed, hidden_failed) in graded.items():
        marks = {
            q["name"]: (book[f.name][q["name"]].strip(), float(q["points"]))
            for q in questions
            if q["manual"]
            and book[f.name][q["name"]].strip()
            and f.name not in out_of_range
            # a mark --completion enters now is unread: not in the feedback yet; one already in the
            # gradebook before this run (a late student graded with the others) stays in it
            and (not args.completion or before.get(f.name, {}).get(q["name"]))
        }
        unread = args.completion and any(
            book[f.name][q["name"]].strip() and not before.get(f.name, {}).get(q["name"])
            for q in questions
            if q["manual"]
        )
        write_feedback(
            args.out / "feedback" / args.name / f"{f.stem}.md",
            args.name,
            f.name,
            points,
            public_failed,
            hidden_failed,
            marks,
            (row["total_awarded"], float(row["total_possible"]))
            if (row := book[f.name])["total_awarded"] and not unread
            else None,
            raised(results[f]),
            row[COMMENTS],
            report_items.get(f.name, ""),
            _unanswered(f),
            {
                q: criteria.get(q, "")
                for q, (mark, _) in marks.items()
                if record.get(f.name, {}).get(q) == mark
            },
        )
        total = sum(p for p, _ in points.values())
        most = sum(m for _, m in points.values())
        print(f"{f.name}: {total:g} of {_points(most).replace('point', 'autograded point')}")
    if results:
        hidden_file = write_hidden_checks(args.out, args.name)
        print(f"grade_all: for you alone, the failed hidden checks' messages: {hidden_file}")
    if args.collate:
        reruns = {}
        if not args.no_rerun:
            print(
                f"grade_all: running {len(files)} submission(s) again for the collated answers "
                "(--no-rerun skips it)",
                file=sys.stderr,
            )
            for f in files:
                try:
                    reruns[f.name] = rerun(f, args.name, args.timeout)
                except NotGraded as exc:
                    print(f"grade_all: {f.name}: {exc}", file=sys.stderr)
        readable = []  # the notebooks graded by hand whose cells can be read
        for f in hand_files:
            try:
                answers_by_hand(f)
            except (ValueError, KeyError, TypeError, OSError):
                print(
                    f"grade_all: {f.name} (--by-hand) cannot be read as a notebook: not in the "
                    "collated answers; open it yourself",
                    file=sys.stderr,
                )
            else:
                readable.append(f)
        written = write_collated(
            args.out,
            args.name,
            questions,
            [*files, *readable],
            copies,
            reruns,
            rubric_sections(HERE / args.name / "rubric.md"),
            completion_status(
                book,
                questions,
                prefill,
                copies,
                args,
                thin_by_file,
                hedged_by_file,
                unsupported_by_file,
            )
            if args.completion
            else None,
            frozenset(f.name for f in readable),
        )
        print(
            f"grade_all: {len(written)} files of answers by question in {args.out / 'by-question'}/"
        )
    if args.name == REPORT[0]:
        print(
            f"grade_all: the report's marks: {args.out / f'report-marks-{args.name}.csv'}, a row "
            f"per reading, items {', '.join(REPORT_ITEMS)} (0, 0.5 or 1 each); a second reader "
            f"adds a row of their own; {REPORT[1]} is their sum, or the readings' mean",
            file=sys.stderr,
        )
        if second:
            print(
                f"grade_all: read once, at a band's edge or half a point below it (a half point "
                f"either way changes its band): a second reading advised for {sorted(second)}",
                file=sys.stderr,
            )
    if args.completion:
        print(
            "grade_all: the feedback holds the autograded points only: read the completion marks "
            f"over in {gradebook}, then run again with --reuse to write them into the feedback",
            file=sys.stderr,
        )
    merged = " (merged: earlier rows and hand marks kept)" if existed else ""
    print(f"grade_all: {gradebook}{merged} and {args.out / 'feedback' / args.name}/")
    manual = [q["name"] for q in questions if q["manual"]]
    started = any(r[q].strip() for r in book.values() for q in manual)  # marking has begun
    unmarked = [
        r["file"]
        for r in book.values()
        if any(not r[q].strip() for q in manual)
        and not r["manual_awarded"].strip()  # a typed sum stands for the marks
        and r["file"] not in out_of_range
    ]
    if started and unmarked:
        print(f"grade_all: hand marks still missing for {unmarked}", file=sys.stderr)
    for name, problems in out_of_range.items():  # last, where it is read
        print(
            f"grade_all: {name}: hand marks out of range or not numbers, left out of its total and feedback until "
            f"corrected in {gradebook}: {'; '.join(problems)}",
            file=sys.stderr,
        )
    if skipped or out_of_range:
        if not skipped:
            return 1
        print(
            f"grade_all: {len(skipped)} submission(s) NOT GRADED, left out of the gradebook (open "
            f"them, or grade them by hand): {sorted(f.name for f in skipped)}",
            file=sys.stderr,
        )
        return 1
    return 1 if report_problems else 0


if __name__ == "__main__":
    sys.exit(main())
