"""The course apparatus every chapter of ``_toc.yml`` (the numbered ``book/NN_*.md`` notebooks) shares,
checked on the MyST sources.

* It opens with an "In this chapter" box giving learning objectives, prerequisites and the time it
  takes (reading, default-mode CPU run, Colab), and closes with a ``## Summary`` (its last section).
* Its exercises are sphinx-exercise ``{exercise}`` blocks, each with a labelled ``{solution}`` folded in a
  dropdown. Each exercise checks itself or is marked conceptual (``:class: conceptual``, for an
  explain/predict exercise): after the block, a cell tagged ``exercise-check`` calls
  ``answer_check("<label>", answer, ...)``, whose key ``softlin.book.exercises`` registers (a draft may
  instead define ``check_<label> = answer_check(...)`` in a key cell tagged ``remove-cell``), and the folded solution ends with a ``python`` block assigning
  ``answer`` (tests/test_exercises.py runs each check on that solution and on a wrong answer).
* Every figure cell has a caption, a label (``fig-...``) and alt text that describes the figure, and
  figures use the book's colour-blind-safe style (``softlin.book.plotting.use_book_style``), with no rainbow
  colour map.
* The instructor page covers the plan, GPU needs and how to hand out the notebooks.

Chapters still missing an item fail with a message that says which item.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest
from build_book import lessons, page_name
from exercise_checks import SOLUTION, registry_call
from softlin.book.exercises import KEYS

ROOT = Path(__file__).resolve().parents[1]
# Chapters are the lessons (book/NN_*.md); labs and appendix notebooks (book/performance.md) are not.
CHAPTERS = lessons(ROOT)
PLACEHOLDER = re.compile(r"(^|\s)(\.\.\.|…|TODO|TBD)(\s|$)", re.MULTILINE)
RAINBOW = re.compile(
    r"""cmap\s*=\s*["'](jet|rainbow|hsv|gist_rainbow|nipy_spectral|gist_ncar|turbo)["']"""
)


def markdown(md: Path) -> str:
    return "\n".join(c.source for c in jupytext.read(md).cells if c.cell_type == "markdown")


def box(md: Path) -> str:
    text = markdown(md)
    m = re.search(r":::\{admonition\} In this chapter\n(.*?)\n:::", text, re.DOTALL)
    assert m, f"{md.name}: no ':::{{admonition}} In this chapter' box after the title"
    return m.group(1)


