"""The instructor's plan fits the material (book/instructor.md, "A module in three sessions").

Reading time is counted as the plan says, about 35 minutes per 1 000 words of a lesson's prose
(``tools/lesson_metrics.prose_words``; the lessons' read-through gave 60-80 minutes for 1 900 words).
Students read whole lessons, two before each session (no "read up to the statement" instructions: the
lessons are short enough to be read whole). For each session the reading must stay within about two
hours (two hours and at most 10 % more: lessons 3 and 4 together take about 130 minutes), and the
minutes the plan states must be within 20 % of the count. Each session's class minutes
add up to 90, with at least 10 minutes of slack, and the plan names the decks, quizzes and problem
sets. Each deck gets 3 to 4 minutes a
slide (the slides of its outline, ``book/slides/NN_name.yml``, after the title slide: time to ask for a
prediction and discuss it), says how many slides it has, and each of the seven decks has its slot.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from build_book import lessons
from lesson_metrics import prose_words

ROOT = Path(__file__).resolve().parents[1]
PLAN = (ROOT / "book" / "instructor.md").read_text()
RUN_SHEETS = (ROOT / "book" / "run_sheets.md").read_text()
MINUTES_PER_1000_WORDS = 35
TWO_HOURS = 132  # "at most about two hours": 120 minutes, and at most 10 % more
# session -> the lessons read, whole, before it, as the plan's table reads
SESSIONS = {
    1: ("01_measure_view", "02_infinite_prompt_limit"),
    2: ("03_concentration", "04_training_stability"),
    3: ("05_icl_linear_regression", "06_paper_experiment"),
}
LESSONS = {md.stem: md for md in lessons(ROOT)}
MINUTES_PER_SLIDE = (3, 4)  # with a prediction asked and discussed
MIN_SLACK = 10  # minutes of each session left for questions and the slide that runs long


def session_rows() -> list[str]:
    table = PLAN.split("## A module in three sessions", 1)[1].split("\n## ", 1)[0]
    return [line for line in table.splitlines() if re.match(r"^\| \d\. ", line)]


def test_the_plan_has_three_sessions_of_90_minutes_with_slack_naming_decks_quizzes_and_problem_sets():
    rows = session_rows()
    assert len(rows) == 3, rows
    for n, row in enumerate(rows, 1):
        in_class = row.split("|")[3]
        minutes = [int(m) for m in re.findall(r"(?:^|·)\s*(\d+)\s", in_class)]
        assert sum(minutes) == 90, (n, minutes)
        assert "deck" in in_class and "quiz" in in_class, n
        slack = [int(m) for m in re.findall(r"(?:^|·)\s*(\d+) slack\b", in_class)]
        assert slack and slack[0] >= MIN_SLACK, (
            f"session {n}: {slack or 'no'} minutes of slack; keep at least {MIN_SLACK}"
        )
        assert f"problem set {n}" in row, n
    assert "two-week" in PLAN.lower()


@pytest.mark.parametrize("session", sorted(SESSIONS))
def test_the_reading_before_a_session_fits_in_about_two_hours(session):
    before = session_rows()[session - 1].split("|")[2]
    stated = [int(m) for m in re.findall(r"\(about (\d+) minutes\)", before)]
    assert len(stated) == 1, session_rows()[session - 1]
    missing = sorted(set(SESSIONS[session]) - set(LESSONS))
    assert not missing, f"session {session}: the lessons {missing} are not in _toc.yml yet"
    assert all(f"<{s}>`" in before for s in SESSIONS[session]), (session, before)
    words = {s: prose_words(LESSONS[s].read_text()) for s in SESSIONS[session]}
    minutes = sum(words.values()) * MINUTES_PER_1000_WORDS / 1000
    assert minutes <= TWO_HOURS, (
        f"session {session}: {minutes:.0f} minutes of reading ({words} words) is more than two hours"
    )
    assert abs(stated[0] - minutes) <= 0.2 * minutes, (
        f"session {session}: the plan says about {stated[0]} minutes, the lessons take about "
        f"{minutes:.0f} ({words} words)"
    )


def test_each_deck_gets_3_to_4_minutes_a_slide():
    decks = [md.stem for md in lessons(ROOT)]  # deck N is lesson N's
    seen = []
    for row in session_rows():
        in_class = row.split("|")[3]
        for minutes, n, stated in re.findall(r"(?:^|·)\s*(\d+) deck (\d) \((\d+) slides", in_class):
            stem = decks[int(n) - 1]
            slides = len(
                yaml.safe_load((ROOT / "book" / "slides" / f"{stem}.yml").read_text())["slides"]
            )
            assert int(stated) == slides, (
                f"deck {n}: the plan says {stated} slides, the outline has {slides}"
            )
            low, high = (m * slides for m in MINUTES_PER_SLIDE)
            assert low <= int(minutes) <= high, (
                f"deck {n}: {minutes} minutes for {slides} slides; 3 to 4 a slide is {low}-{high}"
            )
            seen.append(int(n))
    # the last deck, lesson 7's, is read with that lesson after the last session, but for its open
    # questions, which launch the report: the last session shows them
    last = len(decks)
    assert sorted(seen) == list(range(1, last)), seen
    assert re.search(
        rf"(?:^|·)\s*\d+ deck {last}'s open questions", session_rows()[-1].split("|")[3]
    ), f"the last session does not show deck {last}'s open questions"


def run_sheets() -> list[list[tuple[str, int, str]]]:
    """The run sheets' rows, (clock, minutes, what), one list per session."""
    sheets = RUN_SHEETS.split("\n## Session ")[1:]
    rows = []
    for sheet in sheets:
        found = re.findall(r"^\| (\d:\d\d) \| (\d+) \| ([^|]+) \|", sheet, re.M)
        rows.append([(clock, int(m), what.strip()) for clock, m, what in found])
    return rows


