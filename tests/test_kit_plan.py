"""The instructor's plan fits the material (book/instructor.md, "The plan", and book/run_sheets.md).

The plan is given once: a table on the instructor page (a row per session) and, minute by minute, a run
sheet per session. Reading time is counted as the plan says, about 35 minutes per 1 000 words of a
lesson's prose (``tools/lesson_metrics.prose_words``; the lessons' read-through gave 60-80 minutes for
1 900 words). Students read whole lessons, two before each session. For each session the reading must
stay within about two hours (two hours and at most 10 % more: lessons 3 and 4 together take about 130
minutes), and the minutes the plan states must be within 20 % of the count. Each session's class minutes
add up to 90, with at least 10 minutes of slack, and the plan names the decks, quizzes and problem sets.
Each deck gets 3 to 4 minutes a slide (the slides of its outline, ``book/slides/NN_name.yml``, after the
title slide: time to ask for a prediction and discuss it), its run sheet rows show every slide but those
its outline marks as home reading (``home: true``: read with the lesson, named in the sheet's "Before"),
and each of the seven decks has its slot.
"""

from __future__ import annotations

import re
from collections import defaultdict
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


def plan_rows() -> list[str]:
    """The rows of the plan's table on the instructor page, one per session."""
    table = PLAN.split("\n## The plan\n", 1)[1].split("\n| session |", 1)[1].split("\n\n", 1)[0]
    return [line for line in table.splitlines() if re.match(r"^\| \d \|", line)]


def sheet_texts() -> list[str]:
    """The run sheets' text, one per session (the section after the last sheet left out)."""
    sheets = RUN_SHEETS.split("\n## Session ")[1:]
    return [sheet.split("\n## ", 1)[0] for sheet in sheets]


def run_sheets() -> list[list[tuple[str, int, str, str]]]:
    """The run sheets' rows, (clock, minutes, what, open), one list per session."""
    rows = []
    for sheet in sheet_texts():
        found = re.findall(r"^\| (\d:\d\d) \| (\d+) \| ([^|]+) \|([^|]*)\|", sheet, re.M)
        rows.append([(clock, int(m), what.strip(), o.strip()) for clock, m, what, o in found])
    return rows


def test_the_plan_has_three_sessions_of_90_minutes_with_slack_naming_decks_quizzes_and_problem_sets():
    sheets, rows = run_sheets(), plan_rows()
    assert len(sheets) == 3 and len(rows) == 3, (len(sheets), rows)
    for n, (sheet, row) in enumerate(zip(sheets, rows), 1):
        assert sum(m for _, m, _, _ in sheet) == 90, (n, sheet)
        slack = [m for _, m, what, _ in sheet if what.startswith("Slack")]
        assert slack and slack[0] >= MIN_SLACK, (
            f"session {n}: {slack or 'no'} minutes of slack; keep at least {MIN_SLACK}"
        )
        assert any(what.startswith("Deck ") for _, _, what, _ in sheet), n
        assert any(re.match(r"Quiz(zes)? \d", what) for _, _, what, _ in sheet), n
        assert f"problem set {n} (" in row, n
    assert "two-week" in PLAN.lower()


@pytest.mark.parametrize("session", sorted(SESSIONS))
def test_the_reading_before_a_session_fits_in_about_two_hours(session):
    before = sheet_texts()[session - 1].split("**Before.**", 1)[1].split("\n\n", 1)[0]
    row = plan_rows()[session - 1].split("|")[2]
    stated = [int(m) for m in re.findall(r"\(about (\d+) minutes\)", before)]
    assert len(stated) == 1, before
    assert f"(about {stated[0]} minutes)" in row, (session, row, stated)
    missing = sorted(set(SESSIONS[session]) - set(LESSONS))
    assert not missing, f"session {session}: the lessons {missing} are not in _toc.yml yet"
    for text in (before, row):
        assert all(f"<{s}>`" in text for s in SESSIONS[session]), (session, text)
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
    """A deck's minutes are those of the run sheet rows that show it ("Deck N: ..."), and the rows
    (an in-class exercise's included) show its slides 1 to the last of its outline; the last deck, lesson 7's, is read with that lesson
    after the last session, but for its open questions, which launch the report."""
    stems = [md.stem for md in lessons(ROOT)]  # deck N is lesson N's
    minutes, shown = defaultdict(int), defaultdict(set)
    for sheet in run_sheets():
        for _, m, what, opened in sheet:
            deck = re.match(r"Deck (\d)\b", what)
            if deck:
                minutes[int(deck[1])] += m
            # "deck 3, slides 1 to 3 and 5 to 8", "deck 5, slides 1 to 6, 8 and 9": the exercises' rows too
            for n, ranges in re.findall(r"deck (\d), slides? (\d+(?:(?: to|,| and) \d+)*)", opened):
                for a, b in re.findall(r"(\d+)(?: to (\d+))?", ranges):
                    shown[int(n)] |= set(range(int(a), int(b or a) + 1))
    last = len(stems)
    assert sorted(minutes) == list(range(1, last + 1)), sorted(minutes)
    for n in range(1, last):
        outline = yaml.safe_load((ROOT / "book" / "slides" / f"{stems[n - 1]}.yml").read_text())
        home = {k for k, slide in enumerate(outline["slides"], 1) if slide.get("home")}
        expected = set(range(1, len(outline["slides"]) + 1)) - home
        assert shown[n] == expected, (
            f"deck {n}: the run sheets show slides {sorted(shown[n])}; its outline has "
            f"{len(outline['slides'])}, of which {sorted(home)} are home reading (`home: true`)"
        )
        low, high = (m * len(expected) for m in MINUTES_PER_SLIDE)
        assert low <= minutes[n] <= high, (
            f"deck {n}: {minutes[n]} minutes for {len(expected)} slides shown; 3 to 4 a slide is "
            f"{low}-{high}"
        )
    assert any(
        what.startswith(f"Deck {last}: its open questions") for _, _, what, _ in run_sheets()[-1]
    ), f"the last session does not show deck {last}'s open questions"


