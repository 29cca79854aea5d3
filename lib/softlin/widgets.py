"""Interactive explorers with a static fallback.

An explorer is a plain plotting function ``plot(ax, **params)`` (tested in ``tests/``) with controls for
its parameters, for Jupyter and Colab readers. The rendered site has no kernel, so every explorer
is followed by :func:`small_multiples`, the same function drawn on a grid of fixed parameter values.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

__all__ = ["explorer", "small_multiples", "show_source", "answer_check"]


def explorer(plot, **sliders):
    """An interactive explorer of ``plot(ax, **params)``: one control per keyword, and the figure below.

    Each keyword gives a widget (``IntSlider(...)``, ``Dropdown(...)``), an ``interact``-style
    abbreviation (``(min, max)``, a list of options) or ``ipywidgets.fixed(value)``. The figure is drawn to
    a PNG shown in an ``ipywidgets.Image``, redrawn whenever a control changes (in Jupyter or Colab).

    Unlike ``ipywidgets.interact``, no ``Output`` widget captures the figure: executing such a cell
    headless (papermill, nbclient) intermittently deadlocks on the captured output messages
    (jupyter/nbclient#312), while an ``Image`` is plain widget state. That state is saved with the
    notebook, so the static site shows the controls and the figure frozen at their initial values.

    The box is displayed and returned; end the cell with ``;`` to avoid a second display.

    Raises
    ------
    TypeError if ``plot`` is not callable; ValueError if no control is given or an abbreviation is invalid.
    """
    import io

    import ipywidgets as widgets
    from IPython.display import display

    if not callable(plot):
        raise TypeError(f"plot must be callable, got {type(plot).__name__}")
    if not sliders:
        raise ValueError("explorer needs at least one slider (keyword argument), got none")
    controls, fixed_values = {}, {}
    for name, abbrev in sliders.items():
        w = widgets.interactive.widget_from_abbrev(abbrev)
        if w is None:
            raise ValueError(f"{name}: cannot make a control from {abbrev!r}")
        if isinstance(w, widgets.fixed):
            fixed_values[name] = w.value
        else:
            if not w.description:
                w.description = name
            controls[name] = w

    def render() -> bytes:
        params = {**fixed_values, **{k: w.value for k, w in controls.items()}}
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        try:
            plot(ax, **params)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
        finally:
            plt.close(fig)  # not shown by the inline backend: the Image widget shows it
        return buf.getvalue()

    image = widgets.Image(value=render(), format="png", layout=widgets.Layout(max_width="560px"))

    def update(_change):
        image.value = render()

    for w in controls.values():
        w.observe(update, names="value")
    box = widgets.VBox([*controls.values(), image])
    display(box)
    return box


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


def show_source(obj, *, docstring: bool = False) -> str:
    """Show the source code of a softlin function or class on the page, without its docstring.

    This is how a chapter shows the few lines a statement of the paper becomes (the code is read from the
    installed library with ``inspect.getsource``, never copied into the page). In Jupyter the code is
    displayed as a highlighted Python block; elsewhere it is printed. Returns the code shown.

    Raises
    ------
    TypeError if ``obj`` has no Python source (a builtin, a number).
    """
    import ast
    import inspect
    import textwrap

    try:
        src = textwrap.dedent(inspect.getsource(obj))
    except (TypeError, OSError) as exc:
        raise TypeError(f"obj must be a Python function or class with source code, got {obj!r}") from exc
    if not docstring:
        node = ast.parse(src).body[0]
        body = getattr(node, "body", [])
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            lines = src.splitlines()
            first, last = body[0].lineno - 1, body[0].end_lineno  # 1-based, inclusive
            src = "\n".join(lines[:first] + lines[last:]) + "\n"
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display

        if get_ipython() is not None:
            display(Markdown(f"```python\n{src}```"))
            return src
    except ImportError:  # pragma: no cover - IPython is part of the book's environment
        pass
    print(src)
    return src


def answer_check(expected, *, rtol: float = 1e-6, atol: float = 0.0, inputs=None, hint: str = ""):
    """A self-check for an exercise: returns ``check(answer)``, which says whether ``answer`` is right.

    The answer key comes from softlin's closed forms or a simulation, never a pasted number: ``expected`` is
    a callable of no arguments returning the value (a number, array or tensor), or, with ``inputs``, a
    reference *function*, and the reader's answer is then a function evaluated at each of ``inputs`` (a list
    of argument tuples). ``check`` prints "correct" or how far off the answer is (its relative error) and the
    hint; it never prints the expected value. ``check(None)`` says that no answer was given yet.

    Returns
    -------
    callable ``check(answer) -> bool``
    """
    import numpy as np
    import torch

    if not callable(expected):
        raise TypeError(f"expected must be a callable that computes the answer key, got {type(expected).__name__}")

    def as_array(x):
        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().double().numpy()
        return np.asarray(x, dtype=float)

    def check(answer) -> bool:
        if answer is None:
            print("No answer yet: replace None by your answer and run the cell again.")
            return False
        try:
            if inputs is None:
                pairs = [(as_array(answer), as_array(expected()))]
            else:
                if not callable(answer):
                    print("Your answer should be a function (def ...); it is "
                          f"{type(answer).__name__}.")
                    return False
                pairs = [(as_array(answer(*args)), as_array(expected(*args))) for args in inputs]
        except Exception as exc:  # the reader's code may fail: say so instead of a traceback
            print(f"Evaluating your answer raised {type(exc).__name__}: {exc}")
            return False
        worst = 0.0
        for got, want in pairs:
            if got.shape != want.shape:
                print(f"Not yet: your answer has shape {got.shape}, the expected one a different shape "
                      f"(with {want.size} entries). {hint}".rstrip())
                return False
            scale = float(np.abs(want).max()) if want.size else 0.0
            err = float(np.abs(got - want).max()) if want.size else 0.0
            if not np.all(np.isfinite(got)) or err > atol + rtol * scale:
                rel = err / scale if scale > 0 else err
                print(f"Not yet: your answer is off by {rel:.2g} (relative error). {hint}".rstrip())
                return False
            worst = max(worst, err / scale if scale > 0 else err)
        print(f"Correct (relative error {worst:.1g}).")
        return True

    return check
