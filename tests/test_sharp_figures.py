"""The lessons' figures are sharp on a high-density screen and on a projected slide.

* ``use_book_style()`` makes a notebook show its figures as 2x PNGs (IPython's
  ``retina`` format), with their logical size in the output's metadata, whether the
  inline backend starts before or after it is called (in an IPython shell, run in a
  subprocess);
* the build keeps only a figure's logical ``width``
  (``build_book.keep_image_widths_only``), so that the site's CSS scales it whole on a
  phone;
* in the built site every figure of a lesson is shown at its logical width, with no
  fixed height, from a PNG with twice as many pixels.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from build_book import keep_image_widths_only, lessons, page_name

ROOT = Path(__file__).resolve().parents[1]
SHELL = """
import base64, json, sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
backend = (
    "import matplotlib; matplotlib.use('module://matplotlib_inline.backend_inline')"
)
if sys.argv[1] == "backend first":
    shell.run_cell(backend + "; import matplotlib.pyplot")
if sys.argv[1] != "no style":
    shell.run_cell("from softlin.book.plotting import use_book_style; use_book_style()")
shell.run_cell(backend)
shell.run_cell("import matplotlib.pyplot as plt; fig, ax = plt.subplots()")
shell.run_cell("ax.plot([0, 1])")
data, meta = shell.display_formatter.format(shell.user_ns["fig"])
png = base64.b64decode(data["image/png"])
print(int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big"))
print(json.dumps(meta.get("image/png", {})))
"""


@pytest.mark.parametrize("order", ["style first", "backend first", "no style"])
def test_use_book_style_shows_2x_figures_in_a_notebook(order):
    out = subprocess.run(
        [sys.executable, "-c", SHELL, order], capture_output=True, text=True, check=True
    ).stdout
    m = re.search(r"^(\d+) (\d+)\n(\{.*\})$", out, re.M)
    assert m, out[-2000:]
    width, height, shown = int(m[1]), int(m[2]), json.loads(m[3])
    if order == "no style":  # IPython's default: a plain PNG, without a logical size
        assert shown == {}, shown
        return
    assert shown == {"width": width // 2, "height": height // 2}, (width, height, shown)
    assert width // 2 >= 400  # figure.figsize at figure.dpi: the logical size as before


def test_the_build_keeps_only_a_figure_s_width():
    nb = nbformat.v4.new_notebook()
    png, retina = {"image/png": "iVBO"}, {"image/png": {"width": 320, "height": 190}}
    nb.cells = [
        nbformat.v4.new_code_cell(
            outputs=[
                nbformat.v4.new_output("display_data", png, metadata=retina),
                nbformat.v4.new_output("display_data", png),
                nbformat.v4.new_output("stream", name="stdout", text="x\n"),
            ]
        ),
        nbformat.v4.new_markdown_cell("# x"),
    ]
    assert keep_image_widths_only(nb) == 1
    outputs = nb.cells[0].outputs
    assert outputs[0].metadata == {"image/png": {"width": 320}}
    assert outputs[1].get("metadata", {}) == {}
    # a figure with a width opens in the reader's overlay, not as a link to its PNG
    assert nb.cells[0].metadata["mystnb"]["image"] == {"classes": "no-scaled-link"}
    assert keep_image_widths_only(nb) == 0  # a second pass changes nothing
    assert nb.cells[0].metadata["mystnb"]["image"] == {"classes": "no-scaled-link"}


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    return struct.unpack(">II", head[16:24])


@pytest.mark.book
@pytest.mark.parametrize("md", lessons(ROOT), ids=page_name)
def test_the_site_shows_each_figure_at_its_logical_width_from_2x_pixels(built_book, md):
    rc, log, stage = built_book
    assert rc == 0, log[-3000:]
    html = stage / "_build" / "html"
    page = (html / "book" / f"{md.stem}.html").read_text(encoding="utf-8")
    images = re.findall(r'<img [^>]*src="\.\./(_images/[^"]+\.png)"([^>]*)>', page)
    nb = json.loads((stage / "book" / f"{md.stem}.ipynb").read_text())
    cells = [c["metadata"].get("mystnb", {}) for c in nb["cells"]]
    figures = sum(bool(c.get("figure")) for c in cells)
    assert len(images) >= figures > 0, (len(images), figures)
    assert "image-reference" not in page  # no figure is a link to its PNG (the overlay)
    for src, attrs in images:
        style = re.search(r'style="([^"]*)"', attrs)
        assert style and "height" not in style[1], (md.stem, src, attrs)
        width = re.search(r"width: (\d+)px", style[1])
        assert width, (md.stem, src, style[1])
        pixels = png_size(html / src)[0]
        logical = int(width[1])
        assert pixels in (2 * logical, 2 * logical + 1), (src, pixels, logical)
