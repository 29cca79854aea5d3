"""Interactive explorers with a static fallback.

An explorer is a plain plotting function ``plot(ax, **params)`` (tested in ``tests/``) wrapped in
``ipywidgets.interact`` for Jupyter and Colab readers. The rendered site has no kernel, so every explorer
is followed by :func:`small_multiples`, the same function drawn on a grid of fixed parameter values.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

__all__ = ["explorer", "small_multiples"]


def explorer(plot, **sliders):
    """Wrap ``plot(ax, **params)`` in ``ipywidgets.interact`` with the given widgets (or value lists).

    Returns the ``interact`` result (the widget box), so a notebook cell can display it.
    """
    import ipywidgets as widgets

    if not callable(plot):
        raise TypeError(f"plot must be callable, got {type(plot).__name__}")
    if not sliders:
        raise ValueError("explorer needs at least one slider (keyword argument), got none")

    def _draw(**params):
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        plot(ax, **params)
        plt.show()

    return widgets.interact(_draw, **sliders)


def small_multiples(plot, grid, *, ncols=3, panel_size=(3.2, 2.8), sharex=True, sharey=True, **fixed):
    """Draw ``plot(ax, **params, **fixed)`` for each dict ``params`` in ``grid`` on one figure.

    Parameters
    ----------
    plot : callable ``plot(ax, **params)``; it should set the panel title from its parameters.
    grid : list of dicts of parameter values, one per panel (at least one).
    ncols : panels per row.

    Returns
    -------
    matplotlib Figure
    """
    grid = list(grid)
    if not grid:
        raise ValueError("grid must hold at least one parameter dict, got an empty list")
    if not all(isinstance(g, dict) for g in grid):
        raise TypeError("grid must be a list of dicts of parameter values")
    ncols = min(ncols, len(grid))
    nrows = -(-len(grid) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(panel_size[0] * ncols, panel_size[1] * nrows), sharex=sharex, sharey=sharey,
        squeeze=False, layout="constrained",
    )
    for ax, params in zip(axes.flat, grid):
        plot(ax, **params, **fixed)
    for ax in list(axes.flat)[len(grid):]:
        ax.set_visible(False)
    return fig
