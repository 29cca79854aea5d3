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
* on the site, a self-check says where it runs ("run this cell in Colab or Jupyter").

The measures are written to ``_build/reader-report.json``; screenshots at both widths to
``_build/screenshots/reader/``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from build_book import lessons, toc_files
from conftest import chromium_path

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
        browser = p.chromium.launch(
            executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"]
        )
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
    text = reader[(f, 1280)]["text"]
    assert "run this cell in Colab or Jupyter to check your answer" in text


@pytest.mark.parametrize("stem", ["01_measure_view", "05_icl_linear_regression"])
def test_a_handout_has_no_empty_first_page(built_book, stem, tmp_path):
    import shutil
    import subprocess
    import sys

    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    _, _, stage = built_book
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "handouts.py"), stem, "--site",
         str(stage / "_build" / "html"), "--out", str(tmp_path)],
        check=False,
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    first = subprocess.run(
        ["pdftotext", "-f", "1", "-l", "1", "-layout", str(tmp_path / f"{stem}.pdf"), "-"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    lines = [line for line in first.splitlines() if line.strip()]
    assert len(lines) >= 25, f"{stem}: the first page holds {len(lines)} lines of text"
