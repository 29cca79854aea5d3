"""The course grade (course/final_grades.py, shipped beside grade_all.py): the default scheme of
book/grading.md applied to the three sets' gradebooks and the checks' marks.

* Gradebooks written by grade_all.py's own functions (the questions of the built sets'
  questions.json, as tools/problem_sets.py writes them), hand marks filled in, give each part and the
  course grade as computed here by hand from the scheme: sets 30 % on the points of sets 1, 2 and set 3
  without its report (10 + 12 + 9 = 31), the report 40 % (set 3's q5, over 6), the checks 30 % (15 each,
  over 4).
* The weights are the syllabus's and the grading page's.
* A missing hand mark, report mark or check mark leaves that student's grade empty, names what is
  missing and exits 1; a set not handed in counts 0 and is named; without checks.csv a template with
  every student is written and the script stops; a mark outside 0..4 is named.
* The built kit ships it beside grade_all.py, and its README says how to run it.
"""

from __future__ import annotations

import csv
import importlib.util
import re
from pathlib import Path

import problem_sets
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("final_grades", ROOT / "course" / "final_grades.py")
final_grades = importlib.util.module_from_spec(spec)
spec.loader.exec_module(final_grades)


def _set_questions() -> dict[str, list[dict]]:
    """Each set's questions as the build writes them into questions.json (name, points, manual)."""
    return {name: problem_sets.questions(name) for name in final_grades.SETS}


@pytest.fixture(scope="module")
def questions():
    return _set_questions()


def _gradebook(folder: Path, name: str, questions: list[dict], marks: dict[str, dict]) -> None:
    """``folder/grades-NAME.csv`` by grade_all.py's functions: ``marks[student]`` holds every
    question's points (autograded and by hand; a missing hand mark is left empty)."""
    grade_all = problem_sets.grade_all_module()
    auto = {q["name"] for q in questions if not q["manual"]}
    rows = [(f"{s}.ipynb", {q: v for q, v in m.items() if q in auto}) for s, m in marks.items()]
    path = folder / f"grades-{name}.csv"
    grade_all.write_gradebook(path, questions, rows)
    with path.open(newline="") as handle:
        book = list(csv.DictReader(handle))
    for row in book:
        m = marks[Path(row["file"]).stem]
        for q in questions:
            if q["manual"] and q["name"] in m:
                row[q["name"]] = f"{m[q['name']]:g}"
        grade_all.add_up(row, questions)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=grade_all.gradebook_header(questions))
        writer.writeheader()
        writer.writerows(book)


def _full(qs: list[dict], share: float = 1.0) -> dict[str, float]:
    return {q["name"]: share * float(q["points"]) for q in qs}


def test_the_built_sets_have_the_points_the_scheme_counts(questions):
    totals = {n: sum(float(q["points"]) for q in qs) for n, qs in questions.items()}
    assert totals == {"ps1_measures": 10, "ps2_concentration": 12, "ps3_regression": 15}, totals
    report = [q for q in questions["ps3_regression"] if q["name"] == final_grades.REPORT[1]]
    assert report == [{"name": "q5", "points": 6.0, "manual": True}], report


