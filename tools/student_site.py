#!/usr/bin/env python
"""The student edition of the site (`make student-site`): the built book without the instructors' pages.

    python tools/student_site.py     # -> _build/student-site/_build/html/index.html

The site that ``make book`` builds is the whole book: lessons, labs, the chain of results, the quizzes,
and the pages for instructors (the plan, the run sheets, the grading reference, how to rebuild the kit),
which say where the sets' model answers live and how the written check is made. A lecturer who hands
students a site of their own gives them this edition instead: the same executed pages, built from the same
stage (``_build/stage``, no chapter runs again), with :data:`INSTRUCTOR_PAGES` left out of the table of
contents and the build.

* **Sources.** The stage's sources are copied to ``_build/student-site`` (its ``_build`` folder apart);
  the table of contents loses the instructors' pages; every reference to one of them or to a label
  defined on one (``{doc}`For instructors <instructor>```, ``{ref}`problem set 2
  <instructor-problem-sets>```) becomes its text (:func:`student_source`), so the build, run with
  warnings as errors like the book's, has no dangling reference.
* **No solutions.** Like the student notebooks (``make students``), the edition leaves out every
  ``{solution}`` block (``student_notebooks.strip_solutions``, one implementation): the in-class
  exercises are worked in class, and the numerical ones still check an answer on the page.
* **For instructors only.** A notebook cell tagged ``for-instructors`` (the quizzes' answer key) and
  the Markdown between the comment lines ``% for-instructors`` and ``% end for-instructors`` (the
  intro's paragraph on teaching from the book) are left out (:func:`drop_instructor_blocks`).
* **Colab.** Its badges and launch button open the ``colab-student`` branch (:func:`student_config`),
  the Colab notebooks without solutions, which the Pages workflow publishes beside ``colab``.
* **Slides.** The decks are copied from the book's site (they are drawn from the same executed lessons),
  without their presenter notes (:func:`without_notes`: they hold the exercises' answers and the
  timings) and with each link to an instructors' page reduced to its text (:func:`unlink`).
* **Not copied**: the problem sets' student versions (hand them out with the sets) and the built kit.

tests/test_student_site.py checks the rewriting, and builds the edition from the test build's stage: no
instructors' page, no link to one, no solution, no presenter note, every internal link resolving.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / "_build" / "stage"
OUT = ROOT / "_build" / "student-site"
#: The pages for instructors (book/NAME.md), left out of the student edition.
INSTRUCTOR_PAGES = (
    "instructor",
    "lecturer_guide",
    "run_sheets",
    "run_sheets_two_hours",
    "grading",
    "adapting",
)


def labels(stage: Path = STAGE) -> set[str]:
    """The MyST labels, ``(label)=``, defined on the instructors' pages of ``stage``."""
    found: set[str] = set()
    for name in INSTRUCTOR_PAGES:
        page = stage / "book" / f"{name}.md"
        if not page.exists():
            raise FileNotFoundError(
                f"{page}: the stage has no page {name!r}; run `make book` first"
            )
        found |= set(re.findall(r"^\(([\w-]+)\)=", page.read_text(), re.M))
    return found


def student_source(text: str, gone_labels: set[str]) -> str:
    """``text`` (a page's MyST, or a notebook's JSON) with every reference to an instructors' page, or to a
    label in ``gone_labels``, reduced to its text: ``{doc}`Title <instructor>``` becomes ``Title``, a bare
    ``{doc}`instructor``` becomes "the instructors' edition of this site", and ``{ref}`text <label>``` ``text``."""
    pages = "|".join(map(re.escape, INSTRUCTOR_PAGES))
    text = re.sub(rf"\{{doc\}}`([^`<]+?)\s*<(?:\.\./)?(?:{pages})>`", r"\1", text)
    text = re.sub(
        rf"\{{doc\}}`(?:\.\./)?(?:{pages})`", "the instructors' edition of this site", text
    )
    if gone_labels:
        names = "|".join(map(re.escape, sorted(gone_labels)))
        text = re.sub(rf"\{{ref\}}`([^`<]+?)\s*<(?:{names})>`", r"\1", text)
        text = re.sub(rf"\{{ref\}}`(?:{names})`", "the instructors' edition of this site", text)
    return text


#: A tag that drops a notebook cell from the student edition, and the MyST comment lines that bracket
#: Markdown the edition leaves out (in a page, or in a notebook's Markdown cell).
FOR_INSTRUCTORS = "for-instructors"
_BLOCK = re.compile(
    r"^% for-instructors[ \t]*\n.*?^% end for-instructors[ \t]*(?:\n|\Z)", re.S | re.M
)


def drop_instructor_blocks(text: str) -> str:
    """``text`` (MyST) without the lines from ``% for-instructors`` to ``% end for-instructors``."""
    return _BLOCK.sub("", text)