def field(md: Path, name: str) -> str:
    m = re.search(rf"\*\*{name}\.\*\*(.*?)(?=\n\*\*[A-Z][a-z]+\.\*\*|\Z)", box(md), re.DOTALL)
    assert m, f"{md.name}: the 'In this chapter' box has no **{name}.** entry"
    return m.group(1).strip()


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_opens_with_objectives_prerequisites_and_time(md):
    nb = jupytext.read(md)
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    before = "\n".join(c.source for c in nb.cells[:first_code] if c.cell_type == "markdown")
    assert "{admonition} In this chapter" in before, (
        f"{md.name}: the 'In this chapter' box must open the chapter"
    )
    objectives = field(md, "Learning objectives")
    assert not PLACEHOLDER.search(objectives) and len(objectives) > 40, (
        f"{md.name}: learning objectives are missing or a placeholder: {objectives[:80]!r}"
    )
    prerequisites = field(md, "Prerequisites")
    assert not PLACEHOLDER.search(prerequisites) and len(prerequisites) > 10, (
        f"{md.name}: prerequisites are missing or a placeholder: {prerequisites[:80]!r}"
    )
    time = field(md, "Time")
    assert not PLACEHOLDER.search(time), f"{md.name}: the time estimate is a placeholder: {time!r}"
    for what, pattern in [
        ("reading time in minutes", r"\d+\s*min"),
        ("CPU run time", r"CPU"),
        ("Colab run time", r"Colab"),
    ]:
        assert re.search(pattern, time), f"{md.name}: the time estimate gives no {what}: {time!r}"


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_closes_with_a_summary(md):
    text = markdown(md)
    sections = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert sections and sections[-1].strip() == "Summary", (
        f"{md.name}: the last section must be '## Summary' (sections: {sections})"
    )
    summary = text.split("\n## Summary", 1)[1]
    bullets = re.findall(r"^\s*[-*] (.+)$", summary, re.MULTILINE)
    assert len(bullets) >= 2, f"{md.name}: the summary needs at least two bullet points"
    assert not PLACEHOLDER.search(summary), f"{md.name}: the summary still holds a placeholder"


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_exercises_have_folded_solutions(md):
    text = markdown(md)
    exercises = re.findall(r"^(`{3,})\{exercise\}.*\n((?::[a-z-]+:.*\n)*)", text, re.MULTILINE)
    assert exercises, f"{md.name}: no sphinx-exercise {{exercise}} block"
    labels = []
    for _, options in exercises:
        m = re.search(r":label:\s*(\S+)", options)
        assert m, f"{md.name}: an exercise has no :label: (its solution needs one)"
        labels.append(m.group(1))
    solutions = dict(
        re.findall(r"^`{3,}\{solution\}\s*(\S+)\n((?::[a-z-]+:.*\n)*)", text, re.MULTILINE)
    )
    for label in labels:
        assert label in solutions, f"{md.name}: exercise {label} has no {{solution}} {label}"
        assert re.search(r":class:.*\bdropdown\b", solutions[label]), (
            f"{md.name}: the solution of {label} is not folded (add `:class: dropdown`)"
        )


EXERCISE = re.compile(r"^`{3,}\{exercise\}[^\n]*\n((?::[a-z-]+:[^\n]*\n)*)", re.MULTILINE)


def exercises(nb) -> list[tuple[int, str, bool]]:
    """(index of its markdown cell, label, marked conceptual) of every exercise of a notebook."""
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for m in EXERCISE.finditer(cell.source):
                label = re.search(r":label:\s*(\S+)", m.group(1))
                conceptual = re.search(r":class:.*\bconceptual\b", m.group(1)) is not None
                out.append((i, label.group(1) if label else "?", conceptual))
    return out


def first_cell(cells, kind, pattern, *, tag=None, flags=0):
    """The index of the first ``kind`` cell (tagged ``tag``, if given) whose source matches
    ``pattern``, or None."""
    return next(
        (
            j
            for j, c in enumerate(cells)
            if c.cell_type == kind
            and (tag is None or tag in c.metadata.get("tags", []))
            and re.search(pattern, c.source, flags)
        ),
        None,
    )


def exercise_problems(md: Path) -> list[str]:
    """What is missing for each exercise of ``md`` that is neither self-checking nor marked conceptual."""
    nb = jupytext.read(md)
    cells = nb.cells
    problems = []
    for i, label, conceptual in exercises(nb):
        if conceptual:
            continue
        name = "check_" + label.replace("-", "_")
        registered = next(
            (
                j
                for j, c in enumerate(cells)
                if c.cell_type == "code"
                and "exercise-check" in c.metadata.get("tags", [])
                and (registry_call(c.source) or ("",))[0] == label
            ),
            None,
        )
        if registered is not None:  # the key is computed by softlin.book.exercises: no key cell
            if label not in KEYS:
                problems.append(f"{label}: softlin.book.exercises.KEYS has no key for it")
            key = check = registered
        else:
            key = first_cell(cells, "code", rf"^(def {name}\(|{name}\s*=)", flags=re.MULTILINE)
            check = first_cell(cells, "code", rf"\b{name}\(\s*answer\s*\)", tag="exercise-check")
        solution = first_cell(cells, "markdown", rf"\{{solution\}}\s*{re.escape(label)}\b")
        if key is None or check is None:
            problems.append(
                f"{label}: no {'key cell defining ' + name if key is None else 'exercise-check cell'} "
                "(or mark it `:class: conceptual`)"
            )
            continue
        if registered is None and "remove-cell" not in cells[key].metadata.get("tags", []):
            problems.append(f"{label}: the key cell of {name} must be tagged remove-cell")
        if not (i < key <= check and (solution is None or check < solution)):
            problems.append(
                f"{label}: the key and check cells must follow the exercise, before its solution"
            )
        # only this solution's own text (a markdown cell may hold several solutions)
        found = (
            [m["body"] for m in SOLUTION.finditer(cells[solution].source) if m["label"] == label]
            if solution is not None
            else []
        )
        body = found[0] if found else ""
        blocks = re.findall(r"^```python\n(.*?)^```", body, re.MULTILINE | re.DOTALL)
        if not blocks or not re.search(r"^(answer\s*=|def answer\()", blocks[-1], re.MULTILINE):
            problems.append(f"{label}: the solution needs a ```python block that assigns `answer`")
    return problems


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_every_exercise_checks_itself_or_is_marked_conceptual(md):
    problems = exercise_problems(md)
    assert not problems, f"{md.name}:\n" + "\n".join(problems)


