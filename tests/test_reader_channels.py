"""The site on a phone and on a laptop, as a reader uses it (headless Chromium via playwright).

Every page of ``_toc.yml`` of the published (default-mode) build is opened at 390 px and at 1280 px wide,
offline, and measured:

* at 390 px no page is wider than the viewport (``scrollWidth`` of the document against its width);
  a tap on a figure opens it in an overlay at its full size (the image's natural width, so its text is as
  large as matplotlib drew it), and a tap closes it;
* at 1280 px no printed output block and no display equation is cut: each one's ``scrollWidth`` is at
  most its ``clientWidth`` (``softlin-reader.js`` scales wide ones to fit);
* a click on the text of a solution's title opens the solution and leaves the page where it was;
* the intro, every chapter and the references link to the paper on arXiv; the intro has a "Cite this
  book" BibTeX block and the licence; the footer names the licence;
* a chapter page loads at most 3.5 MB (the sum of the files it requests), without the theme's 1.49 MB
  ``fontawesome.js``, and its icons still render (Font Awesome's web font);
* on the site, a self-check says where it runs ("run this cell in Colab or Jupyter");
* at 390 px no formula, inline or displayed, is clipped: it is whole, or sits in a box that scrolls
  sideways and shows it (``softlin-scrolls``: its content fades out at the edge with more behind it);
  code cells wrap their long lines (no sideways scroll) at 13 px;
* the converted notebooks (Colab, the site's download, student copies) number figures, exercises and
  theorems as the built page does, and the site's *Download .ipynb* is that conversion, with outputs;
* the handouts of lessons 1 and 5 and of lab 5 (``tools/handouts.py``), rendered as images: no page but
  the last more than 30 % blank at its bottom, no printed table wider than the page (so none wraps);
  lesson 5's reading handout (``reading/``: no code cell's input) holds none of the code the full one
  prints, keeps its figures with their captions, ``show_source``'s code and the explorer, and is shorter.

The measures are written to ``_build/reader-report.json`` (the handouts' to
``_build/handout-report.json``); screenshots at both widths to ``_build/screenshots/reader/``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from build_book import lessons, notebook_chapters, toc_files
from conftest import CHROMIUM_ARGS, chromium_path

pytestmark = [pytest.mark.book, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]
PAGES = toc_files(ROOT / "_toc.yml")
CHAPTERS = [str(p.relative_to(ROOT).with_suffix("")) for p in lessons(ROOT)]
SHOTS = ROOT / "_build" / "screenshots" / "reader"
ARXIV = "https://arxiv.org/abs/2512.11784"
# Bytes a chapter page may load after it settled: every file it requests (HTML with the explorers'
# inline frames, figures, MathJax and its fonts, theme CSS/JS, Font Awesome, the search index).
# The pages measure 2.81-3.15 MB in a fast-mode build (MathJax as separate components without its
# menu, palette figures: 0.65-0.82 MB less than before), and the same within 0.01 MB in default mode
# (chapters 1 and 5, the heaviest, measured: 3.02 and 3.15 MB).
PAGE_BUDGET = 3.5e6

READY_JS = """() => {
  const maths = document.querySelectorAll('main .math').length;
  const typeset = document.querySelectorAll('main .math mjx-container').length;
  return (maths === 0 || typeset >= maths) && [...document.images].every(i => i.complete);
}"""

# At 390 px: every formula, inline or displayed, is either shown whole or sits in a box that scrolls
# sideways and shows it (class softlin-scrolls: edge shadows and a thin bar); a formula that pokes out of
# a box that clips it (the theme's admonitions and span.math have overflow: hidden) is "clipped".
# Code cells: no sideways scroll, and a font of at least 12 px.
PHONE_JS = r"""() => {
  const main = document.querySelector('article.bd-article') || document.querySelector('main');
  const facts = {clipped: [], scrolls_unmarked: [], scrolls_marked: 0, code_scrolls: [], code_px: []};
  const check = (m, kind) => {
    // the formula's extent is its rendering (mjx-math), not MathJax's hidden MathML copy
    const r = (m.querySelector('mjx-math') || m).getBoundingClientRect();
    if (!r.width) return;
    for (let a = m; a && a !== document.body; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (ox === 'visible') continue;
      const box = a.getBoundingClientRect();
      if (r.left >= box.left - 1 && r.right <= box.right + 1) continue;  // whole in this box
      if (ox === 'auto' || ox === 'scroll') {  // cut by a box that scrolls: it must show it does
        if (a.classList.contains('softlin-scrolls')) facts.scrolls_marked++;
        else facts.scrolls_unmarked.push(kind + ': ' + (m.textContent || '').slice(0, 60));
      } else {
        facts.clipped.push({kind, text: (m.textContent || '').slice(0, 60), right: Math.round(r.right),
                            box: Math.round(box.right), clip: a.tagName + '.' + a.className.split(' ')[0]});
      }
      return;
    }
    if (r.right > window.innerWidth + 1) facts.clipped.push({kind, text: m.textContent.slice(0, 60),
                                                              right: Math.round(r.right), box: 'viewport'});
  };
  main.querySelectorAll('mjx-container').forEach(m =>
    check(m, m.getAttribute('display') === 'true' ? 'display' : 'inline'));
  main.querySelectorAll('div.cell_input pre').forEach(pre => {
    if (!pre.offsetParent) return;
    if (pre.scrollWidth > pre.clientWidth + 1) facts.code_scrolls.push(pre.textContent.slice(0, 60));
    facts.code_px.push(parseFloat(getComputedStyle(pre).fontSize));
  });
  return facts;
}"""

MEASURE_JS = """() => {
  const root = document.documentElement;
  const cut = (els) => [...els].filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
    .map(e => ({text: e.innerText.slice(0, 60), scroll: e.scrollWidth, client: e.clientWidth}));
  const icon = document.querySelector('.fa-solid, .fa-brands, .fab, .fas');
  return {
    page_width: root.scrollWidth, viewport: root.clientWidth,
    outputs_cut: cut(document.querySelectorAll('main .cell_output pre')),
    equations_cut: cut(document.querySelectorAll('main mjx-container[display="true"]')),
    n_outputs: document.querySelectorAll('main .cell_output pre').length,
    n_equations: document.querySelectorAll('main mjx-container[display="true"]').length,
    arxiv: [...document.querySelectorAll('a[href]')].filter(a => a.href.startsWith('ARXIV_URL')).length,
    icon_font: icon ? getComputedStyle(icon, '::before').fontFamily : null,
    text: document.querySelector('main').innerText,
    footer: [...document.querySelectorAll('footer, .bd-footer-content')].map(e => e.innerText).join(' '),
  };
}""".replace("ARXIV_URL", ARXIV)


def file_size(url: str) -> int:
    if not url.startswith("file://"):
        return 0
    path = Path(unquote(urlparse(url).path))
    return path.stat().st_size if path.is_file() else 0


@pytest.fixture(scope="module")
def reader(built_book):
    rc, log, stage = built_book
    if rc != 0:
        pytest.fail(f"the book did not build (rc={rc}):\n{log[-3000:]}")
    html = stage / "_build" / "html"
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for width, mobile in ((390, True), (1280, False)):
            context = browser.new_context(
                viewport={"width": width, "height": 844 if mobile else 900},
                is_mobile=mobile,
                has_touch=mobile,
                device_scale_factor=2 if mobile else 1,
            )
            context.route(re.compile(r"^(https?|wss?)://"), lambda route: route.abort())
            for f in PAGES:
                target = html / (f + ".html")
                if not target.exists():
                    continue
                page = context.new_page()
                requests = []
                page.on("request", lambda r, acc=requests: acc.append(r.url))
                page.goto(target.as_uri(), wait_until="load")
                page.wait_for_function(READY_JS, timeout=30_000)
                page.wait_for_timeout(400)  # the fit of equations runs after MathJax
                facts = page.evaluate(MEASURE_JS)
                facts["bytes"] = sum(file_size(u) for u in set(requests))
                facts["fontawesome_js"] = any("fontawesome.js" in u for u in requests)
                page.screenshot(
                    path=str(SHOTS / f"{f.replace('/', '_')}-{width}.png"), full_page=False
                )
                if mobile:
                    facts["phone"] = page.evaluate(PHONE_JS)
                    facts["tap"] = tap_a_figure(page)
                else:
                    facts["solution"] = click_a_solution_title(page)
                out[(f, width)] = facts
                page.close()
            context.close()
        browser.close()
    report = {
        f"{f}@{w}": {k: v for k, v in facts.items() if k != "text"} for (f, w), facts in out.items()
    }
    (ROOT / "_build" / "reader-report.json").write_text(json.dumps(report, indent=1))
    return out


def tap_a_figure(page) -> dict | None:
    img = page.query_selector("main figure img.softlin-zoomable")
    if img is None:
        return None
    img.scroll_into_view_if_needed()
    img.tap()
    page.wait_for_selector(".softlin-lightbox img", timeout=5_000)
    page.wait_for_timeout(200)
    shown = page.evaluate(
        """() => { const big = document.querySelector('.softlin-lightbox img');
        return {natural: big.naturalWidth, shown: big.getBoundingClientRect().width,
                inline: document.querySelector('main figure img.softlin-zoomable')
                  .getBoundingClientRect().width}; }"""
    )
    page.screenshot(path=str(SHOTS / "lightbox-390.png"))
    page.mouse.click(5, 200)  # outside the picture: closes
    shown["closed"] = page.query_selector(".softlin-lightbox") is None
    return shown


def click_a_solution_title(page) -> dict | None:
    link = page.query_selector(".solution.dropdown > .admonition-title a:not(.headerlink)")
    if link is None:
        return None
    link.scroll_into_view_if_needed()
    before = page.evaluate("() => window.scrollY")
    link.click()
    page.wait_for_timeout(400)
    return page.evaluate(
        """(before) => { const sol = document.querySelector('.solution.dropdown');
        const body = [...sol.children].find(c => !c.classList.contains('admonition-title'));
        return {open: !sol.classList.contains('toggle-hidden') && !!body && body.offsetHeight > 0,
                scrolled: Math.abs(window.scrollY - before)}; }""",
        before,
    )


@pytest.mark.parametrize("f", PAGES)
def test_no_page_is_wider_than_a_phone(reader, f):
    facts = reader[(f, 390)]
    assert facts["page_width"] <= facts["viewport"], (f, facts["page_width"], facts["viewport"])


@pytest.mark.parametrize("f", PAGES)
def test_no_formula_is_clipped_on_a_phone(reader, f):
    """Inline and display math at 390 px: whole, or in a box that scrolls and shows that it does."""
    phone = reader[(f, 390)]["phone"]
    assert phone["clipped"] == [], phone["clipped"][:5]
    assert phone["scrolls_unmarked"] == [], phone["scrolls_unmarked"][:5]


@pytest.mark.parametrize("f", PAGES)
def test_code_is_readable_on_a_phone(reader, f):
    """Code cells at 390 px wrap their long lines instead of scrolling, at 12 px or more."""
    phone = reader[(f, 390)]["phone"]
    assert phone["code_scrolls"] == [], phone["code_scrolls"][:5]
    assert all(px >= 12 for px in phone["code_px"]), sorted(phone["code_px"])[:3]


@pytest.mark.parametrize("f", CHAPTERS)
def test_a_tapped_figure_opens_at_full_size_on_a_phone(reader, f):
    tap = reader[(f, 390)]["tap"]
    assert tap is not None, f"{f}: no zoomable figure"
    assert tap["shown"] >= tap["natural"] - 1 > tap["inline"], tap
    assert tap["closed"], "a tap outside the picture closes the overlay"


@pytest.mark.parametrize("f", PAGES)
def test_no_output_or_equation_is_cut_on_a_laptop(reader, f):
    facts = reader[(f, 1280)]
    assert facts["outputs_cut"] == [], facts["outputs_cut"][:5]
    assert facts["equations_cut"] == [], facts["equations_cut"][:5]


@pytest.mark.parametrize("f", CHAPTERS)
def test_a_click_on_a_solution_title_opens_it_in_place(reader, f):
    sol = reader[(f, 1280)]["solution"]
    assert sol is not None, f"{f}: no solution"
    assert sol["open"] and sol["scrolled"] < 50, sol


@pytest.mark.parametrize("f", ["book/intro", *CHAPTERS, "book/references"])
def test_the_paper_is_one_click_away(reader, f):
    assert reader[(f, 1280)]["arxiv"] >= 1


def test_cite_this_book_and_the_licence(reader):
    intro = reader[("book/intro", 1280)]
    assert "Cite this book" in intro["text"] and "@misc{softlinbook2026" in intro["text"]
    assert "MIT licence" in intro["text"] and "MIT licence" in intro["footer"]


@pytest.mark.parametrize("f", CHAPTERS)
def test_chapter_pages_are_light_and_keep_their_icons(reader, f):
    facts = reader[(f, 1280)]
    assert not facts["fontawesome_js"]
    assert facts["bytes"] <= PAGE_BUDGET, f"{f}: {facts['bytes'] / 1e6:.2f} MB"
    assert "Font Awesome" in (facts["icon_font"] or ""), facts["icon_font"]


@pytest.mark.parametrize("f", CHAPTERS)
def test_self_checks_say_where_they_run(reader, f):
    """On the site every exercise's check says where it runs: in the box below it (softlin-reader.js,
    a number's check) or, as for every check, in Colab or Jupyter."""
    text = reader[(f, 1280)]["text"]
    assert "press Check" in text and "(in Colab or Jupyter: replace None" in text
    assert "No answer yet" not in text, "the notebook's sentence, not the site's"


