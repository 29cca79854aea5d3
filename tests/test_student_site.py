"""The student edition of the site (tools/student_site.py, `make student-site`): the built book without the
pages for instructors.

* References to an instructors' page, or to a label defined on one, become their text; other references
  stay as they are; a link to an instructors' page in a deck becomes its text.
* Built from the test build's stage: no instructors' page is built, no page or deck links to one, no page
  names one in its navigation, every relative link and image of every page and deck resolves to a file of
  the edition, and the lessons and labs are all there, with their exercises but no solution; the decks
  carry no presenter note.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import student_site
import yaml
from build_book import labs, lessons

ROOT = Path(__file__).resolve().parents[1]
GONE = {
    "instructor-kit",
    "instructor-problem-sets",
    "sets-for-grades",
    "run-sheets",
    "run-sheets-two-hours",
    "lecturer-guide",
    "adapting-sets",
}


def test_the_instructors_pages_define_the_labels_the_rewrite_removes():
    assert student_site.labels(ROOT) == GONE


def test_references_to_the_instructors_pages_become_their_text():
    text = (
        "See {doc}`instructor` for a plan, {doc}`For instructors <instructor>` and "
        "{doc}`grading`; {ref}`problem set 2 <instructor-problem-sets>`'s question 4, "
        "{ref}`sets-for-grades`; kept: {doc}`01_measure_view`, {ref}`the lab <lab-ch7-query-average>`."
    )
    out = student_site.student_source(text, GONE)
    assert out == (
        "See the instructors' edition of this site for a plan, For instructors and "
        "the instructors' edition of this site; problem set 2's question 4, "
        "the instructors' edition of this site; kept: {doc}`01_measure_view`, "
        "{ref}`the lab <lab-ch7-query-average>`."
    )


def test_blocks_for_instructors_are_dropped_and_the_rest_kept():
    text = "Kept.\n\n% for-instructors\nFor the lecturer: a key.\nMore.\n% end for-instructors\n\nAlso kept.\n"
    assert student_site.drop_instructor_blocks(text) == "Kept.\n\n\nAlso kept.\n"
    assert student_site.drop_instructor_blocks("No block.\n") == "No block.\n"
    # the book's pages that carry such blocks or cells: the intro and the quizzes' answer key
    assert "% for-instructors" in (ROOT / "book" / "intro.md").read_text()
    quizzes = (ROOT / "book" / "quizzes.md").read_text()
    assert '+++ {"tags": ["for-instructors"]}\n\n## Answer key' in quizzes
    assert (
        ":tags: [remove-input, for-instructors]\n\nfrom softlin.book.quiz import answer_key"
        in quizzes
    )


def test_the_student_edition_opens_the_colab_branch_without_solutions():
    config = (ROOT / "_config.yml").read_text()
    student = student_site.student_config(config)
    assert yaml.safe_load(student)["repository"]["branch"] == student_site.STUDENT_BRANCH
    assert yaml.safe_load(student)["html"]["use_repository_button"] is False
    restored = student.replace(student_site.STUDENT_BRANCH, "colab")
    restored = restored.replace("use_repository_button: false", "use_repository_button: true")
    assert restored == config  # nothing else changes
    with pytest.raises(ValueError, match="one repository branch line"):
        student_site.student_config("repository:\n  url: x\n")


def test_a_deck_s_link_to_an_instructors_page_becomes_its_text():
    deck = (
        '<p><a href="../book/01_measure_view.html">The lesson</a> · <a href="../book/labs/01_'
        'measure_view.html">its lab</a> · <a href="../book/instructor.html">for instructors</a></p>'
    )
    assert student_site.unlink(deck) == (
        '<p><a href="../book/01_measure_view.html">The lesson</a> · <a href="../book/labs/01_'
        'measure_view.html">its lab</a></p>'
    )
    index = (
        '<p>The plan that uses them, session by session: <a href="../book/instructor.html">For '
        'instructors</a>.\nThe book: <a href="../index.html">home page</a>.</p>'
    )
    assert student_site.unlink(index) == '<p>The book: <a href="../index.html">home page</a>.</p>'
    other = 'see <a href="../book/grading.html#sets-for-grades">grading</a>'
    assert student_site.unlink(other) == "see grading"


def test_a_deck_loses_its_presenter_notes_and_keeps_its_slides():
    deck = (
        '<section><h2>Exercises</h2><p>Ask.</p>\n<aside class="notes" data-x="1"><p>The answer: '
        "C(u) = 2.12.</p></aside>\n</section>"
    )
    assert student_site.without_notes(deck) == "<section><h2>Exercises</h2><p>Ask.</p>\n</section>"
    # the decks' index, as tools/slides.py writes it, loses its sentence on the speaker view
    import slides

    page = student_site.without_notes(slides.INDEX)
    assert "speaker view" in slides.INDEX and "speaker view" not in page, page


def test_the_table_of_contents_loses_only_the_instructors_pages():
    toc = (ROOT / "_toc.yml").read_text()
    kept = student_site._toc(toc)
    for name in student_site.INSTRUCTOR_PAGES:
        assert f"- file: book/{name}\n" in toc and f"book/{name}\n" not in kept, name
    assert kept.count("- file:") == toc.count("- file:") - len(student_site.INSTRUCTOR_PAGES)


def _links(page: Path) -> list[str]:
    text = page.read_text(errors="replace")
    return re.findall(r"""(?:href|src)=["']([^"']+)["']""", text)


@pytest.mark.book
def test_the_student_site_has_no_instructors_page_and_no_broken_link(built_book, tmp_path):
    rc, log, stage = built_book
    assert rc == 0, log[-3000:]
    html = student_site.build(stage, tmp_path / "student-site")
    names = student_site.INSTRUCTOR_PAGES
    for name in names:
        assert not (html / "book" / f"{name}.html").exists(), name
    for md in [*lessons(ROOT), *labs(ROOT)]:
        page = md.relative_to(ROOT / "book").with_suffix(".html")
        assert (html / "book" / page).is_file(), page
    for md in lessons(ROOT):
        page = (html / "book" / md.with_suffix(".html").name).read_text()
        assert 'class="exercise' in page and 'class="solution' not in page, md.name
    for deck in html.glob("slides/*.html"):
        assert 'class="notes"' not in deck.read_text(), deck.name
    # no solution in what the pages let a student download (the sources of the .ipynb button), nor in
    # the executed notebooks' metadata (papermill's record of its input is the source's name)
    for source in html.glob("_sources/**/*.ipynb"):
        assert "{solution}" not in source.read_text(), source.name
    for executed in (Path(stage) / "book").glob("**/*.ipynb"):
        record = json.loads(executed.read_text())["metadata"].get("papermill", {})
        assert isinstance(record.get("input_path", ""), str), executed.name
    # its Colab links open the branch without solutions
    lesson = (html / "book" / "02_infinite_prompt_limit.html").read_text()
    assert f"/blob/{student_site.STUDENT_BRANCH}/book/" in lesson and "/blob/colab/" not in lesson
    assert "btn-source-repository-button" not in lesson  # no button to the repository's solutions
    # what is for instructors on the pages students keep: the quizzes' answer key, the intro's
    # paragraph on teaching from the book
    quizzes = (html / "book" / "quizzes.html").read_text()
    assert "Answer key" not in quizzes and "For the lecturer" not in quizzes
    assert "show_quiz" in quizzes or "Lesson 7" in quizzes  # the quizzes themselves stay
    intro = (html / "index.html").read_text() + (html / "book" / "intro.html").read_text()
    assert "Teach from it" not in intro and "instructors' page" not in intro
    pages = sorted(html.glob("book/**/*.html")) + sorted(html.glob("slides/*.html"))
    pages.append(html / "index.html")
    assert len(pages) > 20, len(pages)
    broken, named = [], []
    for page in pages:
        text = page.read_text(errors="replace")
        if re.search(r"For instructors|Run sheets|Problem sets and grading", text):
            named.append(page.name)
        for link in _links(page):
            url = urlparse(link)
            if url.scheme or link.startswith(("#", "//")) or not url.path:
                continue
            target = (page.parent / unquote(url.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if Path(url.path).stem in names or not target.exists():
                broken.append(f"{page.relative_to(html)}: {link}")
    assert not broken, f"{len(broken)} broken or instructors' links: {broken[:20]}"
    assert not named, f"pages that still name an instructors' page: {named}"
