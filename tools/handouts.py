#!/usr/bin/env python
"""Print the chain of results, every lesson and every lab of the built site to PDF handouts, and every
lesson again without its code (a reading handout), with headless Chromium (no TeX).

    python tools/handouts.py                  # all of them, reading handouts too -> _build/handouts/
    python tools/handouts.py reading/03_concentration  # lesson 3's reading handout alone
    python tools/handouts.py chain_of_results # the chain of results alone (two pages)
    python tools/handouts.py run_sheets       # the run sheets alone (a page per session), in instructor/
    python tools/handouts.py slides           # each lesson's deck, one slide a page, in slides/
    python tools/handouts.py 05_icl_linear_regression labs/05_icl_linear_regression --measure
    python tools/handouts.py 03_concentration --site _build/stage/_build/html --out /tmp/h

``make handouts`` runs this after building the site when there is none (``make book``). The syllabus
(``book/syllabus.md``, one page for students) prints to ``syllabus.pdf``; the chain of
results (``book/chain_of_results.md``, the course's one-page summary) prints to ``chain_of_results.pdf``,
a lesson's handout to ``NN_name.pdf``, its lab's to ``labs/NN_name.pdf``; the lecturer's guide, the
run sheets and the decks' speaker notes, for the lecturer alone, to ``instructor/`` (``lecturer_guide.pdf``,
``run_sheets.pdf``, ``NN_name-notes.pdf``), so that the rest of the folder can go to students as it is. A lesson's reading handout
(``reading/NN_name``, to read before its session) prints to ``reading/NN_name.pdf``: the same page
printed the same way, but without the input of any code cell (``READING_CSS``, for the page's root
marked ``softlin-reading``); what the cells print stays: text, tables, figures with their captions, the
library code that ``show_source`` shows, the explorers. Its footer says "(reading)" after the title.

Each page is opened offline, MathJax and the explorers are waited for, and Chromium prints it with the
site's print style (``book/_ext/static/book_site.css``: the article only, no sidebars, header or
buttons; figures with their captions, equations and explorers kept whole; explorers at their default
picture, without controls; folded code and solutions left out), on A4 with the page's title and page
numbers in the footer. Before printing, at the width of the printed page:

* printed tables (text outputs whose columns are aligned by spaces, and tables that cells print) get a
  font small enough that no column wraps (``softlinFitPrint`` of ``softlin-reader.js``, which also runs
  when a reader prints from the browser); a table or exercise shorter than 30 % of a page is kept whole,
  a longer one may continue on the next page;
* the page stays as shown (folded blocks folded; the page's own print handlers, which open every
  folded block, are not run), with every web font loaded, so that each print lays it out the same.

Then it is printed, and each page's blank fraction measured on the PDF (:func:`blank_fractions`). While
a page (the last apart) is more than ``MAX_BLANK`` blank, the block kept whole that opens the next page
(a figure with its caption, an explorer, a table output: it did not fit the room left) is shrunk to fit
that room, never below ``MIN_SCALE`` of its height (a caption keeps its size), and the page printed
again; a block that still does not move up gets its size back. Figures are kept whole with their
captions, headings with what follows them; code and printed output may continue on the next page.

Beside the PDFs: the syllabus to edit (``syllabus.md``, its source without the site's label and print
style, and ``syllabus.html``, the same rendered with markdown-it: Word, LibreOffice and Google Docs open
it as a document to edit), and each lesson's slide deck printed one slide a page (``slides/NN_name.pdf``,
reveal.js's ``?print-pdf`` view, every fragment shown), and its speaker notes alone, slide by slide
(``instructor/NN_name-notes.pdf``, the deck's ``?script`` view, kept with the lecturer's pages); the page name ``slides`` prints them alone.

``--measure`` renders each PDF's pages as images (``pdftoppm`` of poppler-utils) and prints the blank
fraction at the bottom of every page (:func:`blank_fractions`).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from html import escape
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_book import ROOT, chapter_title, is_lab, is_lesson, notebook_chapters, page_name

MM = 96 / 25.4  # CSS pixels per millimetre
PAPER = {"width": 210, "height": 297}  # A4, mm
MARGIN = {"top": 14, "bottom": 16, "left": 12, "right": 12}  # mm
#: The smallest a figure, explorer or equation is shrunk to, as a fraction of its printed height.
MIN_SCALE = 0.45
#: The most a printed page (the last apart) may be blank at its bottom before the block that opens the
#: next page is shrunk to end it; at most MAX_ROUNDS reprints per handout.
MAX_BLANK = 0.28
MAX_ROUNDS = 16

READY_JS = """() => {
  const maths = document.querySelectorAll('main .math').length;
  const typeset = document.querySelectorAll('main .math mjx-container').length;
  const explorers = [...document.querySelectorAll('.softlin-explorer')];
  return (maths === 0 || typeset >= maths) && [...document.images].every(i => i.complete) &&
    explorers.every(e => e.classList.contains('softlin-explorer-ready'));
}"""

# The page's own reactions to printing (beforeprint/afterprint: the theme's toggles open every folded
# block, then close them again) would change the layout between its measurement and the print, and
# differently at each print: in a handout the page stays as it is shown, folded blocks folded (the
# print style leaves them out, like folded code and solutions), explorers at their default picture
# (as loaded), printed tables fitted by softlinFitPrint, called here.
# On paper the opening box's "CPU run time: ... when this site was built (...)" means nothing: the
# printed box keeps its reading time and drops that sentence and what follows it in its paragraph.
NO_RUN_TIME_JS = """
() => {
  for (const p of document.querySelectorAll('.admonition p')) {
    const walk = document.createTreeWalker(p, NodeFilter.SHOW_TEXT);
    let node;
    while ((node = walk.nextNode())) {
      const at = node.textContent.indexOf('CPU run time:');
      if (at < 0) continue;
      node.textContent = node.textContent.slice(0, at).trimEnd();
      let cut = node;
      while (cut && cut !== p) {
        while (cut.nextSibling) cut.parentNode.removeChild(cut.nextSibling);
        cut = cut.parentNode;
      }
      break;
    }
  }
}
"""

NO_PRINT_EVENTS_JS = """
(() => {
  const add = window.addEventListener;
  window.addEventListener = function (type, listener, options) {
    if (type === 'beforeprint' || type === 'afterprint') return;
    return add.call(this, type, listener, options);
  };
})();
"""

LOAD_FONTS_JS = """async () => {
  await Promise.all([...document.fonts].map(f => f.load().catch(() => null)));
  await document.fonts.ready;
}"""

# Set-up of the page for printing: a table or an exercise is kept whole on a page when short (under 30 % of
# a page), a longer one may continue on the next page between two rows or lines rather than leave a gap
# its size; and window.softlinShrink(block, room), which shrinks a block kept whole (a figure with its
# caption, an explorer, a table output) so that it and the space before it take at most `room` pixels:
# its pictures' height is scaled from their natural height (a caption keeps its size), never below
# minScale; a block without a picture gets a smaller font. Returns the scale, or 0 when it cannot.
SETUP_JS = r"""
([H, minScale]) => {
  const art = document.querySelector('article.bd-article') || document.querySelector('main');
  const CONTENT = 'p, li, pre, figure, img, table, div.math, h1, h2, h3, h4, dt, dd, blockquote, ' +
                  '.softlin-explorer, .admonition-title, caption, figcaption';
  for (const e of art.querySelectorAll('table, .exercise')) {
    const short = e.getBoundingClientRect().height < 0.3 * H;
    e.style.setProperty('break-inside', short ? 'avoid' : 'auto', 'important');
  }
  const gapBefore = (e) => {  // the margins between a block and the content before it
    const top = e.getBoundingClientRect().top;
    let bottom = -Infinity;
    for (const c of art.querySelectorAll(CONTENT)) {
      if (e.contains(c) || c.contains(e)) continue;
      const r = c.getBoundingClientRect();
      if (r.height && r.bottom <= top + 1 && r.bottom > bottom) bottom = r.bottom;
    }
    return bottom === -Infinity ? 0 : Math.max(0, top - bottom);
  };
  window.softlinShrink = (e, room) => {
    const gap = gapBefore(e);
    const imgs = e.matches('img') ? [e] : [...e.querySelectorAll('img')];
    const height = e.getBoundingClientRect().height;
    const natural = (i) => +(i.dataset.softlinNatural || i.getBoundingClientRect().height);
    if (imgs.length) {
      const full = imgs.reduce((s, i) => s + natural(i), 0);
      const current = imgs.reduce((s, i) => s + i.getBoundingClientRect().height, 0);
      const scale = (room - gap - (height - current)) / full;
      if (!(scale >= minScale && scale * full < current - 1)) return 0;
      imgs.forEach(i => {
        const h = natural(i);
        i.dataset.softlinNatural = String(h);
        i.style.setProperty('max-height', (h * scale).toFixed(1) + 'px', 'important');
        i.style.setProperty('width', 'auto', 'important'); });
      return scale;
    }
    const scale = (room - gap) / natural(e);
    if (!(scale >= minScale && scale * natural(e) < height - 1)) return 0;
    e.dataset.softlinNatural = String(natural(e));
    e.style.fontSize = (100 * scale).toFixed(1) + '%';
    return scale;
  };
}
"""

# After the print fit: every printed table (text output aligned by spaces, or a table a cell printed)
# keeps one line per row (white-space: pre) and fits the printed column; those that do not are listed.
TABLES_JS = r"""
() => {
  const tables = [...document.querySelectorAll('main .cell_output pre, main .cell_output table')]
    .filter(e => e.offsetParent !== null && (e.tagName === 'TABLE' || /\S {2,}\S/.test(e.textContent)));
  const bad = tables.filter(e => !e.classList.contains('softlin-print-table') ||
                                 e.scrollWidth > e.parentElement.clientWidth + 1)
    .map(e => ({text: e.textContent.trim().slice(0, 60), width: e.scrollWidth,
                room: e.parentElement.clientWidth, fitted: e.classList.contains('softlin-print-table')}));
  return {tables: tables.length, not_fitting: bad};
}
"""

# Blocks are found by the text that opens them on a printed page (a figure's caption, an explorer's note,
# a table's first cell: a picture has no text; or a heading, which goes with the block after it),
# compared on letters and digits only. SHRINK_BY_TEXT_JS acts on the block that opens the page after a
# page more than MAX_BLANK blank: a figure, explorer or table output is shrunk to fit that page's room;
# an exercise or table kept whole because it is short is let continue on the next page.
# RESTORE_BY_TEXT_JS undoes that when the block did not move up, and marks it to be left alone.
FIND_JS = r"""
  const key = (t) => (t || '').normalize('NFKD').replace(/[^A-Za-z0-9]/g, '');
  const art = document.querySelector('article.bd-article') || document.querySelector('main');
  const KEEP = 'figure, .softlin-explorer, .cell_output table';
  const WHOLE = '.exercise, table';  // kept whole when short (SETUP_JS)
  const OPENERS = 'h1, h2, h3, h4, figcaption, .softlin-explorer-print, caption, th, td, p, pre';
  const opener = (text) => {
    const want = key(text).slice(0, 30);
    if (want.length < 8) return null;
    for (const e of art.querySelectorAll(OPENERS)) {
      const have = key(e.innerText);
      if (have.startsWith(want) || (have.length >= 8 && want.startsWith(have))) return e;
    }
    return null;
  };
  // the block an opening text belongs to, and the height of what comes before it on that page (a
  // heading that moved with it)
  const find = (text) => {
    const e = opener(text);
    if (!e) return null;
    if (!/^H\d$/.test(e.tagName)) {
      const block = e.closest(KEEP) || e.closest(WHOLE);
      return block ? {block, before: 0} : null;
    }
    const all = [...art.querySelectorAll(KEEP + ', ' + WHOLE + ', p, pre, li')];
    const next = all.find(x => (e.compareDocumentPosition(x) & Node.DOCUMENT_POSITION_FOLLOWING) &&
                               x.offsetParent !== null);
    if (!next) return null;
    const block = next.closest(KEEP) || next.closest(WHOLE);
    if (!block) return null;
    return {block, before: block.getBoundingClientRect().top - e.getBoundingClientRect().top};
  };
  const name = (b) => b.tagName.toLowerCase() + (b.id ? '#' + b.id : '');
