"""One figure style for the whole book: colour-blind-safe (Okabe-Ito), with markers and line styles
so that no meaning is carried by colour alone."""

from __future__ import annotations

import itertools

import matplotlib as mpl
from cycler import cycler

from .._checks import check_memory, check_positive_int

__all__ = ["OKABE_ITO", "series_styles", "use_book_style"]

#: The Okabe-Ito palette (Okabe & Ito 2008), safe for the common colour-vision deficiencies.
OKABE_ITO = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#56B4E9", "#F0E442", "#E69F00"]
#: Markers and line styles paired with the colours (so that no meaning is carried by colour alone).
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (7, 2))]


def use_book_style() -> None:
    """Set matplotlib's rcParams to the book's style (colour, marker and line-style
    cycles together).

    In a notebook, figures are also shown as high-resolution ("retina") PNGs: twice the
    pixels of ``figure.dpi``, with the logical size in the output's metadata, so that
    the site shows each figure at the same size as before, sharp on a high-density
    screen and on a projected slide."""
    n = len(OKABE_ITO)
    mpl.rcParams.update(
        {
            "axes.prop_cycle": (
                cycler(color=OKABE_ITO)
                + cycler(marker=MARKERS[:n])
                + cycler(linestyle=LINESTYLES[:n])
            ),
            "lines.markersize": 5,
            "lines.linewidth": 1.6,
            "figure.figsize": (6.4, 3.8),
            "figure.dpi": 100,
            "savefig.dpi": 110,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "legend.frameon": False,
            "font.size": 10,
            # Opaque white, also in a notebook (the inline backend's default is transparent), so that the
            # dark axes and labels stay readable on the site's dark mode and in any dark notebook theme.
            "figure.facecolor": "white",
            "savefig.facecolor": "white",
        }
    )
    _retina_inline_figures()


def _retina_inline_figures() -> None:
    """Show a notebook's figures as 2x PNGs (IPython's ``retina`` format), in IPython.

    The inline backend's ``figure_formats`` is set, not only the formatters of this
    moment: the backend selects its formats when it first starts (at the first ``import
    matplotlib.pyplot``) and would otherwise put back plain PNGs. Outside IPython (a
    script, the tests) nothing changes."""
    try:
        from IPython import get_ipython
        from matplotlib_inline.config import InlineBackend
    except ImportError:  # pragma: no cover (the book's environment has both)
        return
    shell = get_ipython()
    if shell is None:
        return
    cfg = InlineBackend.instance(parent=shell)
    if cfg.figure_formats != {"retina"}:
        # re-selects the formatters once the backend runs
        cfg.figure_formats = {"retina"}
    if cfg.shell is None:  # the backend has not started yet: select them now too
        from IPython.core.pylabtools import select_figure_formats

        select_figure_formats(shell, {"retina"}, **cfg.print_figure_kwargs)


def series_styles(n: int) -> list[dict]:
    """``n`` keyword dicts (color, marker, linestyle) for ``ax.plot``, distinguishable without colour."""
    check_positive_int("n", n, minimum=0)
    check_memory(f"n = {n}", 1000 * n, what="a list of n styles")
    cyc = itertools.cycle(zip(OKABE_ITO, MARKERS, LINESTYLES))
    return [dict(color=c, marker=m, linestyle=ls) for c, m, ls in itertools.islice(cyc, n)]