def test_the_exercise_rule_accepts_the_convention_and_catches_what_is_missing():
    fixtures = Path(__file__).resolve().parent / "fixtures"
    assert exercise_problems(fixtures / "01_explorer_and_exercises.md") == []
    assert exercise_problems(fixtures / "02_broken_exercises.md") == [
        "ex-bad-missing: the solution needs a ```python block that assigns `answer`"
    ]
    assert (
        exercise_problems(fixtures / "03_hang.md") == []
    )  # no exercise at all: nothing to check here


def figure_cells(md: Path):
    for cell in jupytext.read(md).cells:
        if cell.cell_type == "code" and "figure" in cell.metadata.get("mystnb", {}):
            yield cell


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_figure_cells_have_caption_label_and_alt_text(md):
    for cell in figure_cells(md):
        meta = cell.metadata["mystnb"]
        head = cell.source.splitlines()[0] if cell.source else ""
        caption = (meta["figure"].get("caption") or "").strip()
        name = meta["figure"].get("name") or ""
        alt = ((meta.get("image") or {}).get("alt") or "").strip()
        assert len(caption) > 20, f"{md.name}: figure cell starting {head!r} has no real caption"
        assert re.fullmatch(r"fig-[a-z0-9-]+", name), (
            f"{md.name}: figure cell {head!r} needs a `name: fig-...` label"
        )
        assert len(alt) > 30 and not alt.startswith("<Figure"), (
            f"{md.name}: figure {name} needs alt text that describes it (mystnb: image: alt:)"
        )
        assert "hide-input" in cell.metadata.get("tags", []), (
            f"{md.name}: figure {name} cell must be tagged hide-input"
        )


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_figures_use_the_book_style(md):
    code = "\n".join(c.source for c in jupytext.read(md).cells if c.cell_type == "code")
    if any(True for _ in figure_cells(md)):
        assert "use_book_style()" in code, (
            f"{md.name}: call softlin.book.plotting.use_book_style() before plotting"
        )
    assert not RAINBOW.search(code), (
        f"{md.name}: rainbow colour maps are not colour-blind safe: {RAINBOW.search(code)[0]}"
    )
    assert "plt.style.use" not in code, (
        f"{md.name}: use softlin.book.plotting.use_book_style(), not another style"
    )


def test_instructor_page_covers_plan_gpu_and_distribution():
    text = (ROOT / "book" / "instructor.md").read_text()
    assert "Placeholder" not in text
    for topic in ("90 minutes", "GPU", "paper", "Colab", ".ipynb", "student"):
        assert topic in text, f"book/instructor.md does not mention {topic!r}"
    for md in CHAPTERS:
        assert f"{{doc}}`{md.stem}`" in text or f"<{md.stem}>`" in text, (
            f"book/instructor.md does not link {md.stem}"
        )
