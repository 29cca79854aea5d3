"""A precomputed explorer moves on the static page, and shows the right picture for every state.

The fixture chapter (tests/fixtures/01_explorer_and_exercises.md) has an explorer whose plotting function
draws a black rectangle of the controls' width and height on a 10 x 10 field, so the picture itself says
which state it shows. The fixture book is built in default mode like the site (``make_book``) and opened
in headless Chromium, offline. For every state the test sets the controls as a reader would (the range
input by keyboard, the select by choosing an option) and measures the rectangle in the picture the page
shows: its width and height in pixels must be proportional to the control values, whatever the order of
the moves. This checks the whole chain (the Python enumeration of the states, their order in the page,
the script's index arithmetic) against the plotting function itself. Also: the page starts on the default
state, loads no widget manager, needs no network, and prints the default picture without controls.
"""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import pytest
from conftest import CHROMIUM_ARGS, chromium_path, make_book, run_build
from PIL import Image

pytestmark = [pytest.mark.book, pytest.mark.browser]

WIDTHS, HEIGHTS = [2, 4, 6, 8], [3, 9]
DEFAULT = (4, 9)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = make_book(tmp_path_factory.mktemp("explorer-book"), ["01_explorer_and_exercises.md"])
    rc, log, stage, _ = run_build(
        "--root", str(root), "--mode", "default", stage=root / "_build" / "stage"
    )
    assert rc == 0, log[-3000:]
    html = stage / "_build" / "html" / "book" / "01_explorer_and_exercises.html"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        external, errors = [], []
        context.route(
            re.compile(r"^(https?|wss?)://"),
            lambda route: (external.append(route.request.url), route.abort()),
        )
        pg = context.new_page()
        pg.on("pageerror", lambda e: errors.append(str(e)))
        requested = []
        pg.on("request", lambda r: requested.append(r.url))
        pg.goto(html.as_uri(), wait_until="load")
        pg.wait_for_selector(".softlin-explorer.softlin-explorer-ready")
        yield {
            "page": pg,
            "external": external,
            "errors": errors,
            "requested": requested,
            "html": html,
        }
        browser.close()


def shown(pg) -> np.ndarray:
    src = pg.eval_on_selector(".softlin-explorer img", "img => img.src")
    assert src.startswith("data:image/png;base64,")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))).convert("L"))


def rectangle(picture: np.ndarray) -> tuple[int, int]:
    """Width and height in pixels of the black rectangle."""
    rows, cols = np.nonzero(picture < 64)
    return int(cols.max() - cols.min() + 1), int(rows.max() - rows.min() + 1)


def move(pg, width: int, height: int) -> None:
    slider = pg.locator(".softlin-explorer input[type=range]")
    target = WIDTHS.index(width)
    current = int(slider.input_value())
    slider.focus()
    for _ in range(abs(target - current)):  # the keyboard, as a reader without a mouse would
        pg.keyboard.press("ArrowRight" if target > current else "ArrowLeft")
    pg.locator(".softlin-explorer select").select_option(str(HEIGHTS.index(height)))


def test_the_page_starts_on_the_default_state(page):
    pg = page["page"]
    assert rectangle(shown(pg)) == rectangle_of_default(page)
    assert pg.eval_on_selector(".softlin-explorer output", "o => o.textContent") == "4"
    assert pg.eval_on_selector(".softlin-explorer select", "s => s.value") == "1"
    assert "Explorer picture at width = 4, h = 9" in pg.eval_on_selector(
        ".softlin-explorer img", "i => i.alt"
    )


def test_every_state_shows_the_picture_of_that_state(page):
    pg = page["page"]
    sizes = {}
    order = [(w, h) for h in HEIGHTS for w in WIDTHS] + [(8, 3), (2, 9), DEFAULT]  # forth and back
    for w, h in order:
        move(pg, w, h)
        sizes.setdefault((w, h), set()).add(rectangle(shown(pg)))
        alt = pg.eval_on_selector(".softlin-explorer img", "i => i.alt")
        assert f"width = {w}, h = {h}" in alt, alt
        assert pg.eval_on_selector(".softlin-explorer output", "o => o.textContent") == str(w)
    assert all(len(s) == 1 for s in sizes.values()), "a state showed two different pictures"
    px = {state: next(iter(s)) for state, s in sizes.items()}
    unit_w = np.mean([px[(w, h)][0] / w for w, h in px])
    unit_h = np.mean([px[(w, h)][1] / h for w, h in px])
    for (w, h), (pw, ph) in px.items():  # one pixel of antialiasing at each edge
        assert abs(pw - w * unit_w) <= 2 and abs(ph - h * unit_h) <= 2, (
            (w, h),
            (pw, ph),
            unit_w,
            unit_h,
        )


def test_back_at_the_default_state_the_first_picture_returns(page):
    pg = page["page"]
    move(pg, 8, 3)
    first = pg.eval_on_selector(
        ".softlin-explorer", "e => e.querySelector('img').getAttribute('src')"
    )
    move(pg, *DEFAULT)
    html = page["html"].read_text()
    default_src = re.search(r'<img class="softlin-explorer-frame" src="([^"]+)"', html).group(1)
    assert (
        pg.eval_on_selector(".softlin-explorer img", "i => i.getAttribute('src')")
        == default_src
        != first
    )


def test_printing_shows_the_default_picture_without_controls(page):
    pg = page["page"]
    move(pg, 2, 3)
    pg.evaluate("() => window.dispatchEvent(new Event('beforeprint'))")
    assert rectangle(shown(pg)) == rectangle_of_default(page)
    pg.emulate_media(media="print")
    hidden = pg.evaluate("""() => ['.softlin-explorer-controls', '.bd-sidebar-primary', '.bd-header',
        '.colab-badge-line', '.prev-next-area'].map(s => [...document.querySelectorAll(s)]
        .every(e => getComputedStyle(e).display === 'none'))""")
    assert all(hidden), hidden
    assert (
        pg.evaluate(
            "() => getComputedStyle(document.querySelector('.softlin-explorer')).breakInside"
        )
        == "avoid"
    )
    pg.emulate_media(media="screen")
    pg.evaluate("() => window.dispatchEvent(new Event('afterprint'))")
    assert (
        rectangle(shown(pg))[0] < rectangle_of_default(page)[0]
    )  # back to the reader's state (width 2)


def rectangle_of_default(page) -> tuple[int, int]:
    html = page["html"].read_text()
    src = re.search(
        r'<img class="softlin-explorer-frame" src="data:image/png;base64,([^"]+)"', html
    ).group(1)
    return rectangle(np.asarray(Image.open(io.BytesIO(base64.b64decode(src))).convert("L")))


def test_no_widget_manager_no_network_no_script_error(page):
    assert not page["external"], page["external"]
    assert not page["errors"], page["errors"]
    loaded = [
        u for u in page["requested"] if re.search(r"embed-amd|require\.js|jupyter-widgets", u)
    ]
    assert not loaded, f"the page loads the ipywidgets manager: {loaded}"
    html = page["html"].read_text()
    assert (
        "application/vnd.jupyter.widget-view+json" not in html and "widget-state+json" not in html
    )
