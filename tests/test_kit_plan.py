"""The instructor's plan fits the material (book/instructor.md, "A module in three sessions").

Reading time is counted as the plan says, about 35 minutes per 1 000 words of a lesson's prose
(``tools/lesson_metrics.prose_words``; the lessons' read-through gave 60-80 minutes for 1 900 words). A
lesson read "to its statements" counts its prose up to the end of the first ``## `` section that holds a
``{prf:...}`` statement, plus its ``## Summary``. For each session the reading must stay within about two
hours, and the minutes the plan states must be within 20 % of the count. Each session's class minutes
add up to 90, and the plan names the decks, quizzes and problem sets.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from build_book import lessons
from lesson_metrics import prose_words

ROOT = Path(__file__).resolve().parents[1]
PLAN = (ROOT / "book" / "instructor.md").read_text()
MINUTES_PER_1000_WORDS = 35
TWO_HOURS = 125  # "at most about two hours"
# session -> {lesson: "full" or "statements"}, as the plan's table reads
SESSIONS = {
    1: {"01_measure_view": "full", "02_infinite_prompt_limit": "full"},
    2: {"03_concentration": "full", "04_training_stability": "statements"},
    3: {"05_icl_linear_regression": "full", "06_paper_experiment": "statements"},
}
LESSONS = {md.stem: md for md in lessons(ROOT)}


def session_rows() -> list[str]:
    table = PLAN.split("## A module in three sessions", 1)[1].split("\n## ", 1)[0]
    return [line for line in table.splitlines() if re.match(r"^\| \d\. ", line)]


def words_read(md: Path, part: str) -> int:
    text = md.read_text()
    if part == "full":
        return prose_words(text)
    start = text.index("{prf:")
    end = text.find("\n## ", start)
    summary = text[text.index("\n## Summary") :]
    return prose_words(text[: end if end > 0 else len(text)]) + prose_words(summary)


def test_the_plan_has_three_sessions_of_90_minutes_naming_decks_quizzes_and_problem_sets():
    rows = session_rows()
    assert len(rows) == 3, rows
    for n, row in enumerate(rows, 1):
        in_class = row.split("|")[3]
        minutes = [int(m) for m in re.findall(r"(?:^|·)\s*(\d+)\s", in_class)]
        assert sum(minutes) == 90, (n, minutes)
        assert "deck" in in_class and "quiz" in in_class, n
        assert f"problem set {n}" in row, n
    assert "two-week" in PLAN.lower()


@pytest.mark.parametrize("session", sorted(SESSIONS))
def test_the_reading_before_a_session_fits_in_about_two_hours(session):
    stated = [int(m) for m in re.findall(r"\(about (\d+) minutes\)", session_rows()[session - 1])]
    assert len(stated) == 1, session_rows()[session - 1]
    missing = sorted(set(SESSIONS[session]) - set(LESSONS))
    assert not missing, f"session {session}: the lessons {missing} are not in _toc.yml yet"
    words = {s: words_read(LESSONS[s], part) for s, part in SESSIONS[session].items()}
    minutes = sum(words.values()) * MINUTES_PER_1000_WORDS / 1000
    assert minutes <= TWO_HOURS, (
        f"session {session}: {minutes:.0f} minutes of reading ({words} words) is more than two hours"
    )
    assert abs(stated[0] - minutes) <= 0.2 * minutes, (
        f"session {session}: the plan says about {stated[0]} minutes, the lessons take about "
        f"{minutes:.0f} ({words} words)"
    )
