"""The syllabus (book/syllabus.md): the course on one printed page, for students, agreeing with the plan.

* Its schedule reads the same lessons before each session as the instructor page's plan, with the same
  reading minutes, and names the same in-class exercise; its problem sets are due when the plan says.
* Its weights are those of the default grading scheme (book/grading.md), and add up to 100 %.
* It is linked from the intro and the instructor page, kept in the student edition, and printed by the
  handouts (``syllabus.pdf``) on one A4 page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "book" / "syllabus.md").read_text()


def _rows(text: str, head: str) -> list[list[str]]:
    """The body rows of the Markdown table whose header row starts with ``| head |``."""
    table = text.split(f"\n| {head} |", 1)[1].split("\n\n", 1)[0]
    return [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in table.splitlines()[2:]
        if line.startswith("|")
    ]


def test_the_schedule_agrees_with_the_plan():
    from test_kit_plan import plan_rows

    schedule = _rows(PAGE, "session")
    plan = [[c.strip() for c in row.strip().strip("|").split("|")] for row in plan_rows()]
    assert [r[0] for r in schedule] == ["1", "2", "3", "after"], schedule
    for n, (ours, theirs) in enumerate(zip(schedule, plan, strict=False), 1):
        minutes = re.search(r"about (\d+) minutes", ours[1])
        assert minutes and f"about {minutes[1]} minutes" in theirs[1], (n, ours[1], theirs[1])
        lessons = re.findall(r"\d", ours[1].split("(")[0])
        assert all(f"<0{k}_" in theirs[1] for k in lessons), (n, lessons, theirs[1])
        exercise = re.search(r"Exercise \d\.\d", ours[2])
        assert exercise and exercise[0] == theirs[3], (n, ours[2], theirs[3])
    due = [r[3] for r in schedule]
    assert due[:3] == ["", "problem set 1", "problem set 2"], due  # due at the next session
    assert "set 3 and the report, two weeks after session 3" in due[3], due
    assert "due in two weeks" in plan[2][4], plan[2][4]


def test_the_weights_are_the_default_grading_schemes():
    ours = [int(re.match(r"(\d+) %", r[1])[1]) for r in _rows(PAGE, "part")]
    grading = (ROOT / "book" / "grading.md").read_text()
    scheme = grading.split("## A default grading scheme", 1)[1]
    theirs = [int(re.match(r"(\d+) %", r[1])[1]) for r in _rows(scheme, "part")]
    assert ours == theirs and sum(ours) == 100, (ours, theirs)


def test_the_syllabus_is_linked_and_kept_for_students():
    from student_site import INSTRUCTOR_PAGES

    for page in ("intro", "instructor", "lecturer_guide"):
        assert "{doc}`syllabus`" in (ROOT / "book" / f"{page}.md").read_text(), page
    assert "syllabus" not in INSTRUCTOR_PAGES
    assert "- file: book/syllabus" in (ROOT / "_toc.yml").read_text()


@pytest.mark.browser
@pytest.mark.book
def test_the_syllabus_prints_on_one_page(built_book, tmp_path):
    from conftest import chromium_path
    from handouts import print_pages
    from test_kit_chain import pdf_pages

    chromium_path()
    rc, log, stage = built_book
    assert rc == 0, log[-3000:]
    (printed,) = print_pages(
        stage / "_build" / "html", ["syllabus"], tmp_path, {"syllabus": "Syllabus"}
    )
    pages = pdf_pages(printed["pdf"].read_bytes())
    assert pages == 1, f"the syllabus prints on {pages} pages; one expected"
