"""Lessons and labs (DESIGN.md section 4): every lesson ``book/NN_name.md`` has its lab
``book/labs/NN_name.md`` in the table of contents, each links the other, and the lessons keep to their
budgets (``tools/lesson_metrics.py`` measures them): at most 2 500 prose words per lesson and 12 000 in
all, checks at most 10 % of the lessons' visible code lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from build_book import ROOT, lab_of, labs, lessons, page_name
from lesson_metrics import (
    CHECK_SHARE,
    WORDS_IN_ALL,
    WORDS_PER_LESSON,
    _check_lines,
    measure,
    prose_words,
)

LESSONS = lessons(ROOT)


@pytest.mark.parametrize("md", LESSONS, ids=page_name)
def test_every_lesson_has_its_lab_and_they_link_each_other(md):
    lab = lab_of(md)
    assert lab in labs(ROOT), f"{page_name(md)}: its lab {page_name(lab)} is not in _toc.yml"
    assert f"{{doc}}`labs/{md.stem}`" in md.read_text() or f"<labs/{md.stem}>`" in md.read_text(), (
        f"{page_name(md)} does not link its lab ({{doc}}`labs/{md.stem}`)"
    )
    assert f"../{md.stem}" in lab.read_text(), (
        f"{page_name(lab)} does not link its lesson ({{doc}}`../{md.stem}`)"
    )


def test_every_lab_belongs_to_a_lesson():
    orphans = [page_name(lab) for lab in labs(ROOT) if (ROOT / "book" / lab.name) not in LESSONS]
    assert not orphans, f"labs without a lesson: {orphans}"


@pytest.mark.parametrize("md", LESSONS, ids=page_name)
def test_a_lesson_is_short(md):
    words = measure(md).prose_words
    assert words <= WORDS_PER_LESSON, (
        f"{page_name(md)}: {words} prose words, more than {WORDS_PER_LESSON}: move what a second "
        f"reading wants to {page_name(lab_of(md))} (folding does not shorten a lesson)"
    )


def test_the_lessons_together_are_a_working_day():
    rows = [measure(md) for md in LESSONS]
    words = sum(r.prose_words for r in rows)
    assert words <= WORDS_IN_ALL, (
        f"the lessons hold {words} prose words, more than {WORDS_IN_ALL}: "
        + ", ".join(f"{r.page} {r.prose_words}" for r in rows)
    )


def test_checks_are_a_small_share_of_the_lessons_code():
    rows = [measure(md) for md in LESSONS]
    code = sum(r.visible_code_lines for r in rows)
    checks = sum(r.check_lines for r in rows)
    assert checks <= CHECK_SHARE * code, (
        f"checks are {checks} of the lessons' {code} visible code lines, more than "
        f"{CHECK_SHARE:.0%}: "
        + ", ".join(f"{r.page} {r.check_lines}/{r.visible_code_lines}" for r in rows)
    )


def test_the_metrics_count_what_they_say(tmp_path):
    assert prose_words("Two words\n\n```{code-cell} ipython3\nx = 1\n```\n") == 2
    assert prose_words("a $x^2$ b\n$$\ny = 1\n$$\n") == 3  # inline math is one word
    solution = "Ask.\n\n````{solution} ex-a\n:class: dropdown\n\nmany words here\n````\n"
    assert prose_words(solution) == 1
    code = "x = 1\nassert x == 1, (\n    x,\n)\ncheck_close(x, 1,\n            what='x')\n"
    assert _check_lines(code) == 5
    page = Path(__file__).resolve().parent / "fixtures" / "01_explorer_and_exercises.md"
    assert measure(page).visible_code_lines > 0