HANDOUTS = ["01_measure_view", "05_icl_linear_regression", "labs/05_icl_linear_regression"]


def poppler() -> bool:
    """Whether pdftoppm and pdftotext (Debian's poppler-utils) are here, installed when root."""
    import os
    import shutil
    import subprocess

    if shutil.which("pdftoppm") and shutil.which("pdftotext"):
        return True
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "install", "-y", "-qq", "poppler-utils"], env=env,
                       capture_output=True, check=False)  # fmt: skip
    return bool(shutil.which("pdftoppm") and shutil.which("pdftotext"))


@pytest.fixture(scope="module")
def handouts(built_book, tmp_path_factory):
    """The handouts of lessons 1 and 5 and of lab 5, printed from the built site, with their pages'
    blank fractions (rendered as images) and the first page's text."""
    import subprocess

    import handouts as tool

    if not poppler():
        pytest.fail("pdftoppm/pdftotext are needed: apt-get install -y poppler-utils")
    _, _, stage = built_book
    out = tmp_path_factory.mktemp("handouts")
    printed = tool.print_pages(stage / "_build" / "html", HANDOUTS, out, tool.handout_pages(ROOT))
    facts = {}
    for page, done in zip(HANDOUTS, printed):
        first = subprocess.run(
            ["pdftotext", "-f", "1", "-l", "1", "-layout", str(done["pdf"]), "-"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        facts[page] = {**done, "blank": tool.blank_fractions(done["pdf"]), "first": first}
    report = {
        p: {"pages": len(f["blank"]), "blank": [round(b, 3) for b in f["blank"]],
            "changes": f["changes"], "tables": f["tables"]}
        for p, f in facts.items()
    }  # fmt: skip
    (ROOT / "_build" / "handout-report.json").write_text(json.dumps(report, indent=1))
    return facts


@pytest.mark.parametrize("page", HANDOUTS)
def test_a_handout_has_no_empty_first_page(handouts, page):
    """A handout of several pages does not start with a page holding little (a first block pushed to
    page 2); a one-page handout (a short lab) is its own last page."""
    lines = [line for line in handouts[page]["first"].splitlines() if line.strip()]
    if len(handouts[page]["blank"]) > 1:
        assert len(lines) >= 15, f"{page}: the first page holds {len(lines)} lines of text"
    else:
        assert lines, f"{page}: the handout is empty"


@pytest.mark.parametrize("page", HANDOUTS)
def test_no_handout_page_is_more_than_30_percent_blank(handouts, page):
    """Every page but the last is at most 30 % blank at its bottom (figures kept whole with their
    captions are shrunk to fit the room left rather than leaving it empty; sections start a page
    rather than leave their heading at the bottom of one)."""
    blank = handouts[page]["blank"]
    over = {n: round(b, 2) for n, b in enumerate(blank[:-1], 1) if b > 0.30}
    assert not over, f"{page}: pages more than 30 % blank (of {len(blank)}): {over}"


@pytest.mark.parametrize("page", HANDOUTS)
def test_printed_tables_fit_the_page_without_wrapping(handouts, page):
    tables = handouts[page]["tables"]
    assert tables["not_fitting"] == [], tables["not_fitting"][:3]


READING = "05_icl_linear_regression"
# code cells whose input the site folds or removes: a handout leaves it out already
FOLDED = {"hide-input", "hide-cell", "remove-cell", "remove-input", "exercise-check"}


def code_cells(md: Path) -> list[tuple[dict, str]]:
    """(metadata, source) of each code cell of a MyST notebook."""
    import yaml

    cells = []
    for m in re.finditer(r"^```\{code-cell\}[^\n]*\n(.*?)^```$", md.read_text(), re.S | re.M):
        body, meta = m.group(1), {}
        if body.startswith("---\n"):
            head, _, body = body[4:].partition("\n---\n")
            meta = yaml.safe_load(head) or {}
        elif body.startswith(":tags:"):
            head, _, body = body.partition("\n")
            meta = {"tags": [t.strip() for t in head.split(":", 2)[2].strip(" []").split(",")]}
        cells.append((meta, body))
    return cells


def squeeze(text: str) -> str:
    """Text without white space, so that a line wrapped by the print or by pdftotext still matches."""
    return re.sub(r"\s+", "", text)


@pytest.fixture(scope="module")
def reading_handout(built_book, tmp_path_factory):
    """Lesson 5's reading handout (``reading/05_...pdf``: the lesson without its code cells' input),
    printed from the built site: its text, pages' blank fractions and footer title."""
    import subprocess

    import handouts as tool

    if not poppler():
        pytest.fail("pdftoppm/pdftotext are needed: apt-get install -y poppler-utils")
    _, _, stage = built_book
    out = tmp_path_factory.mktemp("reading")
    titles = tool.handout_pages(ROOT)
    assert READING in tool.reading_pages(ROOT)
    (done,) = tool.print_pages(stage / "_build" / "html", [READING], out, titles, reading=True)
    assert done["pdf"] == out / "reading" / f"{READING}.pdf"
    text = subprocess.run(["pdftotext", str(done["pdf"]), "-"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    return {
        **done,
        "text": text,
        "blank": tool.blank_fractions(done["pdf"]),
        "title": titles[READING],
    }


def test_the_reading_handout_prints_the_lesson_without_its_code(handouts, reading_handout):
    """Lesson 5's reading handout holds none of the lines of code its full handout prints (the code
    cells the page shows unfolded), but every figure with its caption, the library code that
    ``show_source`` prints and the explorer's picture; it is shorter than the full handout, no page but
    the last is more than 30 % blank, and its footer says it is the reading handout."""
    import subprocess

    full = subprocess.run(["pdftotext", str(handouts[READING]["pdf"]), "-"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    full, reading = squeeze(full), squeeze(reading_handout["text"])
    cells = code_cells(ROOT / "book" / f"{READING}.md")
    shown = [body for meta, body in cells if not FOLDED & set(meta.get("tags", []))]
    lines = [
        squeeze(line)[:40] for body in shown for line in body.splitlines()
        if len(line.strip()) >= 20 and not line.strip().startswith("#")
    ]  # fmt: skip
    assert len(lines) >= 10, f"{READING}: few shown lines of code to look for: {lines}"
    printed = [line for line in lines if line in full]
    assert len(printed) >= 0.8 * len(lines), (
        f"the full handout misses lines of its shown code: {sorted(set(lines) - set(printed))[:5]}"
    )
    leaked = [line for line in lines if line in reading]
    assert not leaked, f"code printed in the reading handout: {leaked[:5]}"
    # what the cells print stays: each figure's caption (its words before the first formula), the
    # library code of show_source, the explorer's picture with its note
    captions = [meta["mystnb"]["figure"]["caption"] for meta, _ in cells
                if meta.get("mystnb", {}).get("figure", {}).get("caption")]  # fmt: skip
    assert len(captions) >= 2
    for caption in captions:
        opening = squeeze(" ".join(caption.split("$")[0].split()[:8]))
        assert opening in full and opening in reading, f"caption missing: {caption[:60]}"
    assert reading.count("Fig.5.") == full.count("Fig.5.") > 0
    assert "definfinite_prompt_risk(" in reading, "show_source's library code is missing"
    assert "show_source(" not in reading
    assert "Explorershownat" in reading
    pages, full_pages = len(reading_handout["blank"]), len(handouts[READING]["blank"])
    assert pages < full_pages, f"the reading handout has {pages} pages, the full one {full_pages}"
    over = {n: round(b, 2) for n, b in enumerate(reading_handout["blank"][:-1], 1) if b > 0.30}
    assert not over, f"reading handout: pages more than 30 % blank (of {pages}): {over}"
    assert squeeze(reading_handout["title"] + " (reading)") in reading


NOTEBOOKS = [str(p.relative_to(ROOT).with_suffix("")) for p in notebook_chapters(ROOT)]
CAPTION_NUMBER = re.compile(r'<span class="caption-number">([^<]*?)\s*</span>')


@pytest.mark.parametrize("f", NOTEBOOKS)
def test_the_plain_notebooks_number_as_the_site_does(built_book, f):
    """Every numbered figure, exercise and theorem-like block of a page carries, in the converted
    notebooks (Colab, download, student copies), the number the built site gives it: per page, the
    site's sequence of "Fig. 5.1", "Exercise 5.1", "Theorem 5.1", ... equals the converter's."""
    import colab_notebooks as cn

    _, _, stage = built_book
    html = (stage / "_build" / "html" / f"{f}.html").read_text()
    # the caption numbers of the article (not the solutions' links or the toc), in document order
    article = html[html.find("<article") : html.find("</article>")]
    site = [n for n in CAPTION_NUMBER.findall(article) if re.search(r"\d", n)]
    conv = cn.Converter(ROOT, commit="")
    ours = [  # the converter's numbers of the page, in document order (the order they were counted)
        conv.name(kind, number)
        for (page, kind, _), number in conv.numbers.items()
        if page == f and number is not None
    ]
    assert site == ours, f"{f}: the site numbers {site}, the converted notebooks {ours}"


@pytest.mark.parametrize("f", NOTEBOOKS)
def test_the_sites_download_is_the_plain_notebook_with_its_outputs(built_book, f):
    """*Download .ipynb* (the theme's button: ``_sources/<page>.ipynb``) gives the conversion Colab
    opens: no MyST left, a caption cell under every captioned figure, and the outputs the site shows."""
    import colab_notebooks as cn
    import nbformat

    _, _, stage = built_book
    nb = nbformat.read(stage / "_build" / "html" / "_sources" / f"{f}.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert cn.raw_myst(text) == [], cn.raw_myst(text)[:5]
    figures = [c for c in nb.cells if cn.shows_figure(c)]
    captions = [c for c in nb.cells if cn.CAPTION_TAG in c.metadata.get("tags", [])]
    assert len(captions) == len(figures)
    executed = nbformat.read(stage / f"{f}.ipynb", as_version=4)  # what the site shows
    with_outputs = [c.source for c in nb.cells if c.cell_type == "code" and c.get("outputs")]
    assert with_outputs == [
        c.source for c in executed.cells
        if c.cell_type == "code" and c.get("outputs")
        and "injected-parameters" not in c.metadata.get("tags", [])
    ], f"{f}: the download lost outputs"  # fmt: skip
    assert nb.metadata["softlin"]["audience"] == "colab"
