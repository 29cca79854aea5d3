"""The built site, as a reader's browser shows it (headless Debian Chromium driven by playwright).

Every page of ``_toc.yml`` is opened from the fast-mode test build (the ``built_book`` fixture) with the
network cut off, and checked for what a reader would see:

* MathJax typeset the math: every ``.math`` element holds an ``mjx-container``, no raw TeX is left;
* every image loaded and has real alt text (not empty, not matplotlib's ``<Figure size ...>`` repr);
  every content image outside a widget is a numbered, captioned figure with a label (``id``);
* notebook pages have the theme's Colab launch link and the "Open in Colab" badge, both pointing at
  the chapter's paired ``.ipynb`` on the configured repository branch, and that file exists here;
* every internal link resolves to an existing file, and its ``#anchor`` to an element of that page;
* no error text: no traceback or ``...Error:`` line in a cell output, no stderr output, no Sphinx
  system message, no JavaScript exception, no failed or external (CDN) request;
* no frozen ipywidgets control is left: no widget view or saved widget state, no widget manager loaded;
  every explorer is a precomputed one (``softlin.book.widgets.explorer``), and moving each of its controls
  changes the picture (decoded and compared pixel by pixel), and moving back shows the default picture
  again; each page's explorers add at most 3 MB;
* the API page documents every public name of the modules it lists, with its docstring;
* in the theme's dark mode, every figure and explorer picture keeps its light background and the text of
  cell outputs, tables and explorer controls keeps a contrast ratio of at least 4.5 (WCAG AA);
* in print (the handouts), sidebars, header and buttons are hidden and explorers show their default picture
  without controls.

The site checked is the default-mode build (``built_book``), the one that is published. A full-page
screenshot of every page is written to ``_build/screenshots/`` (dark mode: ``_build/screenshots/dark/``),
and the figures measured here (page sizes, explorer states, moves) to ``_build/site-report.json``.
Chromium comes from Debian (``apt-get install -y chromium``, done here when missing and running as root).
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pytest
import yaml
from build_book import labs, lessons, notebook_chapters, page_name, toc_files
from conftest import CHROMIUM_ARGS, chromium_path, shoot
from PIL import Image

pytestmark = [pytest.mark.book, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "_build" / "screenshots"
PAGES = toc_files(ROOT / "_toc.yml")
NOTEBOOK_PAGES = {str(p.relative_to(ROOT).with_suffix("")) for p in notebook_chapters(ROOT)}

# What Chromium prints on the console that is not an error of this site: the widget manager validates
# its own JSON schema with ajv in strict mode and warns about it (a warning, listed for clarity).
BENIGN_CONSOLE = [re.compile(r"strict mode: use allowUnionTypes")]
DEFAULT_REPR = re.compile(
    r"^\s*(<Figure size|<matplotlib|Figure\(|<IPython|image/png|png$|output_)", re.IGNORECASE
)
# A traceback, or a line that starts like an exception report ("ValueError: ..."); a printed "Error: 0.01"
# or "relative error" is not matched.
ERROR_LINE = re.compile(
    r"Traceback \(most recent call last\)|^\s*[A-Z]\w*(Error|Exception|Warning)\b:", re.MULTILINE
)


# Collected in the page after it loaded, MathJax finished and the widgets rendered.
COLLECT_JS = r"""
() => {
  const main = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const visible = (el) => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  const out = {};
  const maths = [...main.querySelectorAll('.math')];
  out.math = maths.length;
  out.math_typeset = maths.filter(m => m.querySelector('mjx-container')).length;
  // raw TeX left in visible text, outside code
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT, {acceptNode: (n) => {
    const p = n.parentElement;
    if (!p || p.closest('pre, code, script, style, mjx-container, mjx-assistive-mml, .highlight, textarea'))
      return NodeFilter.FILTER_REJECT;
    return NodeFilter.FILTER_ACCEPT; }});
  const raw = [], rawMd = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = n.textContent;
    if (/\|\s*:?[-\u2013\u2014]+:?\s*\|/.test(t) || /(^|\s)\*\*\S[^*]*\*\*(\s|$)/.test(t)) rawMd.push(t.trim().slice(0, 120));
    if (/\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{|\\frac|\\mathbb|\\mathrm|\$[^$\s][^$]{0,80}\$/.test(t))
      raw.push(t.trim().slice(0, 120));
  }
  out.raw_tex = raw;
  out.raw_markdown = rawMd;
  out.images = [...document.images].map(img => ({
    src: img.currentSrc || img.src, alt: img.getAttribute('alt'), complete: img.complete,
    width: img.naturalWidth, in_main: main.contains(img),
    in_widget: !!img.closest('.jupyter-widgets, .widget-subarea, .widget-output, .softlin-explorer'),
    figure_id: img.closest('figure') ? img.closest('figure').id : null,
    caption: img.closest('figure') && img.closest('figure').querySelector('figcaption')
      ? img.closest('figure').querySelector('figcaption').innerText.trim() : null,
    number: img.closest('figure') && img.closest('figure').querySelector('figcaption .caption-number')
      ? img.closest('figure').querySelector('figcaption .caption-number').innerText.trim() : null,
  }));
  out.links = [...document.querySelectorAll('a[href]')].map(a => a.href);
  out.headings = [...main.querySelectorAll('h1, h2, h3')].map(h => h.innerText.trim());
  out.colab_links = [...document.querySelectorAll('a[href*="colab.research.google.com"]')].map(a => ({
    href: a.href, badge: a.classList.contains('colab-badge'), text: (a.innerText || a.textContent).trim() }));
  out.badge_label = [...main.querySelectorAll('a.colab-badge svg')].map(s => s.getAttribute('aria-label'));
  out.outputs = [...main.querySelectorAll('.cell_output')].map(o => o.innerText).filter(t => ERROR_RE.test(t));
  out.stderr = [...main.querySelectorAll('.cell_output .stderr, .cell_output .output.traceback')]
    .map(o => o.innerText.slice(0, 300));
  out.system_messages = [...main.querySelectorAll('.system-message, .problematic')].map(e => e.innerText.slice(0, 200));
  const views = [...main.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
  out.widget_views = views.length;
  out.widget_dead = views.filter(s => {
    const area = s.previousElementSibling;
    return !(area && area.classList.contains('widget-subarea') && area.children.length && visible(area));
  }).length;
  out.widget_text = /Loading widget|Error displaying widget|Failed to load model|Could not create a view/
    .test(main.innerText);
  out.widget_elements = document.querySelectorAll('.jupyter-widgets, .widget-subarea, .widget-slider').length;
  out.widget_state = !!document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]');
  out.explorers = [...main.querySelectorAll('.softlin-explorer')].map(e => ({
    id: e.id, ready: e.classList.contains('softlin-explorer-ready'), frames: +e.dataset.frames,
    at_default: e.querySelector('img').dataset.frame === e.dataset.defaultFrame &&
      [...e.querySelectorAll('[data-control]')].every(c => c.value === c.getAttribute('value') ||
        (c.tagName === 'SELECT' && c.selectedOptions[0] && c.selectedOptions[0].hasAttribute('selected'))),
    bytes: e.outerHTML.length,
    controls: [...e.querySelectorAll('[data-control]')].map(c => ({tag: c.tagName, n: c.tagName === 'SELECT'
      ? c.options.length : +c.max + 1, value: +c.value})) }));
  out.html_bytes = document.documentElement.outerHTML.length;
  return out;
}
""".replace("ERROR_RE", "/" + ERROR_LINE.pattern.replace("/", "\\/") + "/m")

WAIT_JS = r"""
() => {
  const maths = document.querySelectorAll('main .math').length;
  const mathDone = maths === 0 || (window.MathJax && MathJax.startup && MathJax.startup.document &&
    document.querySelectorAll('main .math mjx-container').length >= maths);
  const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
  const widgetsDone = views.every(s => s.previousElementSibling &&
    s.previousElementSibling.classList.contains('widget-subarea') && s.previousElementSibling.children.length);
  const imgsDone = [...document.images].every(i => i.complete);
  return mathDone && widgetsDone && imgsDone;
}
"""


def shot_name(page: str) -> str:
    return page.replace("/", "__") + ".png"


def decode(src: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))).convert("RGB"))


SET_CONTROL = """([id, k, v]) => { const c = document.querySelector('#' + id + ' [data-control="' + k + '"]');
  c.value = String(v); c.dispatchEvent(new Event('input', {bubbles: true}));
  c.dispatchEvent(new Event('change', {bubbles: true}));
  return document.querySelector('#' + id + ' img.softlin-explorer-frame').getAttribute('src'); }"""


def move_every_control(page, explorer: dict) -> dict:
    """Move each control of one explorer to each of its other values and back; compare the pictures."""
    eid = explorer["id"]
    default_src = page.eval_on_selector(
        f"#{eid} img.softlin-explorer-frame", "i => i.getAttribute('src')"
    )
    default = decode(default_src)
    moves, unchanged = 0, []
    for k, control in enumerate(explorer["controls"]):
        for v in range(control["n"]):
            if v == control["value"]:
                continue
            src = page.evaluate(SET_CONTROL, [eid, k, v])
            moves += 1
            if src == default_src or np.array_equal(decode(src), default):
                unchanged.append((k, v))
        back = page.evaluate(SET_CONTROL, [eid, k, control["value"]])
        if back != default_src:
            unchanged.append((k, "back to the default does not show the default picture"))
    return {"moves": moves, "unchanged": unchanged}


# Computed in dark mode: the background behind each content image, and the contrast of text in cell outputs
# and explorers against its effective background (WCAG 2 relative luminance).
DARK_JS = r"""
() => {
  const main = document.querySelector('article.bd-article') || document.body;
  const rgb = (s) => { const m = s.match(/rgba?\(([^)]+)\)/); if (!m) return null;
    const p = m[1].split(',').map(Number); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const lum = (c) => { const f = (x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const background = (el) => { for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor); if (c && c.a > 0.5) return c; }
    return rgb(getComputedStyle(document.body).backgroundColor) || {r: 255, g: 255, b: 255, a: 1}; };
  const out = {theme: document.documentElement.dataset.theme, low_contrast: [], images: []};
  const texts = main.querySelectorAll('.cell_output pre, .cell_output td, .cell_output th, .cell_output p, ' +
    '.softlin-explorer label, .softlin-explorer output, .softlin-explorer select, .softlin-explorer-note, ' +
    'table td, table th, figcaption');
  texts.forEach(el => { if (!el.innerText || !el.innerText.trim() || !(el.offsetWidth || el.offsetHeight)) return;
    const fg = rgb(getComputedStyle(el).color), bg = background(el);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x); const ratio = (a + 0.05) / (b + 0.05);
    if (ratio < 4.5) out.low_contrast.push(el.tagName + ' ' + ratio.toFixed(2) + ': ' + el.innerText.trim().slice(0, 60)); });
  main.querySelectorAll('.cell_output img, figure img, .softlin-explorer img').forEach(img => {
    const bg = rgb(getComputedStyle(img).backgroundColor);
    out.images.push({src: (img.currentSrc || img.src).slice(-50), background: bg ? lum(bg) : null,
                     behind: lum(background(img))}); });
  return out;
}
"""

# In print: what must be hidden, and the explorers' pictures.
PRINT_JS = r"""
() => ({
  hidden: ['.bd-sidebar-primary', '.bd-sidebar-secondary', '.bd-header', '.bd-header-article', '.prev-next-area',
           '.colab-badge-line', '.softlin-explorer-controls', 'button']
    .map(s => [s, [...document.querySelectorAll(s)].filter(e => getComputedStyle(e).display !== 'none').length]),
  explorers_at_default: [...document.querySelectorAll('.softlin-explorer')].every(e =>
    e.querySelector('img').dataset.frame === e.dataset.defaultFrame),
})
"""

API_JS = r"""
() => [...document.querySelectorAll('dl.py > dt[id]')].map(dt => ({id: dt.id,
  doc: dt.nextElementSibling ? dt.nextElementSibling.innerText.trim().length : 0}))
