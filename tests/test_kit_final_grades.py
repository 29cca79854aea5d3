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
* --interim counts only what is in: a set without its gradebook, a check without its mark (or
  without checks.csv, whose template is then written) are left out, set 3's questions other than
  the report count before the report is marked, the sets weighing 30 % times the
  share of their 31 points counted, and the course grade is over the weights counted
  (counted_percent); with every part in it is the final grade.
* The built kit ships it beside grade_all.py, and its README says how to run it.
"""

from __future__ import annotations

import csv
import importlib.util
import json
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
    assert report == [{"name": "q5", "points": 6.0, "manual": True, "prescribed": False}], report
    assert final_grades.SET_POINTS == totals, (
        "SET_POINTS (for a set not graded yet) is not as built"
    )


def test_the_weights_are_the_default_scheme_s():
    grading = (ROOT / "book" / "grading.md").read_text().split("## A default grading scheme", 1)[1]
    table = grading.split("\n| part |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    weights = [int(re.search(r"\| (\d+) %", row)[1]) for row in rows]
    assert weights == list(final_grades.WEIGHTS.values()), (weights, final_grades.WEIGHTS)
    assert "report" in rows[1] and "check" in rows[2], rows


def _class_of_three(folder: Path, questions: dict[str, list[dict]]) -> None:
    """Three students, every mark in. alice: everything; bob: half of every set's points, report 3,
    checks 2 and 4; carol: set 2 not handed in, full marks elsewhere, report 6, checks 4 and 0."""
    for name, qs in questions.items():
        marks = {"alice": _full(qs), "bob": _full(qs, 0.5)}
        if name != "ps2_concentration":
            marks["carol"] = _full(qs)
        _gradebook(folder, name, qs, marks)
    _checks(folder, [["alice", 4, 4], ["bob", 2, 4], ["carol", 4, 0]])


def test_course_grades_follow_the_scheme(tmp_path, questions, capsys):
    _class_of_three(tmp_path, questions)
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


def test_a_pure_copier_keeps_the_share_of_the_grade_the_guide_states(tmp_path, questions, capsys):
    """The lecturer's guide says a copied set keeps its autograded points, "about N % of the grade":
    a student with every autograded point of the three sets and nothing else (no hand mark, no
    report, checks 0 and 0) gets that course grade from final_grades.py, to the nearest percent."""
    for name, qs in questions.items():
        auto = {q["name"]: float(q["points"]) for q in qs if not q["manual"]}
        hand = {q["name"]: 0.0 for q in qs if q["manual"]}
        _gradebook(tmp_path, name, qs, {"dana": {**auto, **hand}})
    _checks(tmp_path, [["dana", 0, 0]])
    assert final_grades.main([str(tmp_path)]) == 0, capsys.readouterr().err
    with (tmp_path / "course-grades.csv").open(newline="") as handle:
        got = float(next(csv.DictReader(handle))["course_percent"])
    guide = (ROOT / "book" / "lecturer_guide.md").read_text()
    stated = re.search(r"keeps its autograded points, about (\d+) % of the grade", guide)
    assert stated, "the guide no longer states what a copied set keeps"
    assert round(got) == int(stated[1]), (
        f"a copier's course grade is {got:.2f} %; the guide says about {stated[1]} %"
    )


def test_a_course_grade_of_zero_is_named(tmp_path, questions, capsys):
    """r69's lecturer: a student whose blank sets were graded got 0.0 with no word. Right, but a zero
    on every part is more often a notebook graded from the wrong file: it is named, final and interim;
    a student with one point anywhere is not."""
    for name, qs in questions.items():
        _gradebook(tmp_path, name, qs, {"eve": _full(qs, 0.0), "fay": _full(qs, 0.5)})
    _checks(tmp_path, [["eve", 0, 0], ["fay", 0, 0]])
    for interim in ([], ["--interim"]):
        final_grades.main([str(tmp_path), *interim])
        err = capsys.readouterr().err
        assert "eve: 0 on every part counted" in err, (interim, err)
        assert "fay: 0 on every part" not in err, (interim, err)


def test_other_weights_change_the_course_grade_as_computed_by_hand(tmp_path, questions, capsys):
    """--weights SETS,REPORT,CHECKS (percent, summing to 100) replaces the default 30,40,30; anything
    else is refused, naming the argument and what it expects."""
    _class_of_three(tmp_path, questions)
    assert final_grades.main([str(tmp_path), "--weights", "50,20,30"]) == 0
    got = _grades(tmp_path / "course-grades.csv")
    # bob: sets 15.5 of 31, report 3 of 6, checks 6 of 8
    assert float(got["bob"]["course_percent"]) == pytest.approx(
        0.5 * 50 + 0.2 * 50 + 0.3 * 75, abs=0.051
    ), got["bob"]
    for bad in ("30,40", "30,40,40", "a,b,c", "-10,80,30"):
        with pytest.raises(SystemExit):
            final_grades.main([str(tmp_path), f"--weights={bad}"])
        err = capsys.readouterr().err
        assert "argument --weights" in err and "summing to 100" in err and repr(bad) in err, err
    capsys.readouterr()


def test_letters_follow_the_bands_given_and_bad_bands_are_refused(tmp_path, questions, capsys):
    """--letters adds each grade's letter by the bands given (a grade at a band's lowest percentage
    gets that band); bands that do not decrease to 0 are refused, naming the argument."""
    _class_of_three(tmp_path, questions)
    bands = "A=90,B=80,C=70,D=57.5,F=0"  # bob's 57.5 % sits on D's edge
    assert final_grades.main([str(tmp_path), "--letters", bands]) == 0
    got = _grades(tmp_path / "course-grades.csv")
    assert {s: r["letter"] for s, r in got.items()} == {"alice": "A", "bob": "D", "carol": "C"}
    assert float(got["bob"]["course_percent"]) == 57.5, got["bob"]  # 15 + 20 + 22.5, by hand
    for bad in ("A=90,B=80", "A=80,B=90,F=0", "A90,F=0", "=90,F=0", "A=120,F=0"):
        with pytest.raises(SystemExit):
            final_grades.main([str(tmp_path), f"--letters={bad}"])
        err = capsys.readouterr().err
        assert "argument --letters" in err and "the last 0" in err and repr(bad) in err, err


def test_the_class_list_gives_every_student_a_row_and_names_strangers(tmp_path, questions, capsys):
    """roster.csv (the class list, FOLDER/roster.csv by default): a student on it who handed in
    nothing gets a row at 0 with the checks' marks, and is in the checks.csv template; a notebook
    named otherwise than the list says is named on stderr, not dropped. Without a list, a student who
    sat the checks but handed in no set still gets a row."""
    _class_of_three(tmp_path, questions)
    (tmp_path / "checks.csv").unlink()
    (tmp_path / "roster.csv").write_text("student,name\nALICE,Alice A\nbob,Bob B\nzoe,Zoe Z\n")
    assert final_grades.main([str(tmp_path)]) == 1  # the template is written first
    with (tmp_path / "checks.csv").open(newline="") as handle:
        listed = [r["student"] for r in csv.DictReader(handle)]
    assert listed == ["alice", "bob", "carol", "zoe"], listed  # carol: graded, not on the list
    err = capsys.readouterr().err
    assert "not on the class list" in err and "['carol']" in err, err
    _checks(tmp_path, [["alice", 4, 4], ["bob", 2, 4], ["carol", 4, 0], ["zoe", 4, 4]])
    final_grades.main([str(tmp_path)])
    got = _grades(tmp_path / "course-grades.csv")
    assert sorted(got) == ["alice", "bob", "carol", "zoe"], got
    # zoe: no set, no report, both checks: 30 % of the grade, by hand
    assert float(got["zoe"]["course_percent"]) == pytest.approx(30.0, abs=0.051), got["zoe"]
    err = capsys.readouterr().err
    assert "zoe: no ps1_measures in its gradebook, counted 0" in err, err
    # without the list, a student in checks.csv alone still gets a row
    (tmp_path / "roster.csv").unlink()
    _checks(tmp_path, [["alice", 4, 4], ["bob", 2, 4], ["carol", 4, 0], ["dan", 2, 2]])
    final_grades.main([str(tmp_path)])
    got = _grades(tmp_path / "course-grades.csv")
    assert float(got["dan"]["course_percent"]) == pytest.approx(15.0, abs=0.051), got["dan"]
    assert "names ['dan'], who have no set graded" in capsys.readouterr().err
    bad = tmp_path / "bad-roster.csv"
    bad.write_text("id\nalice\n")
    with pytest.raises(SystemExit, match="expected a 'student' column"):
        final_grades.main([str(tmp_path), "--roster", str(bad)])


def test_the_lighter_load_counts_set_3_as_its_report_alone(tmp_path, questions, capsys):
    """--set3-report-only (book/grading.md, "A lighter load"): set 3 handed out as its report alone.
    The sets' part is sets 1 and 2 (22 points), set 3's other questions, autograded 0 and never marked
    by hand, are not counted and need no marks; the report is its q5. Without the option the same
    gradebooks leave the grade empty (set 3's hand marks missing), as they should."""
    report_q = final_grades.REPORT[1]
    for name, qs in questions.items():
        if name == "ps3_regression":  # only the report answered: q5 marked, the rest blank
            auto = {q["name"]: 0.0 for q in qs if not q["manual"]}
            marks = {"ann": {**auto, report_q: 5.0}, "ben": {**auto, report_q: 3.0}}
        else:
            marks = {"ann": _full(qs), "ben": _full(qs, 0.5)}
        _gradebook(tmp_path, name, qs, marks)
    _checks(tmp_path, [["ann", 4, 2], ["ben", 3, 3]])
    assert final_grades.main([str(tmp_path)]) == 1
    assert "hand marks (total_awarded is empty" in capsys.readouterr().err
    status = final_grades.main([str(tmp_path), "--set3-report-only"])
    err = capsys.readouterr().err
    assert status == 0, err
    got = _grades(tmp_path / "course-grades.csv")
    # by hand: sets over 22 points, report over 6, checks over 8
    expected = {
        "ann": (22, 5, 0.3 * 100 + 0.4 * 100 * 5 / 6 + 0.3 * 75),
        "ben": (11, 3, 0.3 * 50 + 0.4 * 50 + 0.3 * 75),
    }
    for student, (sets, report, course) in expected.items():
        row = got[student]
        assert float(row["sets_awarded"]) == sets and float(row["sets_possible"]) == 22, row
        assert float(row["report"]) == report, row
        assert float(row["course_percent"]) == pytest.approx(course, abs=0.051), row


def test_an_excused_check_hands_its_weight_to_the_other(tmp_path, questions, capsys):
    """``excused`` in checks.csv (any case): that check is not counted and the other carries the
    checks' 30 %; excused from both, the grade is over the sets and the report (70 %). A mark that is
    neither a number nor ``excused`` still stops the run, naming what it got."""
    _class_of_three(tmp_path, questions)
    _checks(tmp_path, [["alice", "Excused", 3], ["bob", "excused", "excused"], ["carol", 4, 0]])
    status = final_grades.main([str(tmp_path)])
    assert status == 0, capsys.readouterr().err
    got = _grades(tmp_path / "course-grades.csv")
    assert got["alice"]["check1"] == "excused" and got["alice"]["counted_percent"] == "100.0"
    assert float(got["alice"]["course_percent"]) == pytest.approx(70 + 0.3 * 75, abs=0.051)
    # bob: sets 15.5 of 31 and report 3 of 6, over 70 %, and named for it
    assert got["bob"]["counted_percent"] == "70.0", got["bob"]
    said = capsys.readouterr().err
    assert "bob: excused from every check, so graded on the other parts alone (70.0 %" in said, said
    assert "alice: excused" not in said, said
    assert float(got["bob"]["course_percent"]) == pytest.approx(50, abs=0.051), got["bob"]
    _checks(tmp_path, [["alice", "absent", 3], ["bob", 2, 4], ["carol", 4, 0]])
    with pytest.raises(SystemExit) as stopped:
        final_grades.main([str(tmp_path)])
    said = str(stopped.value.code)
    assert "check1 is 'absent', expected a number (0 to 4) or 'excused'" in said, said
    capsys.readouterr()


def test_students_added_after_checks_csv_was_written_get_a_row_in_it(tmp_path, questions, capsys):
    """A student graded, or put on the class list, after checks.csv was written gets an empty row
    appended to it (in its own delimiter, semicolons here), is named, and waits for the marks; the
    rows already there, and their marks, are kept."""
    _class_of_three(tmp_path, questions)
    (tmp_path / "checks.csv").write_text("student;check1;check2\nalice;4;4\nbob;2;4")  # no newline
    (tmp_path / "roster.csv").write_text("student\nalice\nbob\ncarol\ndan\n")
    status = final_grades.main([str(tmp_path)])
    said = capsys.readouterr().err
    assert status == 1, said
    assert "had no row for ['carol', 'dan']: added, empty" in said, said
    lines = (tmp_path / "checks.csv").read_text().splitlines()
    assert lines == ["student;check1;check2", "alice;4;4", "bob;2;4", "carol;;", "dan;;"], lines
    assert "carol: no grade yet: checks.csv: check1" in said, said
    got = _grades(tmp_path / "course-grades.csv")
    assert got["alice"]["course_percent"] == "100.0" and got["carol"]["course_percent"] == ""


def test_a_run_stopped_by_a_bad_mark_leaves_no_stale_grades(tmp_path, questions, capsys):
    """The grades of a first run must not outlive a second run that stops on a mark that is not a
    number: the lecturer would read the old file as the new grades."""
    _class_of_three(tmp_path, questions)
    assert final_grades.main([str(tmp_path)]) == 0
    assert (tmp_path / "course-grades.csv").exists()
    _checks(tmp_path, [["alice", 4, "four"], ["bob", 2, 4], ["carol", 4, 0]])
    with pytest.raises(SystemExit) as stopped:
        final_grades.main([str(tmp_path)])
    message = str(stopped.value.code)
    assert "'four', expected a number" in message, message
    assert "course-grades.csv was removed" in message, message
    assert not (tmp_path / "course-grades.csv").exists(), "the stale grades are still there"
    capsys.readouterr()


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
    assert "eve: no grade yet: ps3_regression: hand marks (total_awarded is empty" in err, err
    assert "python grade_all.py ps3_regression FOLDER --reuse" in err, err
    with (tmp_path / "course-grades.csv").open(newline="") as handle:
        got = {r["student"]: r for r in csv.DictReader(handle)}
    assert got["dan"]["course_percent"] == "" and got["eve"]["course_percent"] == "", got
    # a check out of range blanks the checks' part and the grade, not the parts that are in
    assert got["dan"]["checks_percent"] == "" and got["dan"]["sets_percent"] == "100.0", got["dan"]
    assert got["dan"]["report_percent"] == "100.0", got["dan"]


def test_a_folder_without_gradebooks_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        final_grades.main([str(tmp_path)])
    assert "grades-ps1_measures.csv: grade set ps1_measures first" in capsys.readouterr().err


def _checks(folder: Path, rows: list[list]) -> None:
    with (folder / "checks.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows([["student", "check1", "check2"], *rows])


def _grades(path: Path) -> dict[str, dict]:
    with path.open(newline="") as handle:
        return {r["student"]: r for r in csv.DictReader(handle)}


def test_interim_grades_count_only_what_is_in(tmp_path, questions, capsys):
    # set 1 graded, check 1 marked: alice full set 1 and check1 3; bob half of set 1 and check1 2;
    # carol's hand marks of set 1 are not in (her set is left out), check1 4
    qs = questions["ps1_measures"]
    carol = {q["name"]: float(q["points"]) for q in qs if not q["manual"]}
    marks = {"alice": _full(qs), "bob": _full(qs, 0.5), "carol": carol}
    _gradebook(tmp_path, "ps1_measures", qs, marks)
    _checks(tmp_path, [["alice", 3, ""], ["bob", 2, ""], ["carol", 4, ""]])
    status = final_grades.main([str(tmp_path), "--interim"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "not counted yet" in captured.err, captured.err
    assert "ps2_concentration, ps3_regression" in captured.err, captured.err
    assert "interim" in captured.out.splitlines()[0], captured.out
    assert not (tmp_path / "course-grades.csv").exists(), "--interim wrote course-grades.csv"
    got = _grades(tmp_path / "interim-grades.csv")
    # by hand: the sets weigh 30 * 10/31 (set 1's 10 points of 31), check 1 weighs 15
    sets_weight = 30 * 10 / 31
    counted = sets_weight + 15
    expected = {
        "alice": (counted, (sets_weight * 1.0 + 15 * 3 / 4) / counted * 100),
        "bob": (counted, (sets_weight * 0.5 + 15 * 2 / 4) / counted * 100),
        "carol": (15, 100.0),
    }
    for student, (weight, course) in expected.items():
        row = got[student]
        assert float(row["counted_percent"]) == pytest.approx(weight, abs=0.051), (student, row)
        assert float(row["course_percent"]) == pytest.approx(course, abs=0.051), (student, row)
        assert row["report"] == "" and row["check2"] == "", (student, row)
    assert got["bob"]["sets_possible"] == "10" and got["bob"]["sets_awarded"] == "5", got["bob"]
    assert got["carol"]["sets_possible"] == "0" and got["carol"]["sets_percent"] == "", got["carol"]
    # a late student with nothing marked yet: a blank row, named on stderr, not silent
    marks["dee"] = dict(carol)
    _gradebook(tmp_path, "ps1_measures", qs, marks)
    assert final_grades.main([str(tmp_path), "--interim"]) == 0
    err = capsys.readouterr().err
    assert "dee: nothing counted yet" in err, err
    assert _grades(tmp_path / "interim-grades.csv")["dee"]["course_percent"] == ""


def test_interim_grades_with_every_part_in_are_the_final_grades(tmp_path, questions, capsys):
    _class_of_three(tmp_path, questions)
    assert final_grades.main([str(tmp_path)]) == 0, capsys.readouterr().err
    assert final_grades.main([str(tmp_path), "--interim"]) == 0, capsys.readouterr().err
    final = _grades(tmp_path / "course-grades.csv")
    interim = _grades(tmp_path / "interim-grades.csv")
    assert set(final) == set(interim) == {"alice", "bob", "carol"}, (final, interim)
    for student, row in final.items():
        assert row["counted_percent"] == "100.0", ("final", student, row)
        assert interim[student]["counted_percent"] == "100.0", (
            "interim",
            student,
            interim[student],
        )
        assert interim[student]["course_percent"] == row["course_percent"], (row, interim[student])


def test_interim_grades_without_checks_or_a_report_mark(tmp_path, questions, capsys):
    # every set graded; dan's report not marked yet (set 3's other questions count); no checks.csv
    for name, qs in questions.items():
        marks = {"dan": _full(qs), "eve": _full(qs, 0.5)}
        if name == "ps3_regression":
            del marks["dan"]["q5"]
        _gradebook(tmp_path, name, qs, marks)
    status = final_grades.main([str(tmp_path), "--interim"])
    err = capsys.readouterr().err
    assert status == 0, err
    assert "the checks are not counted yet" in err, err
    template = (tmp_path / "checks.csv").read_text().splitlines()  # to fill in as checks are marked
    assert template == ["student,check1,check2", "dan,,", "eve,,"], template
    got = _grades(tmp_path / "interim-grades.csv")
    # dan: the three sets (31 points), no report; eve: every set and the report
    assert got["dan"]["counted_percent"] == "30.0" and got["dan"]["sets_possible"] == "31", got
    assert got["dan"]["course_percent"] == "100.0" and got["dan"]["report"] == "", got["dan"]
    assert got["eve"]["counted_percent"] == "70.0", got["eve"]
    assert float(got["eve"]["course_percent"]) == pytest.approx(50.0, abs=0.051), got["eve"]
    # a mark out of range is still an error: dan's grade is left empty, exit status 1
    _checks(tmp_path, [["dan", 5, ""], ["eve", 2, ""]])
    status = final_grades.main([str(tmp_path), "--interim"])
    err = capsys.readouterr().err
    assert status == 1, err
    assert "dan: no grade yet: checks.csv: check1 is 5, expected 0 to 4" in err, err
    got = _grades(tmp_path / "interim-grades.csv")
    assert got["dan"]["course_percent"] == "" and got["dan"]["counted_percent"] == "", got["dan"]
    assert float(got["eve"]["counted_percent"]) == 85.0, got["eve"]


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
            "q2a": [
                (
                    "markdown",
                    "The risk is quadratic in r:\n$R = ar^2 - 2br + c$,\nso $r = b/a = 1$.",
                )
            ],
            "q3a": placeholder,
            "q3b": [("code", "# your answer\n...")],
            "q4a": [("code", "print(1 + 1)")],
            "q5": [("markdown", "My question: ...")],
        },
    )
    marks = grade_all.completion_marks(nb, qs, skip=("q5",))
    points = {q["name"]: float(q["points"]) for q in qs}
    # an answer written as comments in a code cell is an answer; "# your answer" is not
    typed = "# The best scale balances the tilt, which grows with r, against the read-out b*/r,\n"
    typed += "# so the ratio depends on d alone once tr Sigma factors out of the bracket."
    assert grade_all.answered([{"cell_type": "code", "source": typed}])
    assert not grade_all.answered([{"cell_type": "code", "source": "# your answer\n..."}])
    assert marks == {
        "q2a": f"{points['q2a']:g}",
        "q3a": "0",
        "q3b": "0",
        "q4a": f"{points['q4a']:g}",
    }, marks
    with pytest.raises(SystemExit, match=r"--except-question got \['q9'\]"):
        grade_all.completion_marks(nb, qs, skip=("q9",))
    # a thin answer (few words, one formula line at most, no code) gets no mark but is named, for
    # the grader; a sentence or two of explanation passes
    sentence = (
        "The tilt moves every token by the same amount, so the average moves by it too, and the "
        "risk at the start falls below the origin's."
    )  # q3a is worth 1.5 points: 15 words a point
    assert len(sentence.split()) == 26 >= 1.5 * grade_all.THIN_WORDS
    thin = _notebook(
        tmp_path / "yan.ipynb",
        {
            "q2a": [("markdown", "I think it is linear.")],
            "q3a": [("markdown", sentence)],
            "q3b": [("markdown", "$r = 1$, by the formula.")],  # a bare result: no work shown
            "q4a": [("code", "print(1 + 1)")],
        },
    )
    marks_thin = grade_all.completion_marks(thin, qs, skip=("q5",))
    assert "q2a" not in marks_thin and "q3b" not in marks_thin, marks_thin
    assert marks_thin["q3a"] == f"{points['q3a']:g}", marks_thin
    assert grade_all.thin_answers(thin, qs, skip=("q5",)) == ["q2a", "q3b"]
    # a derivation written as one line of LaTeX: its symbols count as words, so it is not thin
    one_line = r"$\mathbb E\,e^{aX} = \int_0^\infty \lambda e^{-(\lambda - a)x}\,dx = \lambda/(\lambda - a)$ for $a < \lambda$"
    assert not grade_all.thin([{"cell_type": "markdown", "source": one_line}])
    readme = (ROOT / "tools" / "problem_sets.py").read_text()
    assert f"under {grade_all.THIN_WORDS} words" in readme, "the kit README's word limit differs"
    # with the model answers: an answer that names too few of their terms (filler) is left for the
    # grader; one in the student's own words that names the quantities gets its points
    model = {
        "q3a": "The **tilt** shifts the Gaussian's mean: $\\Lambda(a) = ma + \\sigma^2 a^2/2$, so the "
        "tilted mean moves linearly with the tilt and the variance stays fixed."
    }
    filler = "I computed it with autograd and the code above works, so it matches the checks fine."
    own = (
        "For the Gaussian the log-MGF is quadratic in the tilt, so its derivative is linear: the "
        "tilted mean moves by the variance times the tilt, and nothing else changes."
    )
    for written, marked in ((filler, False), (own, True)):
        nb = _notebook(tmp_path / "w.ipynb", {"q3a": [("markdown", written)]})
        got = grade_all.completion_marks(nb, qs, skip=("q5",), model=model)
        assert ("q3a" in got) is marked, (written, got, grade_all.key_terms(model["q3a"]))
    assert grade_all.off_topic([{"cell_type": "markdown", "source": filler}], model["q3a"])
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


def test_completion_leaves_unsure_answers_and_labels_its_marks_in_the_feedback(tmp_path, questions):
    """--completion leaves unmarked an answer that says it is unsure ("not sure", "I don't know"),
    however long; the feedback labels a completion mark as not checked for correctness and quotes the
    rubric's criterion for full credit; a mark the grader entered is labelled as the grader's."""
    grade_all = problem_sets.grade_all_module()
    qs = questions["ps3_regression"]
    long_unsure = (
        "The best scale balances the tilt against the read-out, and I think the ratio depends on "
        "the dimension only, but I am not sure why the trace factors out of the bracket here."
    )
    sure = long_unsure.replace("and I think", "and").replace("but I am not sure why", "because")
    nb = _notebook(tmp_path / "una.ipynb", {"q3a": [("markdown", long_unsure)]})
    assert grade_all.hedged([{"cell_type": "markdown", "source": long_unsure}]) == "not sure"
    assert "q3a" not in grade_all.completion_marks(nb, qs, skip=("q5",))
    nb = _notebook(tmp_path / "una.ipynb", {"q3a": [("markdown", sure)]})
    assert grade_all.hedged([{"cell_type": "markdown", "source": sure}]) == ""
    assert grade_all.completion_marks(nb, qs, skip=("q5",))["q3a"] != ""
    for text in (
        "I don\u2019t know how to finish.",
        "TODO: the second part",
        "No idea, sorry",
        "I think the ratio depends on d alone.",
        "Maybe the trace factors out.",
    ):
        assert grade_all.hedged([{"cell_type": "markdown", "source": text}]), text
    # "pseudo" and "notice" hold no hedge: words are matched whole
    assert not grade_all.hedged(
        [{"cell_type": "markdown", "source": "A pseudo-inverse; notice it."}]
    )
    # the rubric's criterion for full credit, as the feedback quotes it
    rubric = tmp_path / "rubric.md"
    rubric.write_text(
        "# Set\n\n## q3a (1 point, by hand)\n\n**Model answer.** It is $1/2$.\n\n"
        "**Rubric (1 point).** Full credit: the value and\nits reason. Partial (0.5): the value.\n\n"
        "## q3b (1 point, by hand)\n\n**Rubric (1 point).** 0.5: the bound. 0.5: its proof.\n"
    )
    criteria = grade_all.full_credit(rubric)
    assert criteria == {
        "q3a": "the value and its reason.",
        "q3b": "0.5: the bound. 0.5: its proof.",
    }
    path = tmp_path / "una.md"
    grade_all.write_feedback(
        path,
        "ps3_regression",
        "una.ipynb",
        {"q1": (1.0, 1.0)},
        {},
        {},
        by_hand={"q3a": ("1", 1.0), "q3b": ("0.5", 1.0)},
        completion={"q3a": criteria["q3a"]},
    )
    text = path.read_text()
    assert (
        "| q3a | 1 of 1 | for completion: an answer was written; not checked for correctness |"
        in text
    )
    assert "| q3b | 0.5 of 1 | by your grader |" in text, text
    assert "- **q3a**: the value and its reason." in text and "**q3b**:" not in text, text
    # a completion mark of 0 is an answer left blank: said so, with no criterion listed for it
    grade_all.write_feedback(
        path,
        "ps3_regression",
        "una.ipynb",
        {"q1": (1.0, 1.0)},
        {},
        {},
        by_hand={"q3a": ("0", 1.0)},
        completion={"q3a": criteria["q3a"]},
    )
    text = path.read_text()
    assert "| q3a | 0 of 1 | for completion: not answered |" in text, text
    assert "an answer was written" not in text and "- **q3a**" not in text, text
    grade_all.write_feedback(
        path,
        "ps3_regression",
        "una.ipynb",
        {"q1": (1.0, 1.0)},
        {},
        {},
        by_hand={"q3b": ("0.5", 1.0)},
    )
    assert "for completion" not in path.read_text(), "a grader's mark labelled as completion's"


def test_two_rows_for_one_student_in_checks_csv_stop_the_run(tmp_path, questions, capsys):
    """A second row for a student in checks.csv (``Alice`` beside ``alice`` too: names are one
    student whatever their case) is refused, not read as the last row's marks, and the earlier
    course grades are removed."""
    _class_of_three(tmp_path, questions)
    assert final_grades.main([str(tmp_path)]) == 0
    for again in ("alice", "Alice"):
        _checks(tmp_path, [["alice", 4, 4], ["bob", 2, 4], ["carol", 4, 0], [again, 1, 1]])
        with pytest.raises(SystemExit) as stopped:
            final_grades.main([str(tmp_path)])
        message = str(stopped.value.code)
        assert "checks.csv has two rows for 'alice'" in message, message
        assert not (tmp_path / "course-grades.csv").exists(), "the stale grades are still there"
    capsys.readouterr()


def test_a_student_is_one_name_whatever_its_case(tmp_path, questions, capsys):
    # Dave.ipynb in set 1, dave.ipynb in sets 2 and 3, DAVE in checks.csv: one student, nothing
    # counted 0, and the grade of full marks everywhere
    for name, qs in questions.items():
        _gradebook(tmp_path, name, qs, {"Dave" if name == "ps1_measures" else "dave": _full(qs)})
    _checks(tmp_path, [["DAVE", 4, 4]])
    status = final_grades.main([str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 0 and "counted 0" not in err, err
    got = _grades(tmp_path / "course-grades.csv")
    assert list(got) == ["dave"] and got["dave"]["course_percent"] == "100.0", got


def test_near_copies_of_the_model_answer_or_between_students_are_named(tmp_path, questions):
    """grade_all.py names near-copies (--collate, --completion): an answer that holds the model answer
    of the set's rubric.md, words changed or added (the solutions are public), and two students'
    answers alike; an honest paraphrase of the model answer (same formulas, own sentences) and two
    thin answers alike ("No.") are not named. The collated file says so above the answer."""
    grade_all = problem_sets.grade_all_module()
    name, qs = "ps1_measures", questions["ps1_measures"]
    rubric = tmp_path / name / "rubric.md"
    rubric.parent.mkdir()
    rubric.write_text(problem_sets.rubric(name))
    model = grade_all.model_answers(rubric)
    with_model = {q["name"] for q in qs if q["manual"]}
    assert set(model) == with_model, (sorted(model), sorted(with_model))
    assert grade_all.model_answers(tmp_path / "none.md") == {}
    copied = model["q1b"].replace("so exactly", "hence precisely") + " I checked it numerically."
    paraphrase = (
        "Since t2 is kappa_3/2 and t3 is kappa_4/6, the laws with t2 = t3 = 0 are those whose third "
        "and fourth cumulants vanish: zero skewness and fourth central moment 3 sigma^4. A "
        "Gaussian's log moment generating function is quadratic, so its cumulants beyond the "
        "second are zero."
    )
    shared = (
        "Above the rate the moment generating function is infinite, so the normaliser is a sum "
        "dominated by its largest term and the output follows the largest token, which grows with L."
    )
    files = [
        _notebook(
            tmp_path / "ann.ipynb", {"q1b": [("markdown", copied)], "q4": [("markdown", "No.")]}
        ),
        _notebook(
            tmp_path / "ben.ipynb",
            {"q1b": [("markdown", paraphrase)], "q2b": [("markdown", shared)]},
        ),
        _notebook(
            tmp_path / "cy.ipynb", {"q2b": [("markdown", shared)], "q4": [("markdown", "No.")]}
        ),
    ]
    assert grade_all.covers(copied, model["q1b"]) >= grade_all.ALIKE
    assert grade_all.covers(paraphrase, model["q1b"]) < 0.6, (
        "an honest paraphrase scores well under"
    )
    # half of a model answer pasted, the rest the student's own: named as holding it in part; an
    # answer written independently, its formulas alike the model's, is not
    half = " ".join(model["q4"].split()[: len(model["q4"].split()) // 2])
    half += " The rest I argue myself: the two limits agree only to first order in the tilt."
    own = (
        r"$E e^{aX} = \int_0^\infty \lambda e^{(a-\lambda)x}dx = \lambda/(\lambda-a)$ when "
        r"$a<\lambda$ and infinite otherwise (including $a=\lambda$). So "
        r"$\Lambda(a)=\log\lambda-\log(\lambda-a)$ and $T(a)=1/(\lambda-a)$ for $a<2$; the "
        r"tilted law is Exp$(\lambda-a)$."
    )
    assert grade_all.covers(half, model["q4"]) < grade_all.ALIKE
    files.append(
        _notebook(tmp_path / "dan.ipynb", {"q4": [("markdown", half)], "q2a": [("markdown", own)]})
    )
    found = grade_all.near_copies(files, qs, model)
    assert set(found) == {"ann.ipynb", "ben.ipynb", "cy.ipynb", "dan.ipynb"}, found
    assert list(found["dan.ipynb"]) == ["q4"], found["dan.ipynb"]
    assert found["dan.ipynb"]["q4"].startswith("the model answer, in part ("), found
    assert grade_all.pasted(own, model["q2a"])[0] < grade_all.PARTLY
    assert grade_all.pasted(paraphrase, model["q1b"])[0] < grade_all.PARTLY
    files.pop()
    assert list(found["ann.ipynb"]) == ["q1b"] and found["ann.ipynb"]["q1b"].startswith(
        "the model answer ("
    ), found
    assert found["ben.ipynb"] == {"q2b": "cy.ipynb's answer (1.00)"}, found
    assert found["cy.ipynb"] == {"q2b": "ben.ipynb's answer (1.00)"}, found
    assert grade_all.near_copies(files, qs, model, skip=("q1b", "q2b")) == {}
    # a derivation in formulas (few words, its symbols counted: not thin) is compared
    terse = r"$t_2=\kappa_3/2=\mu_3/2$ and $t_3=\kappa_4/6=(\mu_4-3\sigma^4)/6$ by $T=\Lambda'$."
    pair = [
        _notebook(tmp_path / f"{who}.ipynb", {"q1a": [("markdown", terse)]})
        for who in ("dee", "eve")
    ]
    assert not grade_all.thin([{"cell_type": "markdown", "source": terse}])
    assert grade_all.near_copies(pair, qs, model) == {
        "dee.ipynb": {"q1a": "eve.ipynb's answer (1.00)"},
        "eve.ipynb": {"q1a": "dee.ipynb's answer (1.00)"},
    }
    sections = grade_all.rubric_sections(rubric)
    assert set(sections) == with_model and model["q1b"] in sections["q1b"], sorted(sections)
    written = grade_all.write_collated(tmp_path / "graded", name, qs, files, found, rubric=sections)
    q1b = next(p for p in written if p.stem.endswith("-q1b")).read_text()
    head = q1b.split("## ann.ipynb")[0]  # the question's model answer and rubric open the file
    assert "<details><summary>The model answer and rubric of q1b" in head, head
    assert model["q1b"] in head and "**Rubric" in head, head
    ann, ben = q1b.split("## ann.ipynb")[1].split("## ben.ipynb")
    assert "**Near-copy: alike the model answer (" in ann and "Near-copy" not in ben, q1b
    # a notebook graded --by-hand (one that hung, say) is collated too, and said so
    written = grade_all.write_collated(
        tmp_path / "graded",
        name,
        qs,
        files,
        found,
        rubric=sections,
        by_hand=frozenset({"ben.ipynb"}),
    )
    q1b = next(p for p in written if p.stem.endswith("-q1b")).read_text()
    ann, ben = q1b.split("## ann.ipynb")[1].split("## ben.ipynb")
    assert grade_all.BY_HAND_NOTE in ben and grade_all.BY_HAND_NOTE not in ann, q1b


def test_a_derivation_redone_in_own_sentences_is_not_a_near_copy(tmp_path, questions):
    """A derivation redone in the student's own sentences shares the model answer's formulas, so it
    holds most of the model's words and symbols (set 2's question 1a, as a reviewing lecturer wrote
    it: 0.82), but not its prose: it is not named. The model answer with a few words changed still
    is."""
    grade_all = problem_sets.grade_all_module()
    name, qs = "ps2_concentration", questions["ps2_concentration"]
    rubric = tmp_path / name / "rubric.md"
    rubric.parent.mkdir()
    rubric.write_text(problem_sets.rubric(name))
    model = grade_all.model_answers(rubric)["q1a"]
    own = (
        r"Let $\bar N=\frac1L\sum x_ie^{ax_i}$, $\bar Z=\frac1L\sum e^{ax_i}$ with limits $N$, "
        r"$Z=\lambda/(\lambda-a)$ and $T=N/Z=1/(\lambda-a)$. Linearising the ratio, "
        r"$T_L-T\approx(\bar N-N-T(\bar Z-Z))/Z=\frac1L\sum_i e^{ax_i}(x_i-T)/Z$, a sample mean of "
        r"centred terms, hence $C_1=\mathbb E[e^{2aX}(X-T)^2]/Z^2$. Put $c=\lambda-2a$: "
        r"$\mathbb E[e^{2aX}X^j]=\lambda j!/c^{j+1}$, finite only if $a<\lambda/2$. The numerator "
        r"is $\lambda(2/c^3-2T/c^2+T^2/c)$ and simplifying gives "
        r"$C_1(a)=(\lambda^2-2a\lambda+2a^2)/(\lambda(\lambda-2a)^3)$ on $a<\lambda/2$, $+\infty$ "
        r"for $\lambda/2\le a<\lambda$."
    )
    assert grade_all.covers(own, model) >= grade_all.ALIKE, "the formulas alone reach the threshold"
    assert not grade_all.copies_prose(own, model)
    files = [_notebook(tmp_path / "ida.ipynb", {"q1a": [("markdown", own)]})]
    assert grade_all.near_copies(files, qs, {"q1a": model}) == {}
    copied = model.replace("To\nfirst order", "To first order").replace("a mean", "an average")
    assert copied != model and grade_all.copies_prose(copied, model)
    files = [_notebook(tmp_path / "jo.ipynb", {"q1a": [("markdown", copied)]})]
    found = grade_all.near_copies(files, qs, {"q1a": model})
    assert found["jo.ipynb"]["q1a"].startswith("the model answer ("), found


def test_completion_leaves_a_derivation_without_a_formula_and_a_no_credit_phrase(
    tmp_path, questions
):
    """--completion leaves for the grader an answer with no formula (no $, =, < or >, no code) to a
    question whose heading asks for a derivation, and an answer holding a phrase its rubric quotes as
    earning no credit (of three words or more); a derivation with one formula, and a prose answer to
    a question that asks for none, still get their points. A one-line result that a longer answer
    also reaches is not "alike" it (too short to be held), while a pasted answer still is."""
    grade_all = problem_sets.grade_all_module()
    qs = questions["ps3_regression"]
    prose = (
        "The risk is a polynomial in alpha, and the largest start is where it crosses the risk at "
        "the origin, found from the two roots of that polynomial."
    )
    formula = (
        prose
        + " With $p(\\alpha) = R_\\infty(\\alpha\\Pi, \\alpha) - R_\\infty(0, 0)$, it is $p = 0$."
    )

    def marks(text, heading="show your derivation", no_credit=None):
        path = _notebook(tmp_path / "kim.ipynb", {"q3a": [("markdown", text)]})
        nb = json.loads(path.read_text())
        nb["cells"][0]["source"] = nb["cells"][0]["source"].replace(
            "(1 point, graded by hand).**", f"(1 point, graded by hand): {heading}.**"
        )
        path.write_text(json.dumps(nb))
        assert ("q3a" in grade_all.derivation_questions(path)) is (heading != "why it helps")
        return grade_all.completion_marks(path, qs, skip=("q5",), no_credit=no_credit)

    assert grade_all.formula_free([{"cell_type": "markdown", "source": prose}])
    assert "q3a" not in marks(prose), "a derivation with no formula was marked complete"
    assert marks(formula)["q3a"] != "", "a derivation with a formula was left unmarked"
    assert marks(prose, heading="why it helps")["q3a"] != "", "a prose answer left unmarked"
    # the rubric's no-credit phrases, read from a rubric.md; two words or fewer are not looked for
    rubric = tmp_path / "rubric.md"
    rubric.write_text(
        "## q3a\n\n**Model answer.** ...\n\n**Rubric (1 point).** Full credit: the roots. No credit "
        'for "the settings differ" without saying how, nor "yes".\n'
    )
    phrases = grade_all.no_credit_phrases(rubric)
    assert phrases == {"q3a": ["the settings differ"]}, phrases
    said = prose + " In short, the settings differ."
    assert "q3a" not in marks(said, heading="why it helps", no_credit=phrases)
    assert marks(prose, heading="why it helps", no_credit=phrases)["q3a"] != ""
    # the reasons the console and the collated files give
    path = _notebook(tmp_path / "lee.ipynb", {"q3a": [("markdown", prose)]})
    nb = json.loads(path.read_text())
    nb["cells"][0]["source"] = nb["cells"][0]["source"].replace(
        ").**", "): show your derivation.**"
    )
    path.write_text(json.dumps(nb))
    assert grade_all.unsupported(path, qs, ("q5",))["q3a"].startswith(
        "a derivation with no formula"
    )
    # a thin answer is thin for its points: 15 words and formula symbols a point
    words = "The flow keeps the balance, so the limit is the balanced zero of the risk here."
    assert not grade_all.thin([{"cell_type": "markdown", "source": words}], 1.0)
    assert grade_all.thin([{"cell_type": "markdown", "source": words}], 3.0)
    assert not grade_all.thin([{"cell_type": "markdown", "source": " ".join([words] * 3)}], 3.0)
    # near-copies: a one-line result inside a longer derivation is not a copy of it
    short = "E e^{aX}=2/(2-a) so T=1/(2-a)"
    longer = (
        "For exponential tokens of rate 2 the moment generating function is E e^{aX} = 2/(2-a) for "
        "a < 2, so the log-MGF is log 2 - log(2-a) and its derivative gives T = 1/(2-a)."
    )
    assert grade_all.similar(short, longer) < grade_all.ALIKE
    assert grade_all.similar(longer + "\nprint(1 / (2 - 0.5))", longer) == 1.0


def test_a_pasted_answer_with_more_added_and_untouched_template_cells(tmp_path, monkeypatch):
    """An answer pasted whole into a longer one (a code cell added below) is a near-copy (how much of
    one the other holds), while two answers that only share the blank set's cells are not, and a
    report cell left as handed out is no answer."""
    grade_all = problem_sets.grade_all_module()
    own = (
        "At a = lambda the weights e^{ax} cancel the density's exponential factor, so the weighted "
        "tokens spread evenly up to the largest one, and the output is about half of it."
    )
    assert grade_all.similar(own + "\nprint(max(x) / 2)  # checked on a sample", own) == 1.0
    assert grade_all.alike(own + "\n" + "print(x)\n" * 30, own) < grade_all.ALIKE  # diluted
    # the blank set beside the script: its report cell, a comment line and "...", is left out
    name, template = (
        "ps9_demo",
        "# Your computation for (c): a few lines, one figure or table.\n...",
    )
    monkeypatch.setattr(grade_all, "HERE", tmp_path)
    grade_all._TEMPLATES.clear()

    def notebook(cells):
        nb = json.loads(_notebook(tmp_path / "n.ipynb", {"q5": cells}).read_text())
        nb["metadata"]["otter"] = {"assignment_name": name}
        return nb

    (tmp_path / name / "student").mkdir(parents=True)
    blank = notebook([("markdown", grade_all.PLACEHOLDER), ("code", template)])
    (tmp_path / name / "student" / f"{name}.ipynb").write_text(json.dumps(blank))
    assert grade_all.answers_by_hand(blank)["q5"] == []
    assert not grade_all.answered(grade_all.answers_by_hand(blank)["q5"])
    written = notebook([("markdown", own), ("code", template)])
    kept = grade_all.answers_by_hand(written)["q5"]
    assert [c["source"] for c in kept] == [own], kept
    grade_all._TEMPLATES.clear()


# Set 1's autograded questions as the kit hands them out (the student version's cells) and as its
# solution notebook answers them (otter's markers included: they are comments).
CODE_TEMPLATE = {
    "q1": 'def tilt_coefficients(x, p):\n    """(t2, t3) of T(a) for the law sum_k p_k delta_{x_k}."""\n'
    "    ...",
    "q2": 'def tilted_limit(a):\n    """The infinite-prompt output at the tilt a; math.inf where none."""\n'
    "    ...",
    "q3": "two_point_limit = ...\ntwo_point_limit",
}
CODE_SOLUTION = {
    "q1": 'def tilt_coefficients(x, p):\n    """(t2, t3) of T(a) for the law sum_k p_k delta_{x_k}."""\n'
    "    # BEGIN SOLUTION\n"
    "    # T = Lambda', so t2 = kappa_3 / 2! and t3 = kappa_4 / 3!.\n"
    "    centred = x - p @ x\n"
    "    var, mu3, mu4 = (p @ centred**2), (p @ centred**3), (p @ centred**4)\n"
    "    return float(mu3 / 2), float((mu4 - 3 * var**2) / 6)\n"
    "    # END SOLUTION\n"
    'print("(t2, t3): (%.6g, %.6g)" % tilt_coefficients(torch.tensor([-1.0, 2.0]), '
    "torch.tensor([0.3, 0.7])))  # SOLUTION NO PROMPT",
    # a two-line function: its honest answers are this, token for token
    "q2": 'def tilted_limit(a):\n    """The infinite-prompt output at the tilt a; math.inf where none."""\n'
    "    # BEGIN SOLUTION\n"
    "    k, lam = 1, 2\n"
    "    return k / (lam - a) if a < lam else math.inf\n"
    "    # END SOLUTION",
    "q3": "# BEGIN SOLUTION NO PROMPT\n"
    "mu = sl.EmpiricalMeasure(torch.tensor([[-1.0], [2.0]]), torch.tensor([0.3, 0.7]))\n"
    "# END SOLUTION\n"
    "two_point_limit = float(sl.attention_limit(mu, torch.ones(1, 1), 0.5 * torch.eye(1), "
    "torch.eye(1))[0, 0])  # SOLUTION\n"
    "two_point_limit",
}


def _set_notebook(path: Path, code: dict[str, str], sheet: bool = False) -> Path:
    """A notebook of set 1 laid out as the kit's: a setup cell, then per question its prompt, and
    for an autograded one its code cell (``code[q]``, else the template) and ``grader.check`` cell
    (none in the solution sheet, ``sheet``), for one graded by hand otter's markers around the
    placeholder."""
    cells = [{"cell_type": "code", "source": "import math\nimport torch\n", "metadata": {}}]
    for q in problem_sets.questions("ps1_measures"):
        number = q["name"].removeprefix("q")
        if q["manual"]:
            prompt = f"<!-- BEGIN QUESTION -->\n\n**Question {number} (1 point, graded by hand).**"
            cells += [
                {"cell_type": "markdown", "source": prompt, "metadata": {}},
                {
                    "cell_type": "markdown",
                    "source": "_Type your answer here, replacing this text._",
                },
                {"cell_type": "markdown", "source": "<!-- END QUESTION -->", "metadata": {}},
            ]
            continue
        cells += [
            {"cell_type": "markdown", "source": f"**Question {number} (1 point): compute.**"},
            {"cell_type": "code", "source": code.get(q["name"], CODE_TEMPLATE[q["name"]])},
        ]
        if not sheet:
            cells.append({"cell_type": "code", "source": f'grader.check("{q["name"]}")'})
    for cell in cells:
        cell.setdefault("metadata", {})
        if cell["cell_type"] == "code":
            cell.update(outputs=[], execution_count=None)
    path.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    return path


#: Answers written independently (anna's, hal's), and the solution sheet's code (otter's markers,
#: comments, dropped).
ANNA = {
    "q1": "def tilt_coefficients(x, p):\n"
    "    m = (p * x).sum()\n"
    "    d = x - m\n"
    "    m2 = (p * d**2).sum()\n"
    "    m3 = (p * d**3).sum()\n"
    "    m4 = (p * d**4).sum()\n"
    "    return float(m3 / 2), float((m4 - 3 * m2**2) / 6)\n",
    "q2": "def tilted_limit(a):\n    return 1 / (2 - a) if a < 2 else math.inf\n",
    "q3": "two_point_limit = (0.3 * -1 * math.exp(-0.5) + 0.7 * 2 * math.exp(1.0)) / (\n"
    "    0.3 * math.exp(-0.5) + 0.7 * math.exp(1.0)\n)\ntwo_point_limit",
}
HAL = {
    "q1": "def tilt_coefficients(x, p):\n"
    "    mean = torch.sum(p * x)\n"
    "    central = x - mean\n"
    "    var = torch.sum(p * central ** 2)\n"
    "    k3 = torch.sum(p * central ** 3)\n"
    "    k4 = torch.sum(p * central ** 4) - 3 * var ** 2\n"
    "    return (k3 / 2).item(), (k4 / 6).item()\n",
    "q2": 'def tilted_limit(a):\n    """The infinite-prompt output at the tilt a; math.inf where none."""\n'
    "    k, lam = 1, 2\n    return k / (lam - a) if a < lam else math.inf\n",
    "q3": "w = torch.tensor([0.3, 0.7]) * torch.exp(0.5 * torch.tensor([-1.0, 2.0]))\n"
    "two_point_limit = float(w @ torch.tensor([-1.0, 2.0]) / w.sum())\ntwo_point_limit",
}


def _sheet_code(source: str) -> str:
    """``source`` as the solution sheet prints it: otter's markers dropped."""
    source = re.sub(r"^\s*# (BEGIN|END) SOLUTION.*\n?", "", source, flags=re.M)
    return re.sub(r"\s+# SOLUTION( NO PROMPT)?$", "", source, flags=re.M)


def _class_with_code(folder: Path) -> dict[str, Path]:
    """anna and hal wrote their own code; dora's is anna's, comments added and laid out anew;
    emil's is the solution sheet's, verbatim; the blank student version is left as handed out."""
    folder.mkdir(parents=True, exist_ok=True)
    dora = {
        "q1": "# my own function\ndef tilt_coefficients( x,p ):\n"
        + "\n".join(
            "    " + " ".join(line.split()) + "  # step" for line in ANNA["q1"].splitlines()[1:]
        ),
        "q2": ANNA["q2"],
        "q3": " ".join(ANNA["q3"].split("\n")[:3]) + "  # by hand\n\ntwo_point_limit",
    }
    code = {
        "anna": ANNA,
        "dora": dora,
        "emil": {q: _sheet_code(s) for q, s in CODE_SOLUTION.items()},
        "hal": HAL,
        "blank": {},
    }
    return {who: _set_notebook(folder / f"{who}.ipynb", c) for who, c in code.items()}


def test_code_alike_the_solution_s_or_another_student_s_is_named(tmp_path):
    """The code a student wrote for an autograded question is compared, less the template handed
    out, comments and layout, with the solution notebook's and the class's (grade_all.code_copies,
    through near_copies): dora's code, anna's laid out anew, and emil's, the solution sheet's
    verbatim, are named (emil's but on question 3, whose prompt prescribes the code); hal's, written independently, is not; a two-line function identical to the
    solution's (hal's, and emil's own copy of it) or to a classmate's is too short to be compared."""
    grade_all = problem_sets.grade_all_module()
    qs = problem_sets.questions("ps1_measures")
    blank = _set_notebook(tmp_path / "student.ipynb", {})
    solution = _set_notebook(tmp_path / "solution.ipynb", CODE_SOLUTION)
    subs = _class_with_code(tmp_path / "subs")
    files = list(subs.values())
    # comments, blank lines and layout do not count; code that does not tokenize still gives tokens
    assert grade_all.code_tokens(["a=1  # one\n\n\nif a :\n      b = [1,\n 2]"]) == (
        grade_all.code_tokens(["a = 1\nif a:\n    b = [1, 2]"])
    )
    assert grade_all.code_tokens(["x = (1,  # open\n"]) == ["x", "=", "(", "1", ","]
    assert grade_all.autograded_code(subs["anna"])["q1"] == [ANNA["q1"]]
    sheet = _set_notebook(tmp_path / "sheet.ipynb", CODE_SOLUTION, sheet=True)
    assert grade_all.autograded_code(sheet) == grade_all.autograded_code(solution)
    template = {q: grade_all.code_tokens([s]) for q, s in CODE_TEMPLATE.items()}
    own = {
        who: {
            q: grade_all.own_tokens(cells, template[q])
            for q, cells in grade_all.autograded_code(path).items()
        }
        for who, path in subs.items()
    }
    model = {
        q: grade_all.own_tokens(cells, template[q])
        for q, cells in grade_all.autograded_code(solution).items()
    }
    assert all(not tokens for tokens in own["blank"].values()), own["blank"]
    assert own["dora"] == own["anna"], "comments and layout changed the tokens"
    # a short honest answer is the solution's, token for token, and is not compared
    assert own["hal"]["q2"] == model["q2"] and len(model["q2"]) < grade_all.CODE_MIN_TOKENS
    assert len(own["anna"]["q2"]) < grade_all.CODE_MIN_TOKENS
    assert all(len(own["hal"][q]) >= grade_all.CODE_MIN_TOKENS for q in ("q1", "q3"))
    assert all(len(model[q]) >= grade_all.CODE_MIN_TOKENS for q in ("q1", "q3"))
    # code written independently scores well under the threshold
    for q in ("q1", "q3"):
        for a, b in ((own["hal"][q], model[q]), (own["anna"][q], model[q])):
            assert grade_all._token_ratio(a, b, 0.0) < 0.6, q
        assert grade_all._token_ratio(own["hal"][q], own["anna"][q], 0.0) < 0.6, q
    found = grade_all.code_copies(files, qs, solution, blank)
    assert found == {
        "anna.ipynb": {"q1": "dora.ipynb's code (1.00)", "q3": "dora.ipynb's code (1.00)"},
        "dora.ipynb": {"q1": "anna.ipynb's code (1.00)", "q3": "anna.ipynb's code (1.00)"},
        "emil.ipynb": {"q1": "the solution's code (1.00)"},
    }, found
    # question 3's prompt prescribes the calls (questions.json: prescribed), so code alike the
    # solution's is not named there; a question not prescribed names the same code
    assert [q["name"] for q in qs if q["prescribed"]] == ["q3"], qs
    unprescribed = [{**q, "prescribed": False} for q in qs]
    assert grade_all.code_copies(files, unprescribed, solution, blank)["emil.ipynb"] == {
        "q1": "the solution's code (1.00)",
        "q3": "the solution's code (1.00)",
    }
    # the solution sheet (no checks, no markers) serves as the solution notebook does
    assert grade_all.code_copies(files, qs, sheet, blank) == found
    # near_copies names them too, under the autograded question, beside the written answers' flags
    assert grade_all.near_copies(files, qs, {}, solution=solution, blank=blank) == found
    assert grade_all.near_copies(files, qs, {}) == {
        who: flagged for who, flagged in found.items() if who != "emil.ipynb"
    }, "without the solution, the students are compared with each other only"
    assert grade_all.code_copies(files, qs, solution, blank, skip=("q1", "q3")) == {}


def test_code_the_solution_holds_is_named_and_dictated_code_is_not_a_pair(tmp_path):
    """A solution body pasted without its demonstration print scores under ALIKE by ratio but is
    held whole in the solution's code: named as the solution's, in part. Two answers alike because
    one is the solution and the other follows it closely (as where a question dictates the code)
    are not named as a pair: they are no more alike each other than one is to the solution; a pair
    alike each other beyond that still is."""
    grade_all = problem_sets.grade_all_module()
    qs = problem_sets.questions("ps1_measures")
    blank = _set_notebook(tmp_path / "student.ipynb", {})
    solution = _set_notebook(tmp_path / "solution.ipynb", CODE_SOLUTION)
    body = _sheet_code(CODE_SOLUTION["q1"]).split("\nprint(")[0]  # the demonstration line left out
    close = body.replace("centred", "c")  # the solution followed, a name changed
    folder = tmp_path / "subs"
    folder.mkdir()
    paths = [
        _set_notebook(folder / "emil.ipynb", {"q1": body}),
        _set_notebook(folder / "bob.ipynb", {"q1": close}),
    ]
    template = grade_all.code_tokens([CODE_TEMPLATE["q1"]])
    model = grade_all.own_tokens(grade_all.autograded_code(solution)["q1"], template)
    emil = grade_all.own_tokens([body], template)
    bob = grade_all.own_tokens([close], template)
    assert grade_all._token_ratio(emil, model, 0.0) < grade_all.ALIKE  # the ratio misses it
    assert grade_all._token_ratio(emil, bob, 0.0) >= grade_all.ALIKE  # alike, through the solution
    found = grade_all.code_copies(paths, qs, solution, blank)
    assert found["emil.ipynb"] == {"q1": "the solution's code, in part (1.00 of it held there)"}, (
        found
    )
    assert "emil.ipynb" not in found.get("bob.ipynb", {}).get("q1", ""), found
    # without the solution to explain it, the pair is named
    alone = grade_all.code_copies(paths, qs, None, blank)
    assert "bob.ipynb's code" in alone["emil.ipynb"]["q1"], alone


def test_a_code_near_copy_is_named_and_keeps_its_autograded_points(tmp_path, monkeypatch, capsys):
    """grade_all.py --collate --completion on a class where dora's code is anna's and emil's the
    solution's: named on stderr and in every collated file, with the kit's solution notebook
    (NAME/autograder/NAME.ipynb, else the solution sheet); the autograder's points stay in the
    gradebook. Without a solution notebook, stderr says once that code is compared between
    submissions only."""
    grade_all = problem_sets.grade_all_module()
    name = "ps1_measures"
    qs = problem_sets.questions(name)
    kit = tmp_path / "kit"
    (kit / name / "autograder").mkdir(parents=True)
    (kit / name / "student").mkdir()
    (kit / name / "autograder" / "autograder.zip").write_bytes(b"")
    (kit / name / "questions.json").write_text(json.dumps(qs))
    (kit / name / "rubric.md").write_text(problem_sets.rubric(name))
    _set_notebook(kit / name / "student" / f"{name}.ipynb", {})
    solution = _set_notebook(kit / name / "autograder" / f"{name}.ipynb", CODE_SOLUTION)
    subs = _class_with_code(tmp_path / "subs")["anna"].parent
    points = {q["name"]: float(q["points"]) for q in qs if not q["manual"]}

    def otter(autograder, submission, results, timeout):  # every autograded point, as otter's
        tests = [{"name": q, "score": p, "max_score": p, "output": ""} for q, p in points.items()]
        return {"tests": tests}

    monkeypatch.setattr(grade_all, "HERE", kit)
    monkeypatch.setattr(grade_all, "run_otter", otter)
    assert grade_all.solution_notebook(name) == solution
    out = tmp_path / "graded"
    argv = [name, str(subs), "--out", str(out), "--collate", "--no-rerun"]
    assert grade_all.main([*argv, "--completion"]) == 0
    err = capsys.readouterr().err
    code = {
        line.split(": ")[1]: line
        for line in err.splitlines()
        if re.match(r"grade_all: \w+\.ipynb: code alike", line)
    }
    assert sorted(code) == ["anna.ipynb", "dora.ipynb", "emil.ipynb"], err
    assert code["emil.ipynb"].endswith("q1 alike the solution's code (1.00)"), err
    assert "q1 alike anna.ipynb's code (1.00)" in code["dora.ipynb"], err
    assert "its autograded points stand" in code["dora.ipynb"], err
    assert "near-copies" not in err and "compared between submissions only" not in err, err
    with (out / f"grades-{name}.csv").open(newline="") as handle:
        rows = {r["file"]: r for r in csv.DictReader(handle)}
    for who in ("anna", "dora", "emil", "hal", "blank"):
        row = rows[f"{who}.ipynb"]
        assert {q: float(row[q]) for q in points} == points, row
        assert float(row["auto_awarded"]) == sum(points.values()), row
    collated = (out / "by-question" / f"{name}-q4.md").read_text()
    dora = collated.split("## dora.ipynb")[1].split("## ")[0]
    assert (
        "**Code near-copy: q1 alike anna.ipynb's code (1.00); q3 alike anna.ipynb's code (1.00) "
        "(its autograded points stand).**" in dora
    ), dora
    assert "Code near-copy" not in collated.split("## hal.ipynb")[1].split("## ")[0], collated
    # the solution sheet where otter's solution notebook is not beside the script; neither: said once
    solution.unlink()
    sheet = kit / name / "solutions" / f"{name}-solutions.ipynb"
    sheet.parent.mkdir()
    _set_notebook(sheet, CODE_SOLUTION, sheet=True)
    assert grade_all.solution_notebook(name) == sheet
    sheet.unlink()
    assert grade_all.solution_notebook(name) is None
    assert grade_all.main([*argv, "--reuse"]) == 0
    err = capsys.readouterr().err
    assert err.count("compared between submissions only") == 1, err
    assert "emil.ipynb: code alike" not in err and "dora.ipynb: code alike" in err, err


def test_collated_code_shows_its_rerun_and_flags_saved_outputs_it_does_not_reproduce(
    tmp_path, questions
):
    """--collate runs each submission again (grade_all.rerun) and shows its code cells' outputs from
    that run: a cell that raises now (its saved output claims a result), a cell whose saved output
    differs from what it prints, a cell never run before hand-in are flagged; a cell that reproduces
    its saved output is not."""
    import json

    grade_all = problem_sets.grade_all_module()
    name, qs = "ps3_regression", questions["ps3_regression"]
    nb_path = _notebook(
        tmp_path / "zed.ipynb",
        {
            "q5": [
                ("markdown", "My report: the effective sample size at a large L, computed below."),
                ("code", "print('ESS/L at L=1e5:', ess_of(10**5))"),
                ("code", "print(1 + 1)"),
                ("code", "print(2 * 2)"),
                ("code", "print('never run')"),
            ]
        },
    )
    nb = json.loads(nb_path.read_text())
    saved = ["ESS/L at L=1e5: 0.41 +- 0.02\n", "3\n", "4\n"]
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for cell, text in zip(code, saved):
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": text}]
    nb_path.write_text(json.dumps(nb))
    again = grade_all.rerun(nb_path, name, timeout=60)
    notes = grade_all.rerun_notes(
        grade_all.answers_by_hand(nb_path)["q5"], grade_all.answers_by_hand(again)["q5"]
    )
    assert len(notes) == 3, notes
    assert notes[0].startswith("code cell 1 raises NameError on rerun: name 'ess_of'"), notes
    assert notes[1].startswith("code cell 2 prints something else on rerun") and "'3'" in notes[1]
    assert notes[2].startswith("code cell 4 was not run in the submission"), notes
    (written,) = [
        p
        for p in grade_all.write_collated(
            tmp_path / "graded", name, qs, [nb_path], None, {nb_path.name: again}
        )
        if p.stem.endswith("-q5")
    ]
    text = written.read_text()
    assert "**Rerun: code cell 1 raises NameError" in text, text
    assert "NameError" in text and "(on rerun)" in text, text
    assert "```text\n2\n```" in text and "```text\n4\n```" in text, text
    # beside it, the same as a page for a browser: the Markdown converted, formulas left to MathJax
    page = written.with_suffix(".html").read_text()
    assert "<h2 " in page and "NameError" in page and "MathJax" in page, page[:500]
    assert "<script" not in text, "the Markdown file carries a script"


def test_a_later_collation_of_some_of_the_class_keeps_the_others(tmp_path, questions):
    """--collate on a late submission alone replaces that student's part of each collated file and
    keeps everyone else's (a student's own heading inside an answer does not split it)."""
    grade_all = problem_sets.grade_all_module()
    qs, name = questions["ps3_regression"], "ps3_regression"
    subs = tmp_path / "subs"
    subs.mkdir()
    first = [
        _notebook(subs / "ann.ipynb", {"q3a": [("markdown", "## My answer\n\nAnn's first.")]}),
        _notebook(subs / "bob.ipynb", {"q3a": [("markdown", "Bob's answer.")]}),
    ]
    out = tmp_path / "graded"
    grade_all.write_collated(out, name, qs, first)
    late = [_notebook(subs / "cy.ipynb", {"q3a": [("markdown", "Cy's late answer.")]})]
    (page,) = [p for p in grade_all.write_collated(out, name, qs, late) if p.stem.endswith("-q3a")]
    text = page.read_text()
    assert all(x in text for x in ("Ann's first.", "Bob's answer.", "Cy's late answer.")), text
    assert "3 submissions" in text and text.index("## ann") < text.index("## bob") < text.index(
        "## cy"
    )
    assert "Cy's late answer." in page.with_suffix(".html").read_text()
    again = [_notebook(subs / "ann.ipynb", {"q3a": [("markdown", "Ann's second.")]})]
    grade_all.write_collated(out, name, qs, again)
    text = page.read_text()
    assert "Ann's second." in text and "Ann's first." not in text and "Bob's answer." in text, text


def test_a_collated_page_leaves_formulas_to_mathjax():
    """collated_html: Markdown to HTML with the formulas untouched (an underscore or a star inside
    $...$ is not read as emphasis), MathJax from the kit's copy or the CDN, the title escaped."""
    grade_all = problem_sets.grade_all_module()
    page = grade_all.collated_html("## a.ipynb\n\n$a_1 * b_2$ and **bold**", "set <1>")
    assert "$a_1 * b_2$" in page and "<strong>bold</strong>" in page, page
    assert "<title>set &lt;1&gt;</title>" in page and grade_all.MATHJAX_CDN in page, page


def test_the_report_is_marked_item_by_item_in_its_sheet(tmp_path, questions):
    """grade_all.py's report sheet (report-marks-ps3_regression.csv): a row per reading, the rubric's
    six items in columns. A complete reading gives q5 its sum, two readings their mean, replacing what
    q5 held; an item other than 0, 0.5 or 1, a missing item or one reader twice is named and not
    counted; a report read once at a band's edge or half a point below it is named for a second
    reading; the feedback quotes the items. Rerunning keeps every row."""
    grade_all = problem_sets.grade_all_module()
    name, qs = grade_all.REPORT[0], questions["ps3_regression"]
    report = next(q for q in qs if q["name"] == grade_all.REPORT[1])
    assert float(report["points"]) == len(grade_all.REPORT_ITEMS) * max(grade_all.ITEM_MARKS)
    files = ["ann.ipynb", "ben.ipynb", "cy.ipynb", "dee.ipynb", "eve.ipynb"]
    rows = grade_all.report_sheet(tmp_path, name, files)
    assert [(r["file"], r["reader"]) for r in rows] == [(f, "1") for f in files], rows
    items = grade_all.REPORT_ITEMS
    fill = {
        "ann.ipynb": [1, 1, 1, 1, 0.5, 1],  # 5.5: at the A band's edge
        "ben.ipynb": [1, 1, 1, 0.5, 0.5, 0],  # 4, read twice (4 and 5)
        "cy.ipynb": [1, 0.5, 1, 0, 0.5, 2],  # an item of 2: not counted
        "dee.ipynb": [1, 1, "", 1, 1, 1],  # an item missing: not counted
    }
    for row in rows:
        for item, value in zip(items, fill.get(row["file"], [""] * len(items))):
            row[item] = f"{value}"
    rows.append(dict.fromkeys(grade_all.SHEET, "") | {"file": "ben.ipynb", "reader": "2"})
    rows[-1].update(zip(items, ["1", "1", "1", "1", "0.5", "0.5"]))
    rows[1]["note"] = "talk: d, could not say what a proof would need"  # the graders' column
    sheet = tmp_path / f"report-marks-{name}.csv"
    with sheet.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=grade_all.SHEET)
        writer.writeheader()
        writer.writerows(rows)
    again = grade_all.report_sheet(tmp_path, name, [*files, "fay.ipynb"])  # a late one
    assert again[:-1] == rows and again[-1]["file"] == "fay.ipynb", again
    marks, quoted, problems, second = grade_all.report_marks(again)
    assert marks == {"ann.ipynb": "5.5", "ben.ipynb": "4.5"}, marks
    assert quoted["ben.ipynb"] == (
        "a 1, b 1, c1 1, c2 0.5, c3 0.5, d 0 / a 1, b 1, c1 1, c2 1, c3 0.5, d 0.5"
    ), quoted
    assert len(problems) == 2, problems
    assert problems[0].startswith("cy.ipynb, reader 1: got") and "d 2" in problems[0], problems
    assert "dee.ipynb, reader 1" in problems[1] and "c1 (empty)" in problems[1], problems
    assert second == ["ann.ipynb"], second  # ben was read twice; 4.5 is in no band's reach
    twice = [*again, again[0] | {"a": "0"}]  # ann's reader 1 twice
    assert "ann.ipynb: reader 1 has two rows" in grade_all.report_marks(twice)[2][-1]
    # into the gradebook: the sheet's mark replaces q5's, and the totals follow; a file whose
    # readings were begun but none counts gets q5 emptied (no stale mark), one not begun nothing
    entered = grade_all.report_entries(again, marks)
    assert entered == {f: {"q5": m} for f, m in marks.items()} | {
        "cy.ipynb": {"q5": ""},
        "dee.ipynb": {"q5": ""},
    }, entered
    book = tmp_path / f"grades-{name}.csv"
    auto = {q["name"]: float(q["points"]) for q in qs if not q["manual"]}
    by_hand = {q["name"]: f"{q['points']:g}" for q in qs if q["manual"] and q != report}
    graded = [("ann.ipynb", auto), ("ben.ipynb", auto), ("cy.ipynb", auto)]
    grade_all.merge_gradebook(
        book, qs, graded, {f: by_hand | {"q5": "6"} for f in ("ann.ipynb", "cy.ipynb")}
    )
    merged = {r["file"]: r for r in grade_all.merge_gradebook(book, qs, graded, None, entered)}
    assert merged["cy.ipynb"]["q5"] == "" and merged["cy.ipynb"]["total_awarded"] == ""
    assert merged["ann.ipynb"]["q5"] == "5.5", merged["ann.ipynb"]
    assert float(merged["ann.ipynb"]["manual_awarded"]) == sum(map(float, by_hand.values())) + 5.5
    assert merged["ben.ipynb"]["q5"] == "4.5" and merged["ben.ipynb"]["total_awarded"] == ""
    feedback = tmp_path / "ben.md"
    grade_all.write_feedback(feedback, name, "ben.ipynb", {}, {}, {}, report=quoted["ben.ipynb"])
    assert (
        "item by item (the rubric's (a), (b), (c)'s three and (d), each 0, 0.5 or 1; two "
        in (feedback.read_text())
        and quoted["ben.ipynb"] in feedback.read_text()
    )
    assert "talk" not in feedback.read_text()  # the note column stays the graders'


def test_a_notebook_with_no_report_gets_zeros_in_the_sheet_not_a_missing_mark(tmp_path):
    """A set-3 notebook whose report cell is left as handed out (``no_report``: grade_all.main finds
    no answer there) gets a sheet row of zeros with a note saying so, and q5 = 0, instead of an empty
    row that keeps the gradebook's total waiting for six zeros typed by hand (r67's lecturer); a row
    already in the sheet is left as it is, and a notebook with a report still gets an empty row to
    mark. (The rehearsal checks the same end to end: its blank ben gets the zeros.)"""
    grade_all = problem_sets.grade_all_module()
    name = grade_all.REPORT[0]
    rows = grade_all.report_sheet(tmp_path, name, ["ann.ipynb", "bo.ipynb"], no_report={"bo.ipynb"})
    by_file = {r["file"]: r for r in rows}
    assert all(by_file["ann.ipynb"][i] == "" for i in grade_all.REPORT_ITEMS), rows
    assert all(by_file["bo.ipynb"][i] == "0" for i in grade_all.REPORT_ITEMS), rows
    assert by_file["bo.ipynb"]["note"] == grade_all.NO_REPORT, rows
    marks = grade_all.report_marks(rows)[0]
    assert marks == {"bo.ipynb": "0"}, marks
    # marked since (a report handed in on paper): a later run keeps the row as it is
    rows[1].update(dict.fromkeys(grade_all.REPORT_ITEMS, "1"), note="on paper")
    sheet = tmp_path / f"report-marks-{name}.csv"
    with sheet.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=grade_all.SHEET)
        writer.writeheader()
        writer.writerows(rows)
    again = grade_all.report_sheet(tmp_path, name, ["ann.ipynb", "bo.ipynb"], {"bo.ipynb"})
    assert again == rows and grade_all.report_marks(again)[0] == {"bo.ipynb": "6"}, again


def test_a_missing_check_mark_leaves_the_other_parts_percentages(tmp_path, questions, capsys):
    """A check not marked yet leaves the course grade empty, but the parts whose marks are all in
    still show their percentages (the sets and the report), as computed by hand."""
    _class_of_three(tmp_path, questions)
    _checks(tmp_path, [["alice", 4, 4], ["bob", 2, ""], ["carol", 4, 0]])
    assert final_grades.main([str(tmp_path)]) == 1
    assert "bob: no grade yet: checks.csv: check2" in capsys.readouterr().err
    bob = _grades(tmp_path / "course-grades.csv")["bob"]
    assert bob["course_percent"] == "" and bob["checks_percent"] == "", bob
    assert bob["sets_percent"] == "50.0" and bob["report_percent"] == "50.0", bob


def test_a_hand_mark_that_is_not_a_number_is_named_and_feeds_no_total(questions):
    """A mark typed "0,5" (a decimal comma) is named with what is expected, and the row gets no total,
    as for a mark out of range, instead of stopping the run and leaving the earlier totals."""
    grade_all = problem_sets.grade_all_module()
    qs = questions["ps1_measures"]
    manual = [q for q in qs if q["manual"]]
    row = dict.fromkeys(grade_all.gradebook_header(qs), "")
    row.update(file="eve.ipynb", auto_awarded="3", total_awarded="9", manual_awarded="6")
    row.update({q["name"]: f"{q['points']:g}" for q in manual})
    row[manual[0]["name"]] = "0,5"
    problems = grade_all.mark_problems(row, qs)
    assert problems == [
        f"{manual[0]['name']} = '0,5', expected a number from 0 to {manual[0]['points']:g}, "
        "with a decimal point"
    ], problems
    grade_all.add_up(row, qs)
    assert row["total_awarded"] == "" and row["manual_awarded"] == "", row


def test_gradebooks_saved_with_semicolons_and_decimal_commas_are_read_and_kept_so(
    tmp_path, questions, capsys
):
    """A spreadsheet in a locale whose decimal mark is a comma saves CSV with semicolons and writes
    1,5. grade_all.py merges such a gradebook and writes it back the same way, its marks read as
    numbers; final_grades.py reads it, and a checks.csv saved so, to the same grades as with commas."""
    grade_all = problem_sets.grade_all_module()
    _class_of_three(tmp_path, questions)
    assert final_grades.main([str(tmp_path)]) == 0
    before = _grades(tmp_path / "course-grades.csv")
    for path in tmp_path.glob("*.csv"):
        if path.name == "course-grades.csv":
            continue
        with path.open(newline="") as handle:
            rows = list(csv.reader(handle))
        with path.open("w", newline="") as handle:
            csv.writer(handle, delimiter=";").writerows(
                [
                    [c.replace(".", ",") if re.fullmatch(r"-?\d+\.\d+", c) else c for c in r]
                    for r in rows
                ]
            )
    book = tmp_path / "grades-ps1_measures.csv"
    assert grade_all.delimiter(book) == ";" and "1,5" in book.read_text()
    assert final_grades.main([str(tmp_path)]) == 0, capsys.readouterr().err
    assert _grades(tmp_path / "course-grades.csv") == before
    # grade_all merges it: the hand marks kept, the sums added, semicolons and commas kept
    qs = questions["ps1_measures"]
    auto = {q["name"]: float(q["points"]) for q in qs if not q["manual"]}
    rows = grade_all.merge_gradebook(book, qs, [("alice.ipynb", auto)])
    alice = next(r for r in rows if r["file"] == "alice.ipynb")
    assert float(alice["total_awarded"]) == 10, alice
    text = book.read_text()
    assert text.splitlines()[0].count(";") > 5 and "," not in text.splitlines()[0], text[:200]
    assert ";1,5;" in text, text[:400]