def test_each_run_sheet_is_its_session_of_the_plan_minute_by_minute():
    """A run sheet per session: its minutes are the plan's items, in order; its clock starts at 0:00 and
    adds them up, and the session ends at 1:30; its decks and exercise are the plan's."""
    sheets = run_sheets()
    assert len(sheets) == 3, [len(s) for s in sheets]
    for n, (row, sheet) in enumerate(zip(session_rows(), sheets), 1):
        in_class = row.split("|")[3]
        planned = [int(m) for m in re.findall(r"(?:^|·)\s*(\d+)\s", in_class)]
        assert [m for _, m, _ in sheet] == planned, (n, sheet, planned)
        clock = 0
        for at, minutes, what in sheet:
            h, m = map(int, at.split(":"))
            assert 60 * h + m == clock, (n, at, what, clock)
            clock += minutes
        assert clock == 90, n
        for deck in re.findall(r"(?:^|·)\s*\d+ deck (\d)", in_class):
            assert any(what.startswith(f"Deck {deck}:") for _, _, what in sheet), (n, deck)


def test_the_plan_at_a_glance_is_the_plan():
    """The one-screen table at the top of the instructor page names, per session, the lessons read, the
    decks, the quizzes, the exercise and the problem set of the full plan's row."""
    glance = PLAN.split("## At a glance", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in glance.splitlines() if re.match(r"^\| \d \|", line)]
    assert len(rows) == 3, rows
    numbers = {stem: n for n, stem in enumerate(LESSONS, 1)}
    for n, (row, full) in enumerate(zip(rows, session_rows(), strict=True), 1):
        read = [numbers[stem] for stem in SESSIONS[n]]
        assert f"lessons {read[0]} and {read[1]}" in row, (n, row)
        for exercise in re.findall(r"Exercise \d\.\d", full):
            assert exercise in row, f"session {n}: {exercise} of the plan is not at a glance"
        for deck in re.findall(r"\bdeck (\d)", full.split("|")[3]):
            assert re.search(rf"decks? [\d, and]*\b{deck}\b", row), f"session {n}: deck {deck}"
        for quiz in re.findall(r"\bquiz(?:zes)? (\d)(?: and (\d))?", full.split("|")[3]):
            for q in filter(None, quiz):
                assert re.search(rf"quiz(?:zes)? [\d, and]*\b{q}\b", row), f"session {n}: quiz {q}"
        assert f"problem set {n}" in row, n


def test_each_run_sheet_says_what_to_read_open_cut_and_announce():
    """A sheet per session, to print on one page: what students read (the plan's lessons), what to open,
    what to cut when the session runs late (slides that the decks' outlines have, by title) and what to
    announce (the session's problem set)."""
    titles = {
        stem: {
            s["title"]
            for s in yaml.safe_load((ROOT / "book" / "slides" / f"{stem}.yml").read_text())[
                "slides"
            ]
        }
        for stem in LESSONS
    }
    all_titles = set().union(*titles.values())
    numbers = {stem: n for n, stem in enumerate(LESSONS, 1)}
    for n, sheet in enumerate(RUN_SHEETS.split("\n## Session ")[1:], 1):
        for part in ("**Before.**", "**Open.**", "**If it runs late.**", "**Announce.**"):
            assert part in sheet, f"run sheet {n} has no {part}"
        before = sheet.split("**Before.**", 1)[1].split("\n\n", 1)[0]
        read = [numbers[stem] for stem in SESSIONS[n]]
        assert f"lessons {read[0]} and {read[1]}" in before, (n, before)
        late = sheet.split("**If it runs late.**", 1)[1].split("\n\n", 1)[0]
        cut = re.findall(r'"([^"]+)"', late)
        assert cut, f"run sheet {n}: 'If it runs late' names no slide to cut"
        for title in cut:
            assert title in all_titles, f"run sheet {n}: no deck has a slide {title!r}"
        announce = sheet.split("**Announce.**", 1)[1].split("\n\n", 1)[0]
        assert f"roblem set {n}" in announce, (n, announce)
