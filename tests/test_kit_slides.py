"""The lessons' slide decks (tools/slides.py), built from the executed lessons into the site.

* Every lesson of ``_toc.yml`` has an outline ``book/slides/NN_name.yml``; every outline names only
  known items, and resolves against the executed lesson (labels, headings, printed checks).
* The builder fails loudly, naming the outline, the slide and what the lesson has, when a label, a
  figure or a check is missing (checked on a small executed notebook written here).
* In the built site (headless Chromium at 1280 x 720, every network request refused): each deck opens
  from the files alone, every slide fits its 1280 x 720 frame (the largest overflow is reported), every
  formula is typeset (no raw TeX, no MathJax error), every image loads, no request leaves the machine,
  ``?print-pdf`` prints one slide a page, and the lesson's page and the instructor page link the deck.
* A figure slide's check appears with its figure (one fragment), not before it; an
  exercise is named as the lesson's page numbers it ("Exercise 2.1"); a figure is the
  lesson's 2x PNG, laid out at the size the lesson shows it at.

The measured slides per deck and the largest overflow go to ``_build/kit-report.json``.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
import slides
import yaml
from build_book import lessons, page_name

ROOT = Path(__file__).resolve().parents[1]
LESSONS = lessons(ROOT)
REPORT = ROOT / "_build" / "kit-report.json"
WIDTH, HEIGHT = 1280, 720


@pytest.mark.parametrize("md", LESSONS, ids=page_name)
def test_every_lesson_has_a_slide_outline(md):
    outline = slides.OUTLINES / f"{md.stem}.yml"
    assert outline.exists(), f"{md.stem} has no slide outline ({outline.relative_to(ROOT)})"
    data = slides.load_outline(outline)
    for i, slide in enumerate(data["slides"], 1):
        assert set(slide) <= set(slides.ITEMS), (outline.name, i, set(slide) - set(slides.ITEMS))
        assert set(slide) - {"notes", "title"}, (
            f"{outline.name}, slide {i}: shows nothing but a title"
        )
        assert str(slide.get("notes", "")).strip(), (
            f"{outline.name}, slide {i}: no presenter notes (say what to tell the room and what to ask)"
        )
        if "exercises" in slide:
            assert str(slide.get("notes", "")).strip(), (
                f"{outline.name}, slide {i}: an exercise slide needs presenter notes (what to ask, "
                "what the answer looks like, how long to give)"
            )


@pytest.mark.parametrize("md", LESSONS, ids=page_name)
def test_exercise_slides_read_without_the_notebook(md):
    """What an exercise slide shows (the lesson's statement, or the outline's wording for the room) names
    no notebook object, and an outline's wording has only the statement's numbers: read from the lesson's
    source, so that this holds without a build."""
    lesson = slides.Lesson(md.stem, 0, md.stem, "source")
    for block in slides.directive_blocks(md.read_text()):
        if "label" in block.options:
            lesson.blocks[block.options["label"]] = block
    data = slides.load_outline(slides.OUTLINES / f"{md.stem}.yml")
    for i, slide in enumerate(data["slides"], 1):
        for entry in slides.as_list(slide.get("exercises", [])):
            slides.exercise_statement(lesson, entry, f"{md.stem}.yml, slide {i}")


def test_the_last_deck_ends_on_the_open_questions_that_lead_to_the_report():
    last = slides.load_outline(slides.OUTLINES / f"{LESSONS[-1].stem}.yml")["slides"][-1]
    assert last.get("section") == "Open questions", last
    assert "Problem set 3" in last.get("text", ""), last


# --- the builder on a small executed lesson ------------------------------------------------------------

PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201e2219bc70000000049454e44ae426082"
    )
).decode()


def _mini_stage(tmp_path: Path) -> Path:
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"papermill": {"parameters": {"mode": "fast"}}},
        "cells": [
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": "# A small lesson\n\n```{prf:lemma} A limit (Lemma 2.1)\n:label: lem-x\n\n"
                "$T = V(m + \\Gamma U z)$, see {numref}`fig-x`.\n```\n\n```{exercise} Compute it\n"
                ":label: ex-x\n\nGive $b$ to three significant digits.\n```\n\n## Summary\n\n- one\n- two\n",
            },
            {
                "cell_type": "code",
                "metadata": {"mystnb": {"figure": {"name": "fig-x", "caption": "A dot $x$."}}},
                "source": "plot()",
                "outputs": [{"output_type": "display_data", "data": {"image/png": PNG}}],
                "execution_count": 1,
            },
            {
                "cell_type": "code",
                "metadata": {},
                "source": "check_close(x, 1, what='x')",
                "outputs": [
                    {"output_type": "stream", "name": "stdout", "text": "x 1 within 0 of 1\n"}
                ],
                "execution_count": 2,
            },
        ],
    }
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "99_small.ipynb").write_text(json.dumps(nb))
    return tmp_path


def _outline(tmp_path: Path, slides_: list) -> None:
    (tmp_path / "outlines").mkdir(exist_ok=True)
    (tmp_path / "outlines" / "99_small.yml").write_text(yaml.safe_dump({"slides": slides_}))


def test_citations_read_as_authors_and_year():
    """A {cite} role on a slide names the authors and the year from book/references.bib, never its key;
    an unknown key stops the build."""
    r = slides.Renderer(slides.Lesson("x", 7, "x", "source"))
    assert r.text("see {cite}`bohbot2025token`") == "see (Bohbot et al., 2025)"
    assert r.text("{cite:t}`boursier2026softmax`") == "Boursier and Boyer (2026)"
    assert (
        r.text("{cite:p}`owen2013monte,sander2022sinkformers`")
        == "(Owen, 2013; Sander et al., 2022)"
    )
    bib = slides.bibliography()
    assert bib["sander2022sinkformers"][0][-1] == "Peyré"  # BibTeX's accent, decoded
    assert bib["vonoswald2023transformers"][0][0] == "von Oswald"  # the particle is kept
    keys = set(bib)
    assert len(keys) == (ROOT / "book" / "references.bib").read_text().count("\n@") + 1
    with pytest.raises(slides.OutlineError, match="nokey2000"):
        r.text("{cite}`nokey2000`")


def test_the_builder_draws_the_lesson_s_own_items(tmp_path, monkeypatch):
    stage = _mini_stage(tmp_path)
    monkeypatch.setattr(slides, "OUTLINES", tmp_path / "outlines")
    _outline(
        tmp_path,
        [
            {"prf": "lem-x", "notes": "say it"},
            {"figure": "fig-x", "check": "auto"},
            {"exercises": ["ex-x"], "section": "Summary"},
        ],
    )
    deck = slides.build_deck("99_small", stage, 9, write=False)
    assert deck["slides"] == 4 and deck["figures"] == ["fig-x.png"]
    # the figure is a reveal.js fragment: it shows on the next key press, after the room's prediction
    lesson_page = stage / "_build" / "html" / "book" / "99_small.html"
    lesson_page.parent.mkdir(parents=True)
    lesson_page.write_text("<html><body><h1>A small lesson</h1></body></html>")
    page = slides.build_deck("99_small", stage, 9)["path"].read_text()
    assert page.count("<figure") == page.count('<figure class="fragment"') == 1
    # the whole caption opens the slide's presenter notes
    notes = r'<aside class="notes"><p><strong>Figure 9\.1\.</strong> A dot'
    assert re.search(notes, page)


def test_a_home_reading_slide_says_so_first_in_its_notes(tmp_path, monkeypatch):
    """A slide the 90-minute plan steps past (``home: true``) stays in the deck; its notes open by saying
    that the run sheet steps past it and that students read it in the lesson (tests/test_kit_plan.py
    checks that the sheet's "Before" names it); the other slides say nothing of the kind."""
    stage = _mini_stage(tmp_path)
    monkeypatch.setattr(slides, "OUTLINES", tmp_path / "outlines")
    _outline(tmp_path, [{"prf": "lem-x", "notes": "say it"}, {"prf": "lem-x", "home": True}])
    deck = slides.build_deck("99_small", stage, 9, write=False)
    assert deck["slides"] == 3, deck["slides"]
    first, second = _section(deck["html"], 1), _section(deck["html"], 2)
    assert "Home reading" not in first, first
    notes = second.split('<aside class="notes">', 1)[1]
    assert notes.startswith("<p><strong>Home reading in the 90-minute plan.</strong>"), notes[:120]
    assert "read it in lesson 9." in notes, notes


def _section(page: str, n: int) -> str:
    """The ``n``-th slide (1: the first after the title slide) of a deck's HTML."""
    return page.split("<section")[n + 1].split("</section>")[0]


def test_a_check_s_printed_lines_go_to_the_presenter_notes(tmp_path, monkeypatch):
    """A lecture slide holds a statement and a few bullets: the lines a check printed are quoted in
    the slide's presenter notes ("What the lesson measured"), never drawn on the slide, where they
    would also give a figure's answer away; the figure is still a fragment."""
    stage = _mini_stage(tmp_path)
    monkeypatch.setattr(slides, "OUTLINES", tmp_path / "outlines")
    _outline(
        tmp_path,
        [
            {"figure": "fig-x", "check": "auto"},
            {"prf": "lem-x", "check": "x ", "notes": "say it"},
        ],
    )
    page = slides.build_deck("99_small", stage, 9, write=False)["html"]
    for n in (1, 2):
        slide = _section(page, n)
        shown, notes = slide.split('<aside class="notes">')
        assert 'class="check' not in shown and "What the lesson measured" not in shown, shown
        assert "What the lesson measured" in notes and "<pre><code" in notes, notes
    assert '<figure class="fragment" data-fragment-index="0"' in _section(page, 1)
    assert _section(page, 2).index("say it") < _section(page, 2).index("What the lesson measured")


def _png(width: int, height: int) -> str:
    """A white PNG of ``width`` x ``height`` pixels, base64-encoded as in a notebook."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\0" + b"\xff" * 3 * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    png += chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


@pytest.mark.parametrize(
    ("shown", "size"),
    [
        ({"width": 320, "height": 190}, (320, 190)),  # IPython's retina metadata
        ({"width": 320}, (320, 190)),  # the build keeps only the width
        ({}, (640, 380)),  # a plain PNG: its pixels
    ],
)
def test_a_2x_figure_is_laid_out_at_the_lesson_s_size_from_all_its_pixels(
    tmp_path, monkeypatch, shown, size
):
    """A lesson's figure is a 2x PNG with its logical size in the output's metadata
    (``use_book_style``, then ``build_book.keep_image_widths_only``): the slide is given
    that size's shape and the PNG itself, every pixel of it (sharp when projected)."""
    stage = _mini_stage(tmp_path)
    path = stage / "book" / "99_small.ipynb"
    nb = json.loads(path.read_text())
    png = _png(640, 380)
    nb["cells"][1]["outputs"] = [
        {
            "output_type": "display_data",
            "data": {"image/png": png},
            "metadata": {"image/png": shown} if shown else {},
        }
    ]
    path.write_text(json.dumps(nb))
    lesson = slides.read_lesson(path, 9)
    assert lesson.figure_sizes["fig-x"] == size
    monkeypatch.setattr(slides, "OUTLINES", tmp_path / "outlines")
    _outline(tmp_path, [{"figure": "fig-x", "notes": "n"}])
    page = slides.build_deck("99_small", stage, 9, write=False)["html"]
    assert f'data-width="{size[0]}" data-height="{size[1]}"' in page
    assert slides.png_size(base64.b64decode(png)) == (640, 380)


def test_exercises_are_numbered_as_on_the_lesson_s_page(tmp_path, monkeypatch):
    """An exercise slide names the exercise as the site and the instructor plan do:
    "Exercise 9.2" for the second numbered exercise of lesson 9 (sphinx-exercise counts
    the lesson's exercises in reading order and skips a ``:nonumber:`` one)."""
    stage = _mini_stage(tmp_path)
    path = stage / "book" / "99_small.ipynb"
    nb = json.loads(path.read_text())
    more = (
        "```{exercise} Unnumbered\n:label: ex-free\n:nonumber:\n\nThink.\n```\n\n"
        "```{exercise} Second\n:label: ex-y\n:class: conceptual\n\nWhy?\n```\n"
    )
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": more})
    path.write_text(json.dumps(nb))
    lesson = slides.read_lesson(path, 9)
    assert lesson.exercise_numbers == {"ex-x": 1, "ex-y": 2}
    monkeypatch.setattr(slides, "OUTLINES", tmp_path / "outlines")
    _outline(tmp_path, [{"exercises": ["ex-y", "ex-x", "ex-free"], "notes": "n"}])
    page = slides.build_deck("99_small", stage, 9, write=False)["html"]
    titles = re.findall(r'<p class="exercise-title">(.*?)</p>', page)
    assert titles == [
        "Exercise 9.2: Second (conceptual)",
        "Exercise 9.1: Compute it",
        "Exercise: Unnumbered",
    ]


def test_a_figure_slide_shows_a_short_caption():
    """The slide shows the caption's first sentence (math, brackets and abbreviations do
    not end it) or the outline's own ``caption``."""
    first = slides.first_sentence
    assert first("Risk at $L = 1.5$ (e.g. 2. below). Bars: one SE.") == (
        "Risk at $L = 1.5$ (e.g. 2. below)."
    )
    assert first("Gaps, e.g. at u = 0.5. Then more.") == "Gaps, e.g. at u = 0.5."
    assert first("One sentence") == "One sentence"


def test_a_figure_slide_puts_its_notes_prediction_question_on_the_slide():
    """A room that sees no notes still reads the question: the notes' "Ask for a prediction before the
    next key press shows the figure: ...?" up to its first question mark, on a figure slide only, and
    not where the slide's own text, above the figure, asks it."""
    ask = "Ask for a prediction before the next key press shows the figure: "
    notes = ask + "does $L$ times the\n error rise? (It falls.) More?"
    q = slides.prediction_question
    assert q({"figure": "fig-x", "notes": notes}) == "does $L$ times the error rise?"
    assert q({"text": "Predict: ...", "figure": "fig-x", "notes": notes}) is None
    assert q({"figure": "fig-x", "text": "Above: ...", "notes": notes}) == (
        "does $L$ times the error rise?"
    )
    assert q({"prf": "lem-x", "notes": notes}) is None
    assert q({"figure": "fig-x", "notes": "Say what the figure shows."}) is None
    for outline in sorted((ROOT / "book" / "slides").glob("*.yml")):
        for n, slide in enumerate(yaml.safe_load(outline.read_text())["slides"], 1):
            keys = list(slide)
            asks_itself = (
                "text" in keys and "figure" in keys and keys.index("text") < keys.index("figure")
            )
            if ask.strip() in " ".join(str(slide.get("notes", "")).split()) and not asks_itself:
                assert q(slide), f"{outline.name}, slide {n}: its question is not found"


def test_printed_numbers_and_exercises_worded_for_the_room(tmp_path, monkeypatch):
    stage = _mini_stage(tmp_path)
    monkeypatch.setattr(slides, "OUTLINES", tmp_path / "outlines")
    lesson = slides.read_lesson(stage / "book" / "99_small.ipynb", 9)
    assert slides.printed_number(lesson, "x ") == "1"
    assert slides.printed_number(lesson, "x ... within") == "0"
    _outline(
        tmp_path,
        [
            {"text": "x is {printed}`x `", "check": ["x ", "x 1"]},
            {"exercises": [{"label": "ex-x", "text": "Give $b$ to three digits."}], "notes": "n"},
        ],
    )
    assert slides.build_deck("99_small", stage, 9, write=False)["slides"] == 3


@pytest.mark.parametrize(
    ("slide", "message"),
    [
        ({"text": "{printed}`y = `"}, "printed no line that starts with 'y ='"),
        ({"check": ["x ", "nothing"]}, "no printed line starts with 'nothing'"),
        (
            {"exercises": [{"label": "ex-x", "text": "Give `b` to three digits."}]},
            "would show the notebook's names ['b']",
        ),
        (
            {"exercises": [{"label": "ex-x", "text": "Give $b$ to 4 digits."}]},
            "numbers its statement in 99_small does not have: ['4']",
        ),
        ({"prf": "lem-missing"}, "no prf: block 'lem-missing'; it has ['lem-x']"),
        ({"figure": "fig-missing"}, "no figure 'fig-missing'; it has ['fig-x']"),
        ({"figure": "fig-x", "caption": "A dot at 3."}, "does not have: ['3']"),
        ({"title": "x", "caption": "A dot."}, "`caption` is the short caption of a"),
        ({"check": "nothing printed"}, "no printed line starts with 'nothing printed'"),
        ({"exercises": "ex-missing"}, "no exercise block 'ex-missing'"),
        ({"section": "Nowhere"}, "no section '## Nowhere'"),
        ({"title": "x", "colour": "red"}, "unknown items ['colour']"),
        ({"title": "x", "home": "yes"}, "`home` is `true` or left out, got 'yes'"),
    ],
)
def test_the_builder_fails_loudly_on_what_the_lesson_does_not_have(
    tmp_path, monkeypatch, slide, message
):
    stage = _mini_stage(tmp_path)
    monkeypatch.setattr(slides, "OUTLINES", tmp_path / "outlines")
    _outline(tmp_path, [{"prf": "lem-x"}, slide])
    with pytest.raises(slides.OutlineError, match=re.escape(message)) as err:
        slides.build_deck("99_small", stage, 9, write=False)
    assert "99_small.yml, slide 2" in str(err.value) or "unknown" in str(err.value)


# --- the decks in the built site -----------------------------------------------------------------------

# reveal.js's slide counter, bottom right, as the room reads it ("3/8")
COUNTER_JS = (
    "() => (document.querySelector('.reveal .slide-number') || {textContent: ''})"
    ".textContent.replace(/\\s+/g, '')"
)

MEASURE_JS = """() => {
  const s = Reveal.getCurrentSlide();
  const box = s.getBoundingClientRect(), scale = Reveal.getScale();
  let bottom = 0, right = 0;
  for (const e of s.querySelectorAll('*')) {
    if (e.closest('aside.notes')) continue;
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    bottom = Math.max(bottom, (r.bottom - box.top) / scale);
    right = Math.max(right, (r.right - box.left) / scale);
  }
  const maths = s.querySelectorAll('.math').length;
  const typeset = s.querySelectorAll('.math mjx-container').length;
  const errors = s.querySelectorAll('mjx-merror, [data-mjx-error]').length;
  const raw = /\\\\\\(|\\\\\\[|\\$\\$/.test(s.innerText);
  const images = [...s.querySelectorAll('img')];
  const figures = [...s.querySelectorAll('figure')];
  const shown = figures.filter(f => getComputedStyle(f).visibility !== 'hidden').length;
  const checks = [...s.querySelectorAll('.check')]
    .filter(c => getComputedStyle(c).visibility !== 'hidden').length;
  return {height: Math.max(bottom, s.scrollHeight), width: Math.max(right, s.scrollWidth),
          maths, typeset, errors, raw, figures: figures.length, shown, checks,
          images: images.length, broken: images.filter(i => !i.complete || i.naturalWidth === 0).length};
}"""


#: The ?script view (the speaker notes alone): its items, those with notes, formulas and raw TeX.
SCRIPT_JS = r"""() => {
  const items = [...document.querySelectorAll('main.script > section')];
  return {
    items: items.length,
    with_notes: items.filter(
      s => s.innerText.trim().length > s.querySelector('h2').innerText.length + 20).length,
    formulas: document.querySelectorAll('mjx-container').length,
    raw: /\\\(|\\\[|\$\$/.test(document.body.innerText),
    // what sticks out past the notes' column (MathJax's hidden assistive copies aside): printed, one
    // such line makes Chromium shrink every page to fit it, and clips it all the same
    wide: [...document.querySelectorAll('main.script *')]
      .filter(e => !e.closest('mjx-assistive-mml') && e.getBoundingClientRect().right
                   > document.querySelector('main.script').getBoundingClientRect().right + 1)
      .map(e => e.tagName + ': ' + e.textContent.slice(0, 60)),
  };
}"""


@pytest.fixture(scope="module")
def decks(built_book):
    from conftest import CHROMIUM_ARGS, chromium_path
    from playwright.sync_api import sync_playwright

    rc, log, stage = built_book
    assert rc == 0, log[-3000:]
    html = stage / "_build" / "html"
    found = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
        context.route(re.compile(r"^(https?|wss?)://"), lambda route: route.abort())
        for md in LESSONS:
            deck = html / "slides" / f"{md.stem}.html"
            if not deck.exists():
                found[md.stem] = None
                continue
            page = context.new_page()
            requests, errors = [], []
            page.on("request", lambda r, requests=requests: requests.append(r.url))
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.goto(deck.as_uri(), wait_until="load")
            page.wait_for_function("() => window.Reveal && Reveal.isReady()", timeout=60_000)
            n = page.evaluate("() => Reveal.getHorizontalSlides().length")  # the title slide too
            measured, counter = [], []
            for i in range(n):
                # the slide as it opens (its figure hidden, a fragment), then revealed: measured revealed
                page.evaluate(f"() => Reveal.slide({i}, 0, -1)")
                page.wait_for_timeout(50)
                before = page.evaluate(MEASURE_JS)
                page.evaluate("() => { while (Reveal.nextFragment()) {} }")
                page.wait_for_timeout(250)
                counter.append(page.evaluate(COUNTER_JS))
                measured.append(
                    {
                        **page.evaluate(MEASURE_JS),
                        "shown_before": before["shown"],
                        "checks_before": before["checks"],
                    }
                )
            printed = context.new_page()
            printed.goto(deck.as_uri() + "?print-pdf", wait_until="load")
            printed.wait_for_function(
                "() => window.Reveal && Reveal.isReady() && window.pdfNumbered", timeout=60_000
            )
            printed.wait_for_timeout(300)
            printed_numbers = printed.evaluate(
                "() => [...document.querySelectorAll('.pdf-page')].map(p => "
                "(p.querySelector('.slide-number-pdf') || {}).textContent || '')"
            )
            pdf = printed.pdf(print_background=True, prefer_css_page_size=True)
            script = context.new_page()  # the speaker notes alone, printed as the notes handout
            script.goto(deck.as_uri() + "?script", wait_until="load")
            script.wait_for_function("() => window.scriptReady === true", timeout=60_000)
            script.wait_for_timeout(300)
            notes = script.evaluate(SCRIPT_JS)
            notes["pdf_pages"] = len(
                re.findall(rb"/Type\s*/Page[^s]", script.pdf(prefer_css_page_size=True))
            )
            script.close()
            found[md.stem] = {
                "script": notes,
                "slides": n,
                "counter": counter,
                "measured": measured,
                "requests": requests,
                "errors": errors,
                "pdf_pages": len(re.findall(rb"/Type\s*/Page[^s]", pdf)),
                "printed_numbers": printed_numbers,
            }
            printed.close()
            page.close()
        browser.close()
    report = {
        stem: None
        if d is None
        else {
            "slides": d["slides"],
            "largest_overflow_px": max(
                max(m["height"] - HEIGHT, m["width"] - WIDTH, 0) for m in d["measured"]
            ),
            "formulas": sum(m["maths"] for m in d["measured"]),
            "pdf_pages": d["pdf_pages"],
        }
        for stem, d in found.items()
    }
    REPORT.parent.mkdir(exist_ok=True)
    old = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    REPORT.write_text(json.dumps({**old, "slides": report}, indent=1))
    print(json.dumps(report, indent=1))
    return html, found


@pytest.mark.browser
@pytest.mark.book
@pytest.mark.parametrize("md", LESSONS, ids=page_name)
def test_the_deck_fits_its_frame_typesets_its_formulas_and_needs_no_network(decks, md):
    _, found = decks
    d = found[md.stem]
    assert d is not None, f"no deck for {md.stem} in the built site"
    assert d["slides"] >= 5, d["slides"]
    problems = []
    for i, m in enumerate(d["measured"]):
        where = f"{md.stem} slide {i + 1}"
        if m["height"] > HEIGHT + 1 or m["width"] > WIDTH + 1:
            problems.append(f"{where} overflows: {m['width']:.0f} x {m['height']:.0f} px")
        if m["typeset"] < m["maths"] or m["errors"] or m["raw"]:
            problems.append(
                f"{where}: {m['typeset']}/{m['maths']} formulas typeset, {m['errors']} errors"
            )
        if m["broken"]:
            problems.append(f"{where}: {m['broken']} of {m['images']} images did not load")
        if m["figures"] and (m["shown_before"] or m["shown"] < m["figures"]):
            problems.append(
                f"{where}: a figure is not a fragment ({m['shown_before']} of {m['figures']} shown "
                f"as the slide opens, {m['shown']} after the key presses)"
            )
        if m["figures"] and m["checks_before"]:
            problems.append(
                f"{where}: {m['checks_before']} check(s) shown before the figure (they "
                "would give its answer away: a figure slide's check is in its fragment)"
            )
    outside = [u for u in d["requests"] if not u.startswith(("file:", "data:"))]
    assert not outside, f"{md.stem}: requests that leave the machine: {outside}"
    assert not d["errors"], f"{md.stem}: JavaScript errors {d['errors']}"
    assert not problems, "\n".join(problems)
    after_title = d["slides"] - 1
    expected = [""] + [f"{i}/{after_title}" for i in range(1, d["slides"])]
    assert d["counter"][1:] == expected[1:], (
        f"{md.stem}: the counter reads {d['counter']}; the plan numbers the slides after the title "
        f"1 to {after_title}"
    )
    assert d["pdf_pages"] == d["slides"], (
        f"{md.stem}: ?print-pdf printed {d['pdf_pages']} pages for {d['slides']} slides"
    )
    assert d["printed_numbers"] == [""] + [str(i) for i in range(1, d["slides"])], (
        f"{md.stem}: the printed pages are numbered {d['printed_numbers']}; the run sheets number the "
        f"slides after the title 1 to {after_title}, and the title page carries no number"
    )


@pytest.mark.browser
@pytest.mark.book
@pytest.mark.parametrize("md", LESSONS, ids=page_name)
def test_the_speaker_notes_print_slide_by_slide_on_a_few_pages(decks, md):
    """The deck's ?script view (the handouts' NN_name-notes.pdf) lists every slide with its notes,
    formulas typeset, and prints on at most a page for every three slides (reveal.js's own notes
    print took two pages a slide), with nothing wider than its column (a long check line wraps: r67's
    lecturer found the printed notes shrunk to about 7.5 pt and the check lines clipped)."""
    d = decks[1][md.stem]
    assert d is not None, f"no deck for {md.stem} in the built site"
    notes = d["script"]
    assert notes["items"] == notes["with_notes"] == d["slides"], (md.stem, notes, d["slides"])
    assert not notes["raw"] and notes["formulas"] > 0, (md.stem, notes)
    assert not notes["wide"], f"{md.stem}: wider than the printed notes' column: {notes['wide']}"
    assert notes["pdf_pages"] <= max(1, -(-d["slides"] // 3)), (
        f"{md.stem}: the speaker notes print on {notes['pdf_pages']} pages for {d['slides']} slides"
    )


@pytest.mark.browser
@pytest.mark.book
def test_the_lessons_and_the_instructor_page_link_the_decks(decks):
    html, _ = decks
    instructor = (html / "book" / "instructor.html").read_text()
    index = (html / "slides" / "index.html").read_text()
    assert 'href="../book/instructor.html"' in index, "slides/index.html does not link the plan"
    for md in LESSONS:
        assert f'href="{md.stem}.html"' in index, f"slides/index.html does not list {md.stem}"
        page = (html / "book" / f"{md.stem}.html").read_text()
        assert f'href="../slides/{md.stem}.html"' in page, (
            f"{md.stem}'s page does not link its deck"
        )
        assert f"../slides/{md.stem}.html" in instructor, (
            f"the instructor page does not link {md.stem}"
        )


@pytest.mark.book
@pytest.mark.parametrize("md", LESSONS, ids=page_name)
def test_the_decks_number_exercises_as_the_lesson_pages_do(built_book, md):
    """Every exercise on a slide carries the number the lesson's page gives it
    (sphinx-exercise's "Exercise 2.1"), which the instructor plan uses too."""
    rc, log, stage = built_book
    assert rc == 0, log[-3000:]
    html = stage / "_build" / "html"
    site = dict(
        re.findall(
            r'<div class="exercise[\w -]*" id="([\w-]+)">\s*'
            r'<p class="admonition-title"><span class="caption-number">'
            r"(Exercise [\d.]+) </span>",
            (html / "book" / f"{md.stem}.html").read_text(encoding="utf-8"),
        )
    )
    deck = (html / "slides" / f"{md.stem}.html").read_text(encoding="utf-8")
    exercise = r'<div class="exercise" data-label="([\w-]+)">'
    exercise += r'<p class="exercise-title">(.*?):'
    shown = re.findall(exercise, deck)
    for label, name in shown:
        assert site.get(label) == name, (md.stem, label, name, site)
    # the lesson's other exercises are named on the deck's last exercise slide, as homework
    others = sorted(name for label, name in site.items() if label not in dict(shown))
    also = re.findall(r'<p class="also">Also with the reading: (.*?)\.</p>', deck)
    if shown and others:
        assert len(also) == 1, (md.stem, also)
        assert [n for n in others if n not in also[0]] == [], (md.stem, others, also)
    else:
        assert also == [], (md.stem, also)


def test_the_deck_list_counts_slides_as_the_plan_does(tmp_path):
    """The instructor page's list of decks counts the slides after the title slide, as the plan's table
    does (and reveal.js's counter: the title slide is uncounted)."""
    html = tmp_path / "html"
    (html / "book").mkdir(parents=True)
    (html / "slides").mkdir()
    (html / "book" / "instructor.html").write_text(
        '<div id="slide-decks" class="slide-decks"><p>filled in by the build</p></div>'
    )
    stem = LESSONS[0].stem
    (html / "slides" / f"{stem}.html").write_text(
        "<section>title</section>" + "<section>x</section>" * 9
    )
    assert slides.list_on_instructor_page(html) == 1
    assert "(a title slide and 9 slides; " in (html / "book" / "instructor.html").read_text()
    assert slides.write_index(html) == 1
    index = (html / "slides" / "index.html").read_text()
    assert f'<a href="{stem}.html">Lesson 1: ' in index and "(a title slide and 9 slides; " in index


@pytest.mark.book
def test_presenter_notes_hold_no_raw_tex(built_book):
    """MathJax typesets the notes only inside \\( \\) and \\[ \\]: a "$" or a TeX command left outside
    them (a formula the Markdown renderer broke, for instance at a line that starts with "+") would
    reach the lecturer as raw text."""
    rc, log, stage = built_book
    assert rc == 0, log[-3000:]
    raw = []
    for deck in sorted((stage / "_build" / "html" / "slides").glob("*.html")):
        page = deck.read_text()
        for notes in re.findall(r'<aside class="notes">(.*?)</aside>', page, re.S):
            outside = re.sub(r"\\\(.*?\\\)|\\\[.*?\\\]", "", notes, flags=re.S)
            raw.extend(
                f"{deck.stem}: {outside[max(0, m.start() - 60) : m.end() + 60]!r}"
                for m in re.finditer(r"\$|\\[A-Za-z]+", outside)
            )
    assert not raw, "raw TeX in the presenter notes:\n" + "\n".join(raw)