def _drop_instructor_cells(path: Path) -> int:
    """Remove from the notebook ``path`` its cells tagged :data:`FOR_INSTRUCTORS` and the bracketed
    blocks of its Markdown cells (in place); returns how many cells were removed."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    kept = [c for c in nb.cells if FOR_INSTRUCTORS not in c.get("metadata", {}).get("tags", [])]
    removed, changed = len(nb.cells) - len(kept), False
    for cell in kept:
        if cell.cell_type == "markdown":
            new = drop_instructor_blocks(cell.source)
            changed |= new != cell.source
            cell.source = new
    if removed or changed:
        nb.cells = kept
        nbformat.write(nb, path)
    return removed


def unlink(html: str) -> str:
    """``html`` without its links to an instructors' page: a deck's "· for instructors" and the deck
    list's sentence that points at the plan go; any other such link is replaced by its text."""
    pages = "|".join(map(re.escape, INSTRUCTOR_PAGES))
    link = rf'<a\s[^>]*href="(?:\.\./)*(?:book/)?(?:{pages})\.html(?:#[^"]*)?"[^>]*>(.*?)</a>'
    html = re.sub(rf"\s*·\s*{link}", "", html, flags=re.S)  # a deck's line of links
    html = re.sub(rf"The plan that uses them[^<]*{link}\.\s*", "", html, flags=re.S)  # the list's
    return re.sub(link, r"\1", html, flags=re.S)


def without_notes(html: str) -> str:
    """A deck's ``html`` without its presenter notes (reveal.js's ``<aside class="notes">``), and the
    decks' index without its sentence on the speaker view (``<span class="speaker-note">``)."""
    html = re.sub(r'<aside class="notes"[^>]*>.*?</aside>\s*', "", html, flags=re.S)
    return re.sub(r'<span class="speaker-note">.*?</span>', "", html, flags=re.S)


def _strip_notebook_solutions(path: Path) -> int:
    """Remove the ``{solution}`` blocks of the notebook ``path``'s Markdown cells (in place)."""
    import nbformat
    from student_notebooks import strip_solutions

    nb = nbformat.read(path, as_version=4)
    removed = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source, n = strip_solutions(cell.source)
            removed += n
    if removed:
        nbformat.write(nb, path)
    return removed


#: The branch the student edition's Colab badges and launch button open: the colab branch's notebooks
#: without solutions (``tools/colab_notebooks.py --student``, pushed by .github/workflows/book.yml).
STUDENT_BRANCH = "colab-student"


def student_config(text: str) -> str:
    """The book's ``_config.yml`` for the student edition: its repository branch (from which every Colab
    link derives) is :data:`STUDENT_BRANCH`, and its pages have no button to the repository (which
    holds the solutions). ValueError if the config names no branch."""
    new, n = re.subn(r"(?m)^([ \t]+branch:[ \t]*)\S+[ \t]*$", rf"\g<1>{STUDENT_BRANCH}", text)
    if n != 1:
        raise ValueError(f"_config.yml: expected one repository branch line, found {n}")
    return re.sub(r"(?m)^([ \t]+use_repository_button:[ \t]*)true[ \t]*$", r"\g<1>false", new)


def _toc(text: str) -> str:
    """The table of contents without the instructors' pages."""
    pages = "|".join(map(re.escape, INSTRUCTOR_PAGES))
    kept = [
        line
        for line in text.splitlines()
        if not re.match(rf"\s*- file: book/(?:{pages})\s*$", line)
    ]
    return "\n".join(kept) + "\n"


def build(stage: Path = STAGE, out: Path = OUT) -> Path:
    """Build the student edition of ``stage`` (a built book's stage) into ``out``; returns its html folder.

    Raises FileNotFoundError when ``stage`` holds no built site, RuntimeError when the build fails (its
    log's tail)."""
    stage, out = Path(stage), Path(out)
    if not (stage / "_build" / "html" / "index.html").exists():
        raise FileNotFoundError(f"{stage}: no built site there; run `make book` first")
    gone = labels(stage)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(stage, out, ignore=lambda d, names: ["_build"] if Path(d) == stage else [])
    (out / "_toc.yml").write_text(_toc((stage / "_toc.yml").read_text()))
    config = (stage / "_config.yml").read_text()
    (out / "_config.yml").write_text(student_config(config))
    for name in INSTRUCTOR_PAGES:
        (out / "book" / f"{name}.md").unlink()
    from student_notebooks import strip_solutions

    for path in [*out.glob("book/**/*.md"), *out.glob("book/**/*.ipynb")]:
        text = path.read_text()
        new = student_source(text, gone)
        if path.suffix == ".md":
            new = drop_instructor_blocks(strip_solutions(new)[0])
        if new != text:
            path.write_text(new)
        if path.suffix == ".ipynb":
            _strip_notebook_solutions(path)
            _drop_instructor_cells(path)
    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", "-W", "--keep-going", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if run.returncode:
        raise RuntimeError(
            f"student site: jupyter-book build failed:\n{(run.stdout + run.stderr)[-3000:]}"
        )
    html = out / "_build" / "html"
    slides = stage / "_build" / "html" / "slides"
    if slides.is_dir():
        shutil.copytree(slides, html / "slides")
        for deck in (html / "slides").glob("*.html"):
            deck.write_text(without_notes(unlink(deck.read_text())))
    return html


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", type=Path, default=STAGE, help="a built book's stage")
    parser.add_argument("--out", type=Path, default=OUT, help="where to build the edition")
    args = parser.parse_args(argv)
    html = build(args.stage, args.out)
    print(f"Student site: {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
