#!/usr/bin/env python
"""Print every chapter of the built site to a PDF handout, with headless Chromium (no TeX).

    python tools/handouts.py                        # every numbered chapter of _toc.yml -> _build/handouts/
    python tools/handouts.py 03_concentration --site _build/stage/_build/html --out /tmp/h

``make handouts`` runs this after building the site when there is none (``make book``). Each page is
opened offline, MathJax and the explorers are waited for, and Chromium prints it with the site's print
style (``book/_ext/static/book_site.css``: the article only, no sidebars, header or buttons; figures,
equations and explorers kept whole; explorers at their default picture, without controls; folded code and
solutions left out), on A4 with the chapter title and page numbers in the footer.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from html import escape
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_book import ROOT, chapter_title, lessons

READY_JS = """() => {
  const maths = document.querySelectorAll('main .math').length;
  const typeset = document.querySelectorAll('main .math mjx-container').length;
  const explorers = [...document.querySelectorAll('.softlin-explorer')];
  return (maths === 0 || typeset >= maths) && [...document.images].every(i => i.complete) &&
    explorers.every(e => e.classList.contains('softlin-explorer-ready'));
}"""

FOOTER = (
    '<div style="font-size:8px; width:100%; margin:0 12mm; color:#555; display:flex; '
    'justify-content:space-between;"><span>{title}</span>'
    '<span><span class="pageNumber"></span> / <span class="totalPages"></span></span></div>'
)


def chromium() -> str:
    import shutil

    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    sys.exit(
        "headless Chromium is needed: install Debian's `chromium` (apt-get install -y chromium)"
    )


def print_pages(
    site: Path, stems: list[str], out: Path, titles: dict[str, str]
) -> list[tuple[Path, float]]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"]
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.route(
            re.compile(r"^(https?|wss?)://"), lambda route: route.abort()
        )  # offline, as a copy is
        for stem in stems:
            page_file = site / "book" / f"{stem}.html"
            if not page_file.exists():
                sys.exit(f"{page_file} does not exist: build the site first (make book)")
            t0 = time.perf_counter()
            page = context.new_page()
            page.goto(page_file.as_uri(), wait_until="load")
            page.wait_for_function(READY_JS, timeout=60_000)
            page.emulate_media(media="print")
            target = out / f"{stem}.pdf"
            page.pdf(
                path=str(target),
                format="A4",
                print_background=True,
                display_header_footer=True,
                header_template="<span></span>",
                footer_template=FOOTER.format(title=escape(titles[stem])),
                margin={"top": "14mm", "bottom": "16mm", "left": "12mm", "right": "12mm"},
            )
            page.close()
            written.append((target, time.perf_counter() - t0))
        browser.close()
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "chapters", nargs="*", help="chapter stems (default: every numbered chapter of _toc.yml)"
    )
    ap.add_argument("--site", type=Path, default=ROOT / "_build" / "stage" / "_build" / "html")
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "handouts")
    args = ap.parse_args(argv)
    chapters = lessons(ROOT)
    known = {md.stem: md for md in chapters}
    stems = args.chapters or list(known)
    unknown = [s for s in stems if s not in known]
    if unknown:
        ap.error(f"unknown chapters {unknown}; known: {list(known)}")
    titles = {s: f"{i}. {chapter_title(known[s])}" for i, s in enumerate(known, 1)}
    for target, seconds in print_pages(args.site.resolve(), stems, args.out.resolve(), titles):
        print(f"{target}: {target.stat().st_size / 1e6:.2f} MB in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