def test_home_reading_slides_are_named_where_students_read_them():
    """A slide the 90-minute plan steps past (``home: true`` in its outline) is read at home: the "Before"
    of its session's run sheet names it, by its title or, for a figure, by its deck's figures, and
    its notes say so first (tools/slides.py). Only sessions 2 and 3, the full ones, have such slides."""
    stems = [md.stem for md in lessons(ROOT)]
    sheets = sheet_texts()
    found = 0
    for n, stem in enumerate(stems, 1):
        outline = yaml.safe_load((ROOT / "book" / "slides" / f"{stem}.yml").read_text())
        for k, slide in enumerate(outline["slides"], 1):
            if not slide.get("home"):
                continue
            found += 1
            session = next(s for s, read in SESSIONS.items() if stem in read)
            assert session in (2, 3), (stem, k, session)
            before = sheets[session - 1].split("**Before.**", 1)[1].split("\n\n", 1)[0]
            named = f'"{slide["title"]}"' in before or (
                "figure" in slide and f"deck {n}'s two figures" in before
            )
            assert named, (
                f"deck {n}, slide {k} ({slide['title']!r}) is home reading, but run sheet {session}'s "
                f"'Before' does not name it: {before!r}"
            )
    assert found, (
        "no slide is home reading; then say so on the run sheets' 'How the minutes were set'"
    )


def test_each_run_sheet_is_a_clock_of_90_minutes():
    """A run sheet's clock starts at 0:00 and adds up its rows' minutes; the session ends at 1:30."""
    sheets = run_sheets()
    assert len(sheets) == 3, [len(s) for s in sheets]
    for n, sheet in enumerate(sheets, 1):
        clock = 0
        for at, minutes, what, _ in sheet:
            h, m = map(int, at.split(":"))
            assert 60 * h + m == clock, (n, at, what, clock)
            clock += minutes
        assert clock == 90, n


def test_the_plan_table_is_the_run_sheets():
    """The plan's row for a session names the lessons read, the decks, the quizzes and the exercise of
    that session's run sheet, and its problem set."""
    rows = plan_rows()
    assert len(rows) == 3, rows
    for n, (row, sheet) in enumerate(zip(rows, run_sheets(), strict=True), 1):
        shown = " · ".join(what for _, _, what, _ in sheet)
        for exercise in re.findall(r"Exercise \d\.\d", shown):
            assert exercise in row, f"session {n}: {exercise} of the run sheet is not in the plan"
        for deck in re.findall(r"\bDeck (\d)", shown):
            assert re.search(rf"decks? [\d, and]*\b{deck}\b", row), f"session {n}: deck {deck}"
        for quiz in re.findall(r"\bQuiz(?:zes)? (\d)(?: and (\d))?", shown):
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
    for n, sheet in enumerate(sheet_texts(), 1):
        for part in ("**Before.**", "**Open.**", "**If it runs late.**", "**Announce.**"):
            assert part in sheet, f"run sheet {n} has no {part}"
        before = sheet.split("**Before.**", 1)[1].split("\n\n", 1)[0]
        assert all(f"<{stem}>`" in before for stem in SESSIONS[n]), (n, before)
        late = sheet.split("**If it runs late.**", 1)[1].split("\n\n", 1)[0]
        cut = re.findall(r'"([^"]+)"', late)
        assert cut, f"run sheet {n}: 'If it runs late' names no slide to cut"
        for title in cut:
            assert title in all_titles, f"run sheet {n}: no deck has a slide {title!r}"
        announce = sheet.split("**Announce.**", 1)[1].split("\n\n", 1)[0]
        assert f"roblem set {n}" in announce, (n, announce)