"""


def shoot_or_retry(page, target: Path, path: Path):
    """Screenshot ``page`` (``conftest.shoot``); if Chromium's renderer crashes, which takes the page
    with it, reload ``target`` in a new tab of the same context and try once more. Returns (the page
    to go on with, None or the error's first line): a test fails on the error, naming the page."""
    from playwright.sync_api import Error as PlaywrightError

    for _ in range(2):
        try:
            shoot(page, path)
            return page, None
        except PlaywrightError as err:
            error = str(err).splitlines()[0]
            context = page.context
            page.close()
            page = open_settled(context, target)
    return page, error


def open_settled(context, target: Path):
    """A new tab of ``context`` on ``target``, once its math, widgets and images have rendered (or 30 s
    have passed) and late layout has had 300 ms."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page = context.new_page()
    page.goto(target.as_uri(), wait_until="load")
    try:
        page.wait_for_function(WAIT_JS, timeout=30_000)
    except PlaywrightTimeout:
        pass
    page.wait_for_timeout(300)
    return page


@pytest.fixture(scope="session")
def site(built_book):
    """Open every page of the built site once; return {toc file: collected facts}."""
    rc, log, stage = built_book
    if rc != 0:
        pytest.fail(
            f"the default-mode book did not build (rc={rc}); see test_book.py. Last output:\n{log[-3000:]}"
        )
    html = stage / "_build" / "html"
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    (SHOTS / "dark").mkdir(parents=True, exist_ok=True)
    for old in [*SHOTS.glob("*.png"), *(SHOTS / "dark").glob("*.png")]:
        old.unlink()
    results = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        # The site must render offline: any request that leaves file:// is recorded and refused.
        external = []

        def refuse(route):
            external.append(route.request.url)
            route.abort()

        context.route(re.compile(r"^(https?|wss?)://"), refuse)
        for f in PAGES:
            page = context.new_page()
            events = {"failed": [], "errors": [], "console": [], "requests": []}
            page.on("request", lambda r, ev=events: ev["requests"].append(r.url))
            page.on(
                "requestfailed", lambda r, ev=events: ev["failed"].append(f"{r.url} ({r.failure})")
            )
            page.on("pageerror", lambda e, ev=events: ev["errors"].append(str(e)))
            page.on(
                "console",
                lambda m, ev=events: (
                    ev["console"].append(f"{m.type}: {m.text}")
                    if m.type in ("error", "warning")
                    else None
                ),
            )
            external.clear()
            target = html / (f + ".html")
            facts = {"exists": target.exists()}
            if target.exists():
                page.goto(target.as_uri(), wait_until="load")
                try:
                    page.wait_for_function(WAIT_JS, timeout=30_000)
                    facts["settled"] = True
                except PlaywrightTimeout:
                    facts["settled"] = False
                page.wait_for_timeout(
                    300
                )  # let late layout (fonts, widget resize) finish before the shot
                facts.update(page.evaluate(COLLECT_JS))
                page, error = shoot_or_retry(page, target, SHOTS / shot_name(f))
                if error:
                    facts["shot_error"] = error
                facts["ids"] = page.evaluate(
                    "() => [...document.querySelectorAll('[id]')].map(e => e.id)"
                )
                facts["api"] = page.evaluate(API_JS)
                facts["moved"] = [move_every_control(page, e) for e in facts["explorers"]]
                page.emulate_media(media="print")
                page.evaluate("() => window.dispatchEvent(new Event('beforeprint'))")
                facts["print"] = page.evaluate(PRINT_JS)
                page.emulate_media(media="screen")
            facts["widget_requests"] = [
                u for u in events["requests"] if re.search(r"embed-amd|require\.js|html-manager", u)
            ]
            facts.update(
                failed=list(events["failed"]),
                errors=list(events["errors"]),
                external=list(external),
                console=[
                    c for c in events["console"] if not any(b.search(c) for b in BENIGN_CONSOLE)
                ],
            )
            results[f] = facts
            page.close()
        # Dark mode: the theme's switch stores its choice in localStorage ("mode"); set it before loading.
        dark = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="dark")
        dark.route(re.compile(r"^(https?|wss?)://"), lambda route: route.abort())
        dark.add_init_script(
            "localStorage.setItem('mode', 'dark'); localStorage.setItem('theme', 'dark');"
        )
        for f in PAGES:
            target = html / (f + ".html")
            if not target.exists():
                continue
            page = open_settled(dark, target)
            results[f]["dark"] = page.evaluate(DARK_JS)
            page, error = shoot_or_retry(page, target, SHOTS / "dark" / shot_name(f))
            if error:
                results[f]["dark_shot_error"] = error
            page.close()
        browser.close()
    report = {
        f: {
            "html_bytes": r.get("html_bytes"),
            "file_bytes": (html / (f + ".html")).stat().st_size
            if (html / (f + ".html")).exists()
            else None,
            "explorers": [
                {**e, "moves": m["moves"]}
                for e, m in zip(r.get("explorers", []), r.get("moved", []))
            ],
        }
        for f, r in results.items()
    }
    (ROOT / "_build" / "site-report.json").write_text(json.dumps(report, indent=1))
    return {"pages": results, "html": html, "stage": stage}


def facts_of(site, page):
    facts = site["pages"][page]
    assert facts["exists"], f"{page}.html was not built"
    return facts


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_offline_without_script_errors(site, page):
    f = facts_of(site, page)
    assert f["settled"], f"{page}: math, widgets or images did not finish rendering within 30 s"
    assert not f["external"], f"{page}: requests leave the site (CDN?): {f['external'][:5]}"
    assert not f["failed"], f"{page}: resources failed to load: {f['failed'][:5]}"
    assert not f["errors"], f"{page}: JavaScript exceptions: {f['errors'][:5]}"
    assert not f["console"], f"{page}: console errors/warnings: {f['console'][:5]}"


@pytest.mark.parametrize("page", PAGES)
def test_math_is_typeset(site, page):
    f = facts_of(site, page)
    assert f["math_typeset"] == f["math"], (
        f"{page}: MathJax typeset {f['math_typeset']} of {f['math']} math elements"
    )
    assert not f["raw_tex"], f"{page}: raw TeX visible on the page: {f['raw_tex'][:5]}"


@pytest.mark.parametrize("page", PAGES)
def test_no_raw_markdown_is_visible(site, page):
    f = facts_of(site, page)
    assert not f["raw_markdown"], (
        f"{page}: unrendered Markdown (table rule or **bold**) visible: {f['raw_markdown'][:3]}"
    )


@pytest.mark.parametrize("page", PAGES)
def test_images_load_and_have_real_alt_text(site, page):
    f = facts_of(site, page)
    for img in f["images"]:
        where = f"{page}: image {img['src'][-70:]}"
        assert img["complete"] and img["width"] > 0, f"{where} did not load"
        alt = (img["alt"] or "").strip()
        assert alt, f"{where} has no alt text"
        if img["in_main"]:
            assert len(alt) >= 20 and not DEFAULT_REPR.search(alt), (
                f"{where}: alt text is not a description: {alt!r}"
            )


@pytest.mark.parametrize("page", PAGES)
def test_figures_are_numbered_captioned_and_labelled(site, page):
    f = facts_of(site, page)
    for img in f["images"]:
        if not img["in_main"] or img["in_widget"]:
            continue  # theme icons; a frozen widget's picture is followed by its captioned static figure
        where = f"{page}: figure {img['src'][-70:]}"
        assert img["caption"] is not None, (
            f"{where} is not a captioned figure: give its cell `mystnb: figure: caption/name` and `image: alt`"
        )
        assert img["number"] and re.match(r"Fig\. L?\d+(\.\d+)*", img["number"]), (
            f"{where} has no figure number (caption: {img['caption'][:80]!r})"
        )
        lab = re.search(
            r"labs/(\d\d)_", page
        )  # a lab numbers its own figures: lab 2's Fig. L2.1, ...
        if lab:
            assert img["number"].startswith(f"Fig. L{int(lab[1])}."), (where, img["number"])
        assert len(img["caption"]) > len(img["number"]) + 10, f"{where}: the caption is empty"
        assert img["figure_id"], f"{where} has no label (mystnb: figure: name)"


@pytest.mark.parametrize("page", PAGES)
def test_colab_links_point_at_the_paired_notebook(site, page):
    f = facts_of(site, page)
    if page not in NOTEBOOK_PAGES:
        assert not any(link["badge"] for link in f["colab_links"]), (
            f"{page} is not a notebook but has a badge"
        )
        return
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo = cfg["repository"]["url"].rstrip("/")
    org_repo = repo.split("github.com/", 1)[1]
    expected = (
        f"{cfg['launch_buttons']['colab_url'].rstrip('/')}/github/{org_repo}/blob/"
        f"{cfg['repository']['branch']}/{page}.ipynb"
    )
    badges = [link for link in f["colab_links"] if link["badge"]]
    launch = [link for link in f["colab_links"] if not link["badge"]]
    assert len(badges) == 1, f"{page}: expected one 'Open in Colab' badge, found {len(badges)}"
    assert f["badge_label"] == ["Open in Colab"], f"{page}: the badge has no 'Open in Colab' label"
    assert launch, f"{page}: the theme's launch button has no Colab entry"
    for link in badges + launch:
        assert link["href"] == expected, f"{page}: Colab link {link['href']} != {expected}"
        path = (
            ROOT / urlparse(link["href"]).path.split(f"/blob/{cfg['repository']['branch']}/", 1)[1]
        )
        assert path.is_file(), (
            f"{page}: the Colab link targets {path.relative_to(ROOT)}, which does not exist"
        )


_ids_cache: dict[Path, set] = {}


def _ids(path: Path, site) -> set:
    if path not in _ids_cache:
        rel = path.relative_to(site["html"]).with_suffix("").as_posix()
        if rel in site["pages"] and "ids" in site["pages"][rel]:
            _ids_cache[path] = set(
                site["pages"][rel]["ids"]
            )  # the rendered DOM (includes JS-made ids)
        else:
            _ids_cache[path] = set(re.findall(r'\bid="([^"]+)"', path.read_text(errors="replace")))
    return _ids_cache[path]


@pytest.mark.parametrize("page", PAGES)
def test_internal_links_resolve(site, page):
    f = facts_of(site, page)
    html = site["html"].resolve()
    broken = []
    for href in sorted(set(f["links"])):
        url = urlparse(href)
        if url.scheme != "file":
            continue
        target = Path(unquote(url.path))
        if target.is_dir():
            target = target / "index.html"
        try:
            target.relative_to(html)
        except ValueError:
            broken.append(f"{href} (outside the site)")
            continue
        if not target.is_file():
            broken.append(f"{href} (no such file)")
        elif (
            url.fragment
            and target.suffix == ".html"
            and unquote(url.fragment) not in _ids(target, site)
        ):
            broken.append(f"{href} (no element with id {url.fragment!r})")
    assert not broken, f"{page}: {len(broken)} broken internal link(s):\n" + "\n".join(broken[:20])


@pytest.mark.parametrize("page", PAGES)
def test_no_error_text(site, page):
    f = facts_of(site, page)
    assert not f["outputs"], f"{page}: error text in cell outputs:\n" + "\n---\n".join(
        o[:400] for o in f["outputs"][:3]
    )
    assert not f["stderr"], f"{page}: cells wrote to stderr (warnings?):\n" + "\n---\n".join(
        f["stderr"][:3]
    )
    assert not f["system_messages"], (
        f"{page}: Sphinx/docutils error markers: {f['system_messages'][:3]}"
    )


@pytest.mark.parametrize("page", PAGES)
def test_headings_are_not_numbered_twice(site, page):
    f = facts_of(site, page)
    doubled = [h for h in f["headings"] if re.match(r"^(\d+(\.\d+)*)\.?\s+\1\.?\s", h)]
    assert not doubled, (
        f"{page}: headings carry a number twice (the toc numbers chapters already; drop the "
        f"number from the title): {doubled[:3]}"
    )


@pytest.mark.parametrize("page", PAGES)
def test_no_frozen_widget_is_left(site, page):
    f = facts_of(site, page)
    assert f["widget_views"] == 0 and f["widget_elements"] == 0 and not f["widget_state"], (
        f"{page}: ipywidgets are left on the page ({f['widget_views']} views, {f['widget_elements']} elements); "
        "use softlin.book.widgets.explorer, which the build precomputes"
    )
    assert not f["widget_text"], f"{page}: a widget placeholder or widget error message is visible"
    assert not f["widget_requests"], f"{page}: loads the ipywidgets manager: {f['widget_requests']}"


@pytest.mark.parametrize("page", PAGES)
def test_every_explorer_moves_and_fits_the_page_budget(site, page):
    f = facts_of(site, page)
    for e, moved in zip(f["explorers"], f["moved"]):
        assert e["ready"], f"{page}: explorer {e['id']} was not set up by softlin-explorer.js"
        assert e["at_default"], (
            f"{page}: explorer {e['id']} does not open on its default state and picture"
        )
        assert all(c["n"] >= 2 for c in e["controls"]), (
            f"{page}: explorer {e['id']} has a control with one value"
        )
        assert moved["moves"] == sum(c["n"] - 1 for c in e["controls"]) > 0
        assert not moved["unchanged"], (
            f"{page}: explorer {e['id']}: these (control, value) moves did not change the picture: "
            f"{moved['unchanged'][:5]}"
        )
    added = sum(e["bytes"] for e in f["explorers"])
    assert added <= 3_000_000, f"{page}: its explorers add {added / 1e6:.2f} MB (budget 3 MB)"


@pytest.mark.parametrize("page", PAGES)
def test_print_hides_the_site_chrome_and_shows_explorers_at_their_default(site, page):
    f = facts_of(site, page)
    visible = [(sel, n) for sel, n in f["print"]["hidden"] if n]
    assert not visible, f"{page}: visible in print: {visible}"
    assert f["print"]["explorers_at_default"], (
        f"{page}: an explorer does not print its default picture"
    )


@pytest.mark.parametrize("page", PAGES)
def test_dark_mode_keeps_figures_and_text_readable(site, page):
    f = facts_of(site, page)
    dark = f["dark"]
    assert dark["theme"] == "dark", f"{page}: the dark mode did not switch on ({dark['theme']!r})"
    for img in dark["images"]:  # figures are drawn dark on white: their background must stay light
        shade = img["background"] if img["background"] is not None else img["behind"]
        assert shade > 0.8, f"{page}: image ...{img['src']} sits on a dark background in dark mode"
    assert not dark["low_contrast"], (
        f"{page}: text below contrast 4.5 in dark mode: {dark['low_contrast'][:5]}"
    )


def test_the_api_page_documents_every_public_name(site):
    import importlib

    f = facts_of(site, "book/api")
    documented = {a["id"]: a["doc"] for a in f["api"]}
    text = (ROOT / "book" / "api.md").read_text()
    listed = re.search(r"\.\. softlin-api::\n\n((?:   \S+\n)+)", text).group(1).split()
    assert {
        "softlin",
        "softlin.attention",
        "softlin.measures",
        "softlin.montecarlo",
        "softlin.book.modes",
        "softlin.book.plotting",
        "softlin.book.widgets",
    } <= set(listed)
    missing, empty = [], []
    for name in listed:
        module = importlib.import_module(name)
        for n in module.__all__:
            home = getattr(getattr(module, n), "__module__", name)
            target = f"{home if home in listed else name}.{n}"
            if target not in documented:
                missing.append(target)
            elif documented[target] < 10:
                empty.append(target)
    assert not missing, f"the API page does not document {missing}"
    assert not empty, f"the API page shows no docstring for {empty}"


def test_every_page_has_a_screenshot(site):
    crashed = {
        p: [f[k] for k in ("shot_error", "dark_shot_error") if k in f]
        for p, f in site["pages"].items()
        if "shot_error" in f or "dark_shot_error" in f
    }
    assert not crashed, f"Chromium did not take the screenshot of {crashed}"
    missing = [
        p
        for p in PAGES
        if not (SHOTS / shot_name(p)).is_file() or not (SHOTS / "dark" / shot_name(p)).is_file()
    ]
    assert not missing, f"no screenshot (light and dark) for {missing}"


def test_status_page_lists_every_chapter_with_its_time(site):
    status = (site["html"] / "book" / "status.html").read_text()
    assert (
        '<code class="docutils literal notranslate"><span class="pre">default</span></code> mode'
        in status
    )
    for md in notebook_chapters(ROOT):
        page = page_name(md)
        assert f'href="{page}.html"' in status, f"the status page does not link {page}"
    for pkg in ("torch", "numpy", "matplotlib", "ipywidgets", "jupyter-book", "mathjax"):
        assert pkg in status, f"the status page does not give the version of {pkg}"


def test_handouts_print_one_pdf_per_lesson_and_lab(site, tmp_path):
    import subprocess
    import sys

    out = tmp_path / "handouts"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "handouts.py"),
            "--site",
            str(site["html"]),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    readme = (out / "README.md").read_text()  # which PDF is for whom, in the folder itself
    for name in (
        "syllabus.pdf",
        "chain_of_results.pdf",
        "quizzes.pdf",
        "reading/",
        "instructor/",
        "lecturer_guide.pdf",
        "run_sheets_two_hours.pdf",
        "NN_name-notes.pdf",
    ):
        assert f"`{name}`" in readme, f"the handouts' README.md does not say what {name} is"
    for name in ("syllabus.md", "syllabus.html", "slides/"):
        assert f"`{name}`" in readme, f"the handouts' README.md does not say what {name} is"
    # the syllabus to edit: the page's text without the site's label and print style, and as a
    # document that a word processor opens, its tables kept
    editable = (out / "syllabus.md").read_text()
    assert "<style>" not in editable and "(syllabus)=" not in editable, editable[:300]
    assert "## Assessment" in editable and "| part | weight |" in editable, editable[:300]
    document = (out / "syllabus.html").read_text()
    separators = re.findall(r"^\|(?:\s*:?-+:?\s*\|)+\s*$", editable, re.M)  # one per table
    assert document.count("<table>") == len(separators) == 3, "syllabus.html lost a table"
    assert "<h2>Assessment</h2>" in document and "{doc}" not in document
    quiz_pages = len(re.findall(rb"/Type\s*/Page[^s]", (out / "quizzes.pdf").read_bytes()))
    assert quiz_pages == len(lessons(ROOT)), (
        f"quizzes.pdf: {quiz_pages} pages for {len(lessons(ROOT))} quizzes (one a page, the "
        "sheet's title on the first)"
    )
    for md in lessons(ROOT):  # each lesson's deck printed one slide a page
        deck = (site["html"] / "slides" / f"{page_name(md)}.html").read_text()
        pdf = (out / "slides" / f"{page_name(md)}.pdf").read_bytes()
        pages, slides = len(re.findall(rb"/Type\s*/Page[^s]", pdf)), deck.count("<section")
        assert pages == slides >= 4, f"slides/{page_name(md)}.pdf: {pages} pages, {slides} slides"
    syllabus = (out / "syllabus.pdf").read_bytes()  # the students' one-page course outline, first
    assert len(re.findall(rb"/Type\s*/Page[^s]", syllabus)) == 1, "syllabus.pdf: one page expected"
    chain = (out / "chain_of_results.pdf").read_bytes()  # the course's summary sheet
    assert 1 <= len(re.findall(rb"/Type\s*/Page[^s]", chain)) <= 2, "chain_of_results.pdf"
    # the lecturer's run sheets: each session starts a page (its print style), so three pages in
    # all means that each session's sheet fits on one
    for name in ("run_sheets", "run_sheets_two_hours"):  # the 90-minute and the two-hour sheets
        sheets = (out / "instructor" / f"{name}.pdf").read_bytes()
        pages = len(re.findall(rb"/Type\s*/Page[^s]", sheets))
        assert pages == 3, f"instructor/{name}.pdf: {pages} pages; one per session (3) expected"
    guide = (out / "instructor" / "lecturer_guide.pdf").read_bytes()  # the term, to tick
    pages = len(re.findall(rb"/Type\s*/Page[^s]", guide))
    assert 1 <= pages <= 2, f"instructor/lecturer_guide.pdf: {pages} pages; at most two expected"
    # the speaker notes give the exercises' answers: with the lecturer's pages, not in slides/
    for md in lessons(ROOT):
        assert (out / "instructor" / f"{page_name(md)}-notes.pdf").exists(), md.stem
    assert not list((out / "slides").glob("*notes*")), "speaker notes in handouts/slides/"
    for md in [*lessons(ROOT), *labs(ROOT)]:  # a handout per lesson, and per lab beside it
        pdf = (out / f"{page_name(md)}.pdf").read_bytes()
        pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
        assert pdf.startswith(b"%PDF") and pages >= 1, f"{page_name(md)}.pdf: {pages} page(s)"
        if md in lessons(ROOT):
            assert pages >= 2, f"{page_name(md)}.pdf: {pages} page(s)"