def test_the_weights_are_the_default_scheme_s():
    grading = (ROOT / "book" / "grading.md").read_text().split("## A default grading scheme", 1)[1]
    table = grading.split("\n| part |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    weights = [int(re.search(r"\| (\d+) %", row)[1]) for row in rows]
    assert weights == list(final_grades.WEIGHTS.values()), (weights, final_grades.WEIGHTS)
    assert "report" in rows[1] and "check" in rows[2], rows


def test_course_grades_follow_the_scheme(tmp_path, questions, capsys):
    # alice: everything; bob: half of every set's points, report 3, checks 2 and 4;
    # carol: set 2 not handed in, full marks elsewhere, report 6, checks 4 and 0
    for name, qs in questions.items():
        marks = {"alice": _full(qs), "bob": _full(qs, 0.5)}
        if name != "ps2_concentration":
            marks["carol"] = _full(qs)
        _gradebook(tmp_path, name, qs, marks)
    with (tmp_path / "checks.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows(
            [["student", "check1", "check2"], ["alice", 4, 4], ["bob", 2, 4], ["carol", 4, 0]]
        )
    status = final_grades.main([str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 0, err
    assert "carol: no ps2_concentration in its gradebook, counted 0" in err
    with (tmp_path / "course-grades.csv").open(newline="") as handle:
        got = {r["student"]: r for r in csv.DictReader(handle)}
    # by hand: sets over 31 points, report over 6, checks over 8
    expected = {
        "alice": (31, 6, 100.0),
        "bob": (15.5, 3, 0.3 * 50 + 0.4 * 50 + 0.3 * 75),
        "carol": (19, 6, 0.3 * 100 * 19 / 31 + 0.4 * 100 + 0.3 * 50),
    }
    for student, (sets, report, course) in expected.items():
        row = got[student]
        assert float(row["sets_awarded"]) == pytest.approx(sets), (student, row)
        assert float(row["sets_possible"]) == 31, row
        assert float(row["report"]) == report, (student, row)
        assert float(row["course_percent"]) == pytest.approx(course, abs=0.051), (student, row)


def test_what_is_missing_is_named_and_leaves_the_grade_empty(tmp_path, questions, capsys):
    for name, qs in questions.items():
        marks = {"dan": _full(qs), "eve": _full(qs)}
        if name == "ps3_regression":
            del marks["eve"]["q5"]  # the report not marked yet
        _gradebook(tmp_path, name, qs, marks)
    status = final_grades.main([str(tmp_path)])  # no checks.csv: a template, then stop
    assert status == 1
    assert "wrote" in capsys.readouterr().err
    with (tmp_path / "checks.csv").open(newline="") as handle:
        assert list(csv.reader(handle)) == [
            ["student", "check1", "check2"],
            ["dan", "", ""],
            ["eve", "", ""],
        ]
    with (tmp_path / "checks.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows(
            [["student", "check1", "check2"], ["dan", 4, 5], ["eve", 3, 3]]
        )
    status = final_grades.main([str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 1
    assert "dan: no grade yet: checks.csv: check2 is 5, expected 0 to 4" in err, err
    assert "eve: no grade yet: ps3_regression: hand marks (total_awarded is empty)" in err, err
    with (tmp_path / "course-grades.csv").open(newline="") as handle:
        got = {r["student"]: r for r in csv.DictReader(handle)}
    assert got["dan"]["course_percent"] == "" and got["eve"]["course_percent"] == "", got


def test_a_folder_without_gradebooks_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        final_grades.main([str(tmp_path)])
    assert "grades-ps1_measures.csv: grade set ps1_measures first" in capsys.readouterr().err


def _notebook(path: Path, answers: dict[str, list[tuple[str, str]]]) -> Path:
    """A student notebook with otter's question markers: for each question graded by hand, its
    prompt cell, then the student's cells ``(cell_type, text)``, then the closing marker."""
    import json

    cells = []
    for q, written in answers.items():
        number = q.removeprefix("q")
        prompt = f"<!-- BEGIN QUESTION -->\n\n**Question {number} (1 point, graded by hand).** ..."
        cells.append({"cell_type": "markdown", "metadata": {}, "source": prompt})
        for kind, text in written:
            cell = {"cell_type": kind, "metadata": {}, "source": text}
            if kind == "code":
                cell.update(outputs=[], execution_count=None)
            cells.append(cell)
        cells.append({"cell_type": "markdown", "metadata": {}, "source": "<!-- END QUESTION -->"})
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb))
    return path


def test_completion_marks_give_full_points_to_a_written_answer_only(tmp_path, questions):
    """grade_all.py --completion: a question graded by hand gets its points when the student wrote
    anything but otter's placeholder (or a code cell with only comments, ``...`` or ``pass``), else
    0; --except-question leaves a question (the report) for its rubric; a mark already in the
    gradebook is kept."""
    grade_all = problem_sets.grade_all_module()
    qs = questions["ps3_regression"]
    placeholder = [("markdown", grade_all.PLACEHOLDER)]
    nb = _notebook(
        tmp_path / "zoe.ipynb",
        {
            "q2a": [("markdown", "b* = ... since the risk is quadratic in r, so r = 1.")],
            "q3a": placeholder,
            "q3b": [("code", "# your answer\n...")],
            "q4a": [("code", "print(1 + 1)")],
            "q5": [("markdown", "My question: ...")],
        },
    )
    marks = grade_all.completion_marks(nb, qs, skip=("q5",))
    points = {q["name"]: float(q["points"]) for q in qs}
    assert marks == {
        "q2a": f"{points['q2a']:g}",
        "q3a": "0",
        "q3b": "0",
        "q4a": f"{points['q4a']:g}",
    }, marks
    with pytest.raises(SystemExit, match=r"--except-question got \['q9'\]"):
        grade_all.completion_marks(nb, qs, skip=("q9",))
    # into the gradebook: an empty hand mark is filled, one already entered stays
    book = tmp_path / "grades-ps3_regression.csv"
    auto = {q["name"]: float(q["points"]) for q in qs if not q["manual"]}
    grade_all.merge_gradebook(book, qs, [("zoe.ipynb", auto)])
    with book.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[0]["q3a"] = "1"  # the grader's own mark
    with book.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=grade_all.gradebook_header(qs))
        writer.writeheader()
        writer.writerows(rows)
    row = grade_all.merge_gradebook(book, qs, [("zoe.ipynb", auto)], {"zoe.ipynb": marks})[0]
    assert row["q3a"] == "1" and row["q2a"] == marks["q2a"] and row["q3b"] == "0", row
    assert row["q5"] == "" and row["total_awarded"] == "", "the report is left for its rubric"