WORDS = {5: "five", 6: "six", 8: "eight", 9: "nine", 10: "ten", 12: "twelve", 15: "fifteen"}


def _says(notes: str, minutes: int) -> bool:
    """Whether ``notes`` give ``minutes`` ("18 minutes", "ten minutes", "Eight minutes")."""
    return bool(
        re.search(rf"\b{minutes} minutes", notes)
        or (minutes in WORDS and re.search(rf"\b{WORDS[minutes]} minutes", notes, re.I))
    )


def test_the_slides_notes_give_the_run_sheets_minutes():
    """A slide whose run sheet row is an in-class exercise or deck 7's launch of the report: its
    presenter notes state the minutes of that row, so the lectern sheet and the speaker view agree."""
    stems = [md.stem for md in lessons(ROOT)]
    for n, sheet in enumerate(run_sheets(), 1):
        for _, minutes, what, opened in sheet:
            exercise = re.match(r'Exercise \d\.\d, "([^"]+)"', what)
            launch = what.startswith(f"Deck {len(stems)}: its open questions")
            if not (exercise or launch):
                continue
            deck, slide = map(int, re.search(r"deck (\d), slide (\d+)", opened).groups())
            outline = yaml.safe_load(
                (ROOT / "book" / "slides" / f"{stems[deck - 1]}.yml").read_text()
            )
            notes = outline["slides"][slide - 1].get("notes", "")
            if exercise:  # the exercise's paragraph of the notes
                notes = notes.split(f"**{exercise[1]}**", 1)[-1].split("\n\n", 1)[0]
            assert _says(notes, minutes), (
                f"session {n}: the run sheet gives {what[:40]!r} {minutes} minutes; deck {deck}, "
                f"slide {slide}'s notes say otherwise: {notes[:160]!r}"
            )


TWO_HOURS_SHEETS = (ROOT / "book" / "run_sheets_two_hours.md").read_text()


def test_each_two_hour_sheet_is_the_90_minute_sheet_with_two_blocks_of_15_minutes_added():
    """A two-hour run sheet (book/run_sheets_two_hours.md) keeps its 90-minute sheet's rows, each
    with its minutes, text and slides and in its order, adds two rows of 15 minutes marked
    "**Added.**", and its clock adds up to 2:00."""
    sheets = TWO_HOURS_SHEETS.split("\n## Session ")[1:]
    assert len(sheets) == 3, len(sheets)
    for n, (text, short) in enumerate(zip(sheets, run_sheets(), strict=True), 1):
        found = re.findall(r"^\| (\d:\d\d) \| (\d+) \| ([^|]+) \|([^|]*)\|", text, re.M)
        rows = [(clock, int(m), what.strip(), o.strip()) for clock, m, what, o in found]
        clock = 0
        for at, minutes, what, _ in rows:
            h, m = map(int, at.split(":"))
            assert 60 * h + m == clock, (n, at, what, clock)
            clock += minutes
        assert clock == 120, (n, clock)
        added = [r for r in rows if r[2].startswith("**Added.**")]
        kept = [r[1:] for r in rows if not r[2].startswith("**Added.**")]
        assert len(added) == 2 and all(r[1] == 15 for r in added), (n, added)
        assert kept == [r[1:] for r in short], (
            f"session {n}: the two-hour sheet's other rows are not the 90-minute sheet's"
        )


def test_each_two_hour_sheet_stands_alone():
    """A two-hour sheet prints and is used alone (r54's lecturer): its "Before", "Open" and "Announce"
    are its 90-minute sheet's, word for word, and its "If it runs late" first drops an added block,
    naming it as the sheet's added rows do."""
    sheets = TWO_HOURS_SHEETS.split("\n## Session ")[1:]
    for n, (text, short) in enumerate(zip(sheets, sheet_texts(), strict=True), 1):
        for part in ("**Before.**", "**Open.**", "**Announce.**"):
            assert part in text, f"two-hour sheet {n} has no {part}"
            mine = text.split(part, 1)[1].split("\n\n", 1)[0]
            theirs = short.split(part, 1)[1].split("\n\n", 1)[0]
            assert mine == theirs, f"two-hour sheet {n}: its {part} is not the 90-minute sheet's"
        late = text.split("**If it runs late.**", 1)[1].split("\n\n", 1)[0]
        added = re.findall(r"^\| \d:\d\d \| 15 \| \*\*Added\.\*\* ([^|]+)\|", text, re.M)
        first = late.split(";", 1)[0].lower()
        names = [
            word.lower()
            for row in added
            for word in re.findall(r"Exercise \d\.\d|\blab\b|step \d", row, re.I)
        ]
        assert "added" in first and any(name in first for name in names), (
            f"two-hour sheet {n}: its 'If it runs late' does not drop an added block first: {late!r}"
        )