"""

SHRINK_BY_TEXT_JS = r"""
([text, room]) => {
  FIND_JS
  const found = find(text);
  if (!found || found.block.dataset.softlinKeep) return null;
  const {block, before} = found;
  if (block.matches(KEEP) && window.softlinShrink) {
    const scale = window.softlinShrink(block, room - before);
    return scale ? {block: name(block), scale: +scale.toFixed(2)} : null;
  }
  if (block.matches(WHOLE) && getComputedStyle(block).breakInside === 'avoid') {
    block.style.setProperty('break-inside', 'auto', 'important');
    block.dataset.softlinReleased = '1';
    return {block: name(block), released: true};
  }
  return null;
}
""".replace("FIND_JS", FIND_JS)

RESTORE_BY_TEXT_JS = r"""
(text) => {
  FIND_JS
  const found = find(text);
  if (!found) return null;
  const block = found.block;
  for (const e of [block, ...block.querySelectorAll('[data-softlin-natural]')]) {
    if (!e.dataset.softlinNatural) continue;
    ['max-height', 'width', 'font-size'].forEach(k => e.style.removeProperty(k));
    delete e.dataset.softlinNatural;
  }
  if (block.dataset.softlinReleased) {
    block.style.setProperty('break-inside', 'avoid', 'important');
    delete block.dataset.softlinReleased;
  }
  block.dataset.softlinKeep = '1';
  return {block: name(block), restored: true};
}
""".replace("FIND_JS", FIND_JS)

# A reading handout (print_pages(..., reading=True)): the page's root gets the class softlin-reading and
# this style, which leaves out every code cell's input (its code, folded or not) and a cell that prints
# nothing; a cell's output (printed text and tables, figures with their captions, show_source's library
# code, explorers) stays, printed as in the full handout. Added here rather than in the site's
# book_site.css, so that any built site prints it without a rebuild.
READING_CLASS = "softlin-reading"
READING_CSS = """
@media print {
  html.softlin-reading div.cell > div.cell_input,
  html.softlin-reading div.cell > details.above-input,
  html.softlin-reading div.cell:not(:has(> div.cell_output)) { display: none !important; }
}
"""
#: The folder of the reading handouts, and the prefix that names one on the command line.
READING = "reading"

FOOTER = (
    '<div style="font-size:8px; width:100%; margin:0 12mm; color:#555; display:flex; '
    'justify-content:space-between;"><span>{title}</span>'
    '<span><span class="pageNumber"></span> / <span class="totalPages"></span></span></div>'
)


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    sys.exit(
        "headless Chromium is needed: install Debian's `chromium` (apt-get install -y chromium)"
    )


def print_pages(
    site: Path, pages: list[str], out: Path, titles: dict[str, str], reading: bool = False
) -> list[dict]:
    """Print each page (``01_measure_view``, ``labs/01_measure_view``) of the site to ``out``; return,
    per page, {pdf, seconds, changes (what the pagination shrank or moved), tables (how many printed
    tables, and those that do not fit the printed column), blank (each printed page's blank fraction)}.
    With ``reading``, each is printed without its code cells' input (``READING_CSS``) to
    ``out/reading/NAME.pdf``, "(reading)" after its title in the footer."""
    from playwright.sync_api import sync_playwright

    width = round((PAPER["width"] - MARGIN["left"] - MARGIN["right"]) * MM)
    height = (PAPER["height"] - MARGIN["top"] - MARGIN["bottom"]) * MM
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium(),
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        # the printed page's width, so that the layout measured here is the one Chromium prints
        context = browser.new_context(viewport={"width": width, "height": 1000})
        context.route(
            re.compile(r"^(https?|wss?)://"), lambda route: route.abort()
        )  # offline, as a copy is
        context.add_init_script(NO_PRINT_EVENTS_JS)
        for name in pages:
            page_file = site / "book" / f"{name}.html"
            if not page_file.exists():
                sys.exit(f"{page_file} does not exist: build the site first (make book)")
            t0 = time.perf_counter()
            page = context.new_page()
            page.goto(page_file.as_uri(), wait_until="load")
            page.wait_for_function(READY_JS, timeout=60_000)
            page.emulate_media(media="print")
            page.evaluate(NO_RUN_TIME_JS)
            if reading:
                page.add_style_tag(content=READING_CSS)
                page.evaluate("(c) => document.documentElement.classList.add(c)", READING_CLASS)
            # Every web font now, not when the first print asks for it: a font that arrives during a
            # print changes the layout after it was measured.
            page.evaluate(LOAD_FONTS_JS)
            page.evaluate("() => window.softlinFitPrint && window.softlinFitPrint()")
            tables = page.evaluate(TABLES_JS)
            page.evaluate(SETUP_JS, [height, MIN_SCALE])
            changes = []
            folder = (
                out / READING if reading else out / INSTRUCTOR if name in FOR_INSTRUCTORS else out
            )
            target = folder / f"{name}.pdf"
            target.parent.mkdir(parents=True, exist_ok=True)
            title = f"{titles[name]} (reading)" if reading else titles[name]

            def pdf(page=page, target=target, title=title):
                print_pdf(page, target, title)

            # Print, find the first page (the last apart) more than MAX_BLANK blank, shrink the block
            # kept whole that opens the next page (it did not fit) to fit the room left, print again;
            # a block that still opens that page gets its size back and is left as it is.
            pdf()
            blanks = blank_fractions(target) if shutil.which("pdftoppm") else []
            given_up: set[str] = set()
            for _ in range(MAX_ROUNDS if blanks else 0):
                firsts = [first_line(target, n) for n in range(1, len(blanks) + 1)]
                gappy = [
                    k for k, b in enumerate(blanks[:-1])
                    if b > MAX_BLANK and firsts[k + 1] not in given_up
                ]  # fmt: skip
                if not gappy:
                    break
                k = gappy[0]
                opener = firsts[k + 1]
                # the blank, less two lines' worth of slack; one fifth of a line when that is what
                # it takes (the reprint shows whether it fitted)
                done = page.evaluate(SHRINK_BY_TEXT_JS, [opener, blanks[k] * height - 24])
                done = done or page.evaluate(SHRINK_BY_TEXT_JS, [opener, blanks[k] * height - 4])
                if not done:
                    given_up.add(opener)
                    continue
                pdf()
                after = blank_fractions(target)
                if any(same_text(opener, first_line(target, n)) for n in (k + 2, k + 3)):
                    page.evaluate(RESTORE_BY_TEXT_JS, opener)  # it did not move up: no use
                    given_up.add(opener)
                    pdf()
                    after = blank_fractions(target)
                else:
                    changes.append({"page": k + 1, "blank": round(blanks[k], 2), **done})
                blanks = after
            page.close()
            written.append(
                {"pdf": target, "seconds": time.perf_counter() - t0, "changes": changes,
                 "tables": tables, "blank": [float(b) for b in blanks]}
            )  # fmt: skip
        browser.close()
    return written


def same_text(a: str, b: str) -> bool:
    """Whether two openings of text agree (letters and digits only, on the shorter's first 30)."""
    import unicodedata

    def key(t):
        return re.sub(r"[^A-Za-z0-9]", "", unicodedata.normalize("NFKD", t))[:30]

    a, b = key(a), key(b)
    return min(len(a), len(b)) >= 8 and (a.startswith(b) or b.startswith(a))


def first_line(pdf: Path, number: int) -> str:
    """The first line of text of page ``number`` (from 1) of ``pdf`` (``pdftotext``)."""
    text = subprocess.run(
        ["pdftotext", "-f", str(number), "-l", str(number), str(pdf), "-"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def print_pdf(page, target: Path, title: str) -> None:
    """Print the open ``page`` (playwright) to ``target``: A4, the title and page numbers below."""
    page.pdf(
        path=str(target),
        format="A4",
        print_background=True,
        display_header_footer=True,
        header_template="<span></span>",
        footer_template=FOOTER.format(title=escape(title)),
        margin={k: f"{v}mm" for k, v in MARGIN.items()},
    )


def blank_fractions(pdf: Path, dpi: int = 40) -> list[float]:
    """The blank fraction of each page of ``pdf``: the share of the printable area's height (margins and
    footer excluded) below the page's last row of ink. Renders the pages with ``pdftoppm``."""
    import numpy as np
    from PIL import Image

    if shutil.which("pdftoppm") is None:
        raise RuntimeError("pdftoppm is needed: apt-get install -y poppler-utils")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            ["pdftoppm", "-r", str(dpi), "-gray", "-png", str(pdf), f"{tmp}/p"], check=True
        )
        out = []
        for png in sorted(Path(tmp).glob("p-*.png"), key=lambda p: int(p.stem.split("-")[-1])):
            img = np.asarray(Image.open(png).convert("L"), dtype=np.int16)
            px_per_mm = img.shape[0] / PAPER["height"]
            top = round(MARGIN["top"] * px_per_mm)
            bottom = img.shape[0] - round(MARGIN["bottom"] * px_per_mm)
            area = img[top:bottom]
            # a row holds ink when a few of its pixels are dark: text, a figure, a rule; not the
            # light background of a code cell, nor the one-pixel border line of a box cut by the page
            inked = np.nonzero((area < 200).sum(axis=1) >= 4)[0]
            last = inked[-1] + 1 if inked.size else 0
            out.append(1 - last / area.shape[0])
        return out


#: Pages printed before the lessons: the syllabus (one page, for students), the course's summary
#: sheet, the lecturer's run sheets (one page per session) and the quiz sheet (the quizzes without
#: their explanations or key).
SUMMARY_PAGES = (
    "syllabus",
    "chain_of_results",
    "lecturer_guide",
    "run_sheets",
    "run_sheets_two_hours",
    "quizzes",
)
# Printed into their own folder, ``instructor/``, apart from what students get
FOR_INSTRUCTORS = ("lecturer_guide", "run_sheets", "run_sheets_two_hours")
INSTRUCTOR = "instructor"


def handout_pages(root: Path = ROOT) -> dict[str, str]:
    """{page: footer title} of the chain of results ("The chain of results"), the run sheets, every lesson ("1. The
    measure view of attention") and every lab (its own title, "Lab 1: ..."), in reading order."""
    titles = {
        name: chapter_title(root / "book" / f"{name}.md")
        for name in SUMMARY_PAGES
        if (root / "book" / f"{name}.md").exists()
    }
    for n, md in enumerate([m for m in notebook_chapters(root) if is_lesson(m)], 1):
        titles[page_name(md)] = f"{n}. {chapter_title(md)}"
    for md in notebook_chapters(root):
        if is_lab(md):
            titles[page_name(md)] = chapter_title(md)
    return titles


def reading_pages(root: Path = ROOT) -> list[str]:
    """The pages that get a reading handout: every lesson (``01_measure_view``), in reading order."""
    return [page_name(md) for md in notebook_chapters(root) if is_lesson(md)]


SLIDES = "slides"
SYLLABUS_CSS = (
    "body { font-family: Calibri, Arial, sans-serif; font-size: 11pt; max-width: 46em; }"
    " table { border-collapse: collapse; } td, th { border: 1px solid #999; padding: 2px 6px; }"
)


def editable_syllabus(root: Path, out: Path) -> list[Path]:
    """Write the syllabus for the lecturer to edit: ``out/syllabus.md``, ``book/syllabus.md`` without the
    page's MyST label and its ``<style>`` block (the print layout of the site), and ``out/syllabus.html``,
    that Markdown rendered by markdown-it (tables on) as a plain document. Return both paths."""
    from markdown_it import MarkdownIt

    text = (root / "book" / "syllabus.md").read_text()
    text = re.sub(r"^\(syllabus\)=\n", "", text)
    text = re.sub(r"<style>.*?</style>\n+", "", text, flags=re.S)
    role = re.search(r"\{[a-z:]+\}`", text)
    if role:
        raise ValueError(
            f"book/syllabus.md uses the MyST role {role[0]}: the editable copy would show it raw"
        )
    md = out / "syllabus.md"
    md.write_text(text)
    body = MarkdownIt("commonmark").enable("table").render(text)
    page = out / "syllabus.html"
    page.write_text(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Syllabus</title>'
        f"<style>{SYLLABUS_CSS}</style></head><body>\n{body}</body></html>\n"
    )
    return [md, page]


def print_decks(site: Path, out: Path) -> list[dict]:
    """Print each lesson's deck (``site/slides/NN_name.html``) to ``out/slides/NN_name.pdf``, one
    slide a page with every fragment shown (reveal.js's ``?print-pdf`` view), and to
    ``out/instructor/NN_name-notes.pdf``, the speaker notes alone, slide by slide, on a few A4 pages
    (the deck's ``?script`` view, ``tools/slides.py``): for the lecturer, with the instructor's pages,
    since the notes give the exercises' answers; return {pdf, seconds} per deck, the notes' PDF
    under ``notes``. Exit with a message when the site has no decks (build it: ``make book``)."""
    from playwright.sync_api import sync_playwright

    decks = [
        site / "slides" / f"{page_name(md)}.html" for md in notebook_chapters(ROOT) if is_lesson(md)
    ]
    missing = [d.name for d in decks if not d.exists()]
    if missing:
        sys.exit(f"{site / 'slides'} lacks the decks {missing}: build the site first (make book)")
    (out / SLIDES).mkdir(parents=True, exist_ok=True)
    (out / INSTRUCTOR).mkdir(parents=True, exist_ok=True)
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium(),
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        context = browser.new_context(viewport={"width": 1280, "height": 720})
        context.route(re.compile(r"^(https?|wss?)://"), lambda route: route.abort())
        for deck in decks:
            t0 = time.perf_counter()
            printed = {}
            for suffix, query, ready in (
                ("", "?print-pdf", "() => window.Reveal && Reveal.isReady() && window.pdfNumbered"),
                ("-notes", "?script", "() => window.scriptReady === true"),
            ):
                folder = out / (INSTRUCTOR if suffix else SLIDES)
                page = context.new_page()
                page.goto(deck.as_uri() + query, wait_until="load")
                page.wait_for_function(ready, timeout=60_000)
                page.wait_for_timeout(300)
                target = folder / f"{deck.stem}{suffix}.pdf"
                target.write_bytes(page.pdf(print_background=True, prefer_css_page_size=True))
                page.close()
                printed[suffix] = target
            written.append(
                {
                    "pdf": printed[""],
                    "notes": printed["-notes"],
                    "seconds": time.perf_counter() - t0,
                }
            )
        browser.close()
    return written


#: The folder's README: which PDF is for whom (book/instructor.md, "The kit", says the same).
README = """# Handouts (A4 PDFs, printed from the built site)

- `syllabus.pdf`: one page, for students, with the first reading, a week before session 1; `syllabus.md` and `syllabus.html`, the
  same to edit first (your name, dates, room, weights): open the `.html` in Word, LibreOffice or
  Google Docs, or edit the `.md`.
- `chain_of_results.pdf`: the paper's results in a chain, two pages, for students.
- `quizzes.pdf`: every lesson's quiz, each ending with an entry ticket to cut off.
- `01_measure_view.pdf` ... `07_beyond_the_paper.pdf`: each lesson whole, code and figures included,
  without solutions; `labs/`: the labs the same way.
- `reading/`: each lesson without its code cells' input (figures and printed results kept), the
  lighter reading handout to print before a session.
- `slides/`: each lesson's deck, one slide a page (every step shown, no speaker notes; numbered from
  the slide after the title, as the run sheets count), to project without the site or to annotate.
- `instructor/`: for the lecturer only, since it gives answers: the lecturer's guide, the term week by
  week on two pages (`lecturer_guide.pdf`), the run sheets, one page per session (`run_sheets.pdf`,
  and `run_sheets_two_hours.pdf` for two-hour sessions), and each deck's speaker notes slide by slide
  (`NN_name-notes.pdf`, a few pages a deck), for the lectern. Everything outside this folder can go to
  students as it is.
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "pages",
        nargs="*",
        help="pages, e.g. chain_of_results 01_measure_view labs/01_measure_view "
        f"{READING}/01_measure_view (a lesson's reading handout); default: all, reading handouts too",
    )
    ap.add_argument("--site", type=Path, default=ROOT / "_build" / "stage" / "_build" / "html")
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "handouts")
    ap.add_argument(
        "--measure", action="store_true", help="print the blank fraction of every printed page"
    )
    args = ap.parse_args(argv)
    titles = handout_pages(ROOT)
    readings = [f"{READING}/{name}" for name in reading_pages(ROOT)]
    pages = args.pages or list(titles) + readings + [SLIDES]
    unknown = [s for s in pages if s not in titles and s not in readings and s != SLIDES]
    if unknown:
        ap.error(f"unknown pages {unknown}; known: {list(titles) + readings + [SLIDES]}")
    # Printing all of it starts from an empty folder, so nothing of an older build is left over (a
    # file moved since, such as speaker notes with answers); only a folder this script wrote, with its
    # README, is emptied, never one of the user's own.
    readme = args.out / "README.md"
    if not args.pages and readme.is_file() and readme.read_text().startswith(README[:40]):
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "README.md").write_text(README)
    site, out = args.site.resolve(), args.out.resolve()
    full = [s for s in pages if s in titles]
    read = [s.removeprefix(f"{READING}/") for s in pages if s in readings]
    printed = print_pages(site, full, out, titles) if full else []
    printed += print_pages(site, read, out, titles, reading=True) if read else []
    if "syllabus" in full:
        for path in editable_syllabus(ROOT, out):
            print(f"{path}: to edit")
    for deck in print_decks(site, out) if SLIDES in pages else []:
        print(
            f"{deck['pdf']}: {deck['pdf'].stat().st_size / 1e6:.2f} MB, and {deck['notes'].name} "
            f"with the speaker notes, in {deck['seconds']:.1f} s"
        )
    failed = False
    for done in printed:
        target, changes, tables = done["pdf"], done["changes"], done["tables"]
        line = f"{target}: {target.stat().st_size / 1e6:.2f} MB in {done['seconds']:.1f} s"
        if tables["not_fitting"]:
            failed = True
            line += f"; printed tables wider than the page: {tables['not_fitting'][:3]}"
        if changes:
            shrunk = sum("scale" in c for c in changes)
            line += f" ({shrunk} block(s) shrunk to fit a page's room"
            line += (
                f", {len(changes) - shrunk} let continue on the next page)"
                if len(changes) > shrunk
                else ")"
            )
        if args.measure:
            blanks = done["blank"] or blank_fractions(target)
            worst = max(blanks[:-1], default=0.0)
            over = [f"p{i} {b:.0%}" for i, b in enumerate(blanks[:-1], 1) if b > 0.30]
            line += f"; {len(blanks)} pages, most blank (last excepted) {worst:.0%}" + (
                f", over 30 %: {', '.join(over)}" if over else ""
            )
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
