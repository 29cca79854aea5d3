"""Interactive explorers that also move on the static site, and exercises that check themselves.

An explorer is a plain plotting function ``plot(ax, **params)`` of the chapter with controls for its
parameters. In Jupyter and Colab, :func:`explorer` redraws it live whenever a control moves. When the book
is built (``tools/build_book.py`` sets ``SOFTLIN_STATIC_EXPLORERS=1`` for the kernels that execute the
chapters), it draws every combination of the controls' values once, with the same function, and shows the
pictures behind controls that need no kernel and no network (``book/_ext/static/softlin-explorer.js``
swaps them). :func:`small_multiples` draws the function on a grid for a printed figure;
:func:`show_source` shows a library function's code on the page; :func:`answer_check` builds the
self-check of an exercise from a computed answer key.
"""

from __future__ import annotations

import math
import os

import matplotlib.pyplot as plt

from .._checks import check_bool, check_callable, check_positive_int, check_real, check_str

__all__ = ["answer_check", "explorer", "make_check", "show_source", "small_multiples"]

#: Set (to anything but "" or "0") in a kernel's environment, it makes :func:`explorer` precompute its
#: pictures for the static site; "check" validates the controls and draws the default picture only.
STATIC_ENV = "SOFTLIN_STATIC_EXPLORERS"
FIGSIZE, DPI = (6.4, 4.0), 90  # inches, dots per inch: 576 x 360 pixels, live and precomputed alike


def explorer(plot, **controls):
    """An explorer of ``plot(ax, **params)``: one control per keyword, and the figure below.

    Each keyword gives a widget (``SelectionSlider(options=[...], value=...)``, ``IntSlider(...)``,
    ``Dropdown(...)``), an ``interact``-style abbreviation (``(min, max)``, a list of options) or
    ``ipywidgets.fixed(value)``. ``plot`` must be deterministic given its arguments (pass the seed in).

    *Live* (Jupyter, Colab): the figure is drawn to a PNG in an ``ipywidgets.Image`` and redrawn whenever
    a control changes (no ``Output`` widget, whose captured messages intermittently deadlock headless
    execution, jupyter/nbclient#312). The box is displayed and returned; end the cell with ``;``.

    *Static* (``SOFTLIN_STATIC_EXPLORERS`` set): every combination of the controls' values is drawn, the
    default state twice (``plot`` must draw the same picture), and an HTML block is displayed and returned
    that shows the default picture and swaps in the others when the controls move, with no kernel.

    Raises
    ------
    TypeError if ``plot`` is not callable, or (static) a control has no finite set of values (a text box);
    ValueError if no control is given or an abbreviation is invalid; (static) if the controls have more
    than the static builder's limit of 60 combinations, a default value is not one of its slider's steps, or ``plot``
    draws two different pictures for the same parameters.
    """
    import ipywidgets as widgets
    from IPython.display import display

    check_callable("plot", plot)
    if not controls:
        raise ValueError("explorer needs at least one slider (keyword argument), got none")
    live, fixed_values = {}, {}
    for name, abbrev in controls.items():
        w = widgets.interactive.widget_from_abbrev(abbrev)
        if w is None:
            raise ValueError(f"{name}: cannot make a control from {abbrev!r}")
        if isinstance(w, widgets.fixed):
            fixed_values[name] = w.value
        else:
            w.description = w.description or name
            live[name] = w
    mode = os.environ.get(STATIC_ENV, "")
    if mode not in ("", "0"):
        html = _static_builder()(
            plot, live, fixed_values, figsize=FIGSIZE, dpi=DPI, check_only=mode == "check"
        )
        display(html)
        return html

    def render() -> bytes:
        return _render(plot, {**fixed_values, **{k: w.value for k, w in live.items()}})

    image = widgets.Image(value=render(), format="png", layout=widgets.Layout(max_width="576px"))
    for w in live.values():
        w.observe(lambda _change: setattr(image, "value", render()), names="value")
    box = widgets.VBox([*live.values(), image])
    display(box)
    return box


def _static_builder():
    """The static-frame builder of the site (``book/_ext/static_explorer.py``, found on the kernel's
    ``PYTHONPATH``, which ``tools/build_book.py`` sets): only a site build needs it, Colab never does.
    It owns its drawing helpers and imports nothing from softlin: this module hands it the figure size."""
    try:
        from static_explorer import static_explorer
    except ImportError as exc:
        raise RuntimeError(
            f"{STATIC_ENV} is set but book/_ext/static_explorer.py is not importable: run the "
            "chapter through tools/build_book.py, or put book/_ext on PYTHONPATH"
        ) from exc
    return static_explorer


def _render(plot, params) -> bytes:
    """PNG bytes of ``plot(ax, **params)`` on a fresh white figure (``FIGSIZE`` at ``DPI``, constrained
    layout): the live explorer's picture."""
    import io

    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI, layout="constrained", facecolor="white")
    try:
        plot(ax, **params)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI, facecolor="white")
        return buf.getvalue()
    finally:
        plt.close(fig)  # not shown by the inline backend: the explorer shows it


def small_multiples(
    plot, grid, *, ncols=3, panel_size=(3.2, 2.8), sharex=True, sharey=True, **fixed
):
    """Draw ``plot(ax, **params, **fixed)`` for each dict ``params`` of ``grid`` (a non-empty list; each
    panel should set its title from its parameters) on one figure of ``ncols`` panels a row.

    Returns the matplotlib Figure. Raises ValueError for an empty grid, TypeError for a non-dict entry.
    """
    check_callable("plot", plot)
    if isinstance(grid, (str, bytes, dict)) or not hasattr(grid, "__iter__"):
        raise TypeError(
            f"grid must be a list of dicts of parameter values, got {type(grid).__name__}"
        )
    grid = list(grid)
    if not all(isinstance(g, dict) for g in grid):
        raise TypeError("grid must be a list of dicts of parameter values")
    if not grid:
        raise ValueError("grid must hold at least one parameter dict, got an empty list")
    ncols = min(check_positive_int("ncols", ncols), len(grid))
    if not isinstance(panel_size, (list, tuple)) or len(panel_size) != 2:
        raise TypeError(f"panel_size must be a pair (width, height) in inches, got {panel_size!r}")
    for k, side in enumerate(panel_size):
        check_real(f"panel_size[{k}]", side, positive=True)
    for name, share in (("sharex", sharex), ("sharey", sharey)):
        if not isinstance(share, bool) and share not in ("row", "col", "all", "none"):
            raise TypeError(
                f"{name} must be True, False, 'row', 'col', 'all' or 'none', got {share!r}"
            )
    nrows = -(-len(grid) // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(panel_size[0] * ncols, panel_size[1] * nrows),
        sharex=sharex,
        sharey=sharey,
        squeeze=False,
        layout="constrained",
    )
    for ax, params in zip(axes.flat, grid):
        plot(ax, **params, **fixed)
    for ax in list(axes.flat)[len(grid) :]:
        ax.set_visible(False)
    return fig


def show_source(obj, *, docstring: bool = False) -> str:
    """Show the source code of a softlin function or class on the page, without its docstring.

    Lines of the library that end with the comment ``# validation`` (argument checks written inline, each
    one statement on one line) are left out: the page shows the mathematics, and the checks run all the
    same. Checks that run apart are named by the ``@validated_by(...)`` decorator line, which is kept,
    with a comment saying what it does (:data:`VALIDATED_BY_NOTE`).

    This is how a chapter shows the few lines a statement of the paper becomes: the code is read from the
    installed library with ``inspect.getsource``, never copied into the page. In IPython it is displayed
    as a highlighted Python block, elsewhere printed. Returns the code shown.

    Raises TypeError if ``obj`` has no Python source (a builtin, a number).
    """
    src = _shown_source(obj, docstring=docstring)
    from IPython import get_ipython
    from IPython.display import Markdown, display

    if get_ipython() is None:
        print(src)
    else:
        display(Markdown(f"```python\n{src}```"))
    return src


def _shown_source(obj, *, docstring: bool = False) -> str:
    """The code :func:`show_source` shows: the source of ``obj`` (decorators included), without its
    docstring unless ``docstring``."""
    import ast
    import inspect
    import textwrap

    check_bool("docstring", docstring)
    try:
        src = textwrap.dedent(inspect.getsource(obj))
    except (TypeError, OSError) as exc:
        raise TypeError(
            f"obj must be a Python function or class with source code, got {obj!r}"
        ) from exc
    body = getattr(ast.parse(src).body[0], "body", [])
    if (
        not docstring
        and body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        lines = src.splitlines()
        src = "\n".join(lines[: body[0].lineno - 1] + lines[body[0].end_lineno :]) + "\n"
    lines = src.splitlines(keepends=True)
    shown = [line for line in lines if not line.rstrip().endswith("# validation")]
    return "".join(_said(line) for line in shown)


#: The comment a shown ``@validated_by(...)`` line carries, so that a reader knows what it is.
VALIDATED_BY_NOTE = "  # checks the arguments first; the body trusts them"


def _said(line: str) -> str:
    """``line``, and for a ``@validated_by(...)`` decorator line without a comment, with
    :data:`VALIDATED_BY_NOTE` at its end."""
    if line.lstrip().startswith("@validated_by(") and "#" not in line:
        return line.rstrip("\n") + VALIDATED_BY_NOTE + "\n"
    return line


def _in_float64(compute, *args, **objects):
    """``compute(*args, **objects)`` in float64: torch's default dtype float64 meanwhile (restored after)
    and every floating tensor argument or object cast to float64, so that a key does not depend on
    whether the reader's kernel ran the page's ``torch.set_default_dtype`` cell."""
    import torch

    def wide(x):
        return x.to(torch.float64) if torch.is_tensor(x) and x.is_floating_point() else x

    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return compute(*map(wide, args), **{k: wide(v) for k, v in objects.items()})
    finally:
        torch.set_default_dtype(before)


NO_ANSWER = (
    "No answer yet: replace None by your answer, then run this cell in Colab or Jupyter to check "
    "your answer."
)


def _as_array(x):
    """A key as a float64 numpy array (a tensor is moved to the CPU)."""
    import numpy as np
    import torch

    return np.asarray(
        x.detach().cpu().double().numpy() if isinstance(x, torch.Tensor) else x, float
    )


def _fnv1a(text: str) -> str:
    """The 32-bit FNV-1a hash of ``text`` (ASCII), in hex: what the site's answer box compares."""
    h = 0x811C9DC5
    for byte in text.encode("ascii"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return format(h, "x")


def _rounded_hash(label: str, tag: str, values, digits: int) -> tuple[int, str]:
    """The unit exponent ``q`` of ``values`` at ``digits`` significant digits (of the largest entry),
    and the hash of ``"label:tag:n1,n2,..."``, each ``n = floor(x / 10**q + 0.5)``."""
    q = math.floor(math.log10(max(abs(v) for v in values))) - digits + 1
    ints = [math.floor(v / 10.0**q + 0.5) for v in values]
    return q, _fnv1a(f"{label}:{tag}{','.join(map(str, ints))}")


#: The wrong answers the site's box names, as :func:`make_check` does in a notebook: (tag, factor, words).
BOX_SLIPS = (
    ("sign:", -1.0, "your answer has the wrong sign (its size is right)"),
    (
        "twice:",
        2.0,
        "your answer is twice the expected value (a factor 2 lost or added somewhere?)",
    ),
    ("half:", 0.5, "your answer is half the expected value (a factor 2 lost or added somewhere?)"),
)


def answer_box(label: str, key, digits: int, what: str = "", hint: str = "") -> dict[str, str]:
    """The data of the site's answer box for exercise ``label``: hashes of the key rounded to
    ``digits`` significant digits and of a few named wrong answers, never the key. ``what`` names the
    value asked for when the exercise's answer is a function and the box asks for one of its values
    ("C(0.5)"); ``hint`` is the exercise's hint, shown under a wrong answer as the notebook shows it.

    The rounding unit is ``10**q`` with ``q = floor(log10 max|key|) - digits + 1``, the unit whose half
    the notebook's check allows; each entry ``x`` becomes ``floor(x / 10**q + 0.5)``, and the box
    (``softlin-reader.js`` on the site) accepts the numbers a reader types when they round to the same
    integers. So the box accepts the key rounded as the exercise asks, and rejects an answer off by a
    unit of the last asked digit. A wrong answer gets what the notebook's check would say of it where
    a hash can tell: the key with the wrong sign, twice or half the key (:data:`BOX_SLIPS`, each
    rounded at its own unit), or the key right to ``digits - 1`` significant digits but not ``digits``
    ("close": a slip in the last digit, or a small term missing; an answer right to fewer digits only
    may be wrong in its idea, and gets no more than the hint). As in the notebook, anyone can find the
    key by trying values, but it is not written in the page.

    Returns the ``data-`` attributes: ``label``, ``size`` (the number of entries), ``digits``, ``q``
    and ``hash`` (:func:`_fnv1a` of ``"label:n1,n2,..."``); ``slips`` (``tag q hash`` for each of
    :data:`BOX_SLIPS`, separated by ``;``), ``near`` (``q hash`` at ``digits - 1`` significant digits;
    empty when ``digits`` is 1); ``what`` and ``hint`` when given.

    Raises
    ------
    ValueError if ``key`` is empty, not finite or all zero, or ``digits`` is not a positive int;
    TypeError if ``label``, ``what`` or ``hint`` is not a str.
    """
    import numpy as np

    check_str("label", label)
    check_positive_int("digits", digits)
    for name, text in (("what", what), ("hint", hint)):
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str, got {text!r}")
    values = np.asarray(key, float).ravel()
    if values.size == 0 or not np.all(np.isfinite(values)) or not np.any(values):
        raise ValueError(f"key must hold finite numbers, not all zero; got {values.tolist()}")
    values = [float(v) for v in values]
    q, digest = _rounded_hash(label, "", values, digits)
    slips = [
        f"{tag} {' '.join(map(str, _rounded_hash(label, tag, [f * v for v in values], digits)))}"
        for tag, f, _ in BOX_SLIPS
    ]
    near = [  # one digit short of the asked precision: fewer digits right says little
        " ".join(map(str, _rounded_hash(label, f"near{k}:", values, k)))
        for k in range(digits - 1, max(digits - 2, 0), -1)
    ]
    return {
        "label": label,
        "size": str(len(values)),
        "digits": str(digits),
        "q": str(q),
        "hash": digest,
        "slips": ";".join(slips),
        "near": ";".join(near),
        **({"what": what} if what else {}),
        **({"hint": hint} if hint else {}),
    }


def _show(text: str, html_text: str) -> None:
    """Print ``text`` outside IPython; in a notebook, display it with ``html_text`` as its HTML."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython ships with the book's requirements
        get_ipython = None
    if get_ipython is None or get_ipython() is None:
        print(text)
        return
    display({"text/plain": text, "text/html": html_text}, raw=True)


def _no_answer_yet(message: str, box: dict[str, str] | None = None) -> None:
    """Say that a check cell has no answer yet: printed outside IPython; in a notebook, as text and as
    HTML of class ``softlin-no-answer``, which the site shows on screen and leaves out of the printed
    handouts (the sentence means nothing on paper). With ``box`` (:func:`answer_box`), the HTML carries
    its data, from which the site draws a box where a reader types the answer and checks it."""
    import html

    data = "".join(f' data-{k}="{html.escape(v)}"' for k, v in (box or {}).items())
    kind = "softlin-no-answer softlin-answer-box" if box else "softlin-no-answer"
    _show(message, f'<p class="{kind}"{data}>{html.escape(message)}</p>')


def _check_by_key(label: str, key, compute, answer):
    """answer_check's verdict by label: with no answer, the site's box (a number, or the one value a
    function answer names) where it has one; else the check of ``answer`` against the key."""
    if answer is None and key.inputs is None and key.digits is not None:
        _no_answer_yet(
            NO_ANSWER, answer_box(label, _as_array(compute()), key.digits, hint=key.hint)
        )
        return _Verdict(False)
    if answer is None and key.site_at is not None and key.digits is not None:
        # a function answer: the site's box asks for the one value the exercise names
        value = _as_array(compute(*key.site_at))
        _no_answer_yet(NO_ANSWER, answer_box(label, value, key.digits, key.site_what, key.hint))
        return _Verdict(False)
    check = make_check(
        compute, rtol=key.rtol, atol=key.atol, digits=key.digits, inputs=key.inputs, hint=key.hint
    )
    return check(answer)


def _proof_steps(steps: tuple[str, ...]) -> None:
    """Show an exercise's step hints for its "show that" part, each folded inside the one before (HTML
    ``details``: a reader opens one step at a time, on the site, in Jupyter and in Colab); plain text
    lists them. Left out of the printed handouts, like the no-answer note."""
    import html

    head = "Stuck on the proof? Its steps, one at a time"
    text = head + ":\n" + "\n".join(f"  Step {k}. {s}" for k, s in enumerate(steps, 1))
    inner = ""
    for k in range(len(steps), 0, -1):  # step k holds the summary of step k + 1 and its text
        inner = (
            f"<details><summary>Step {k} of {len(steps)}</summary>"
            f"<p>{html.escape(steps[k - 1])}</p>{inner}</details>"
        )
    _show(text, f'<div class="softlin-proof-steps"><p>{html.escape(head)}:</p>{inner}</div>')


def answer_check(
    expected,
    *args,
    rtol: float = 1e-6,
    atol: float = 0.0,
    digits: int | None = None,
    inputs=None,
    hint: str = "",
    **objects,
):
    """The self-check of an exercise, in one of two forms.

    ``answer_check(label, answer, **objects)`` (the chapters): checks ``answer`` against the key that
    :mod:`softlin.book.exercises` registers for the exercise ``label`` (e.g. ``"ex-ch1-one-token"``),
    computed from the chapter objects passed by keyword (the example's tensors, a chapter's own function);
    prints the verdict and returns it. The key is computed in float64 whatever torch's default dtype (a
    reader who restarts the kernel and runs only the exercise cells gets the same verdict). No notebook
    cell holds the key, so a student copy gives nothing away. Raises KeyError for an unknown label and TypeError when the objects the key needs are not
    exactly those given.

    ``answer_check(expected, rtol=..., inputs=..., hint=...)`` (a chapter's draft, tests) returns the
    ``check`` of a key given as a callable, as described in :func:`make_check`.
    """
    if isinstance(expected, str):
        import functools

        from .exercises import key_of

        key = key_of(expected)
        if len(args) != 1:
            raise TypeError(
                f"answer_check({expected!r}, answer, ...) takes one answer, got {len(args)} "
                "positional arguments after the label"
            )
        if set(objects) != set(key.objects):
            raise TypeError(
                f"the key of {expected!r} is computed from {sorted(key.objects) or 'nothing'} "
                f"(keyword arguments), got {sorted(objects) or 'nothing'}"
            )
        compute = functools.partial(_in_float64, key.compute, **objects)
        verdict = _check_by_key(expected, key, compute, args[0])
        if args[0] is None and key.steps:  # below the answer box: the proof's step hints
            _proof_steps(key.steps)
        return verdict
    if args or objects:
        raise TypeError(
            "answer_check(expected) with a callable key takes only rtol, atol, digits, inputs and "
            "hint; "
            "to check an answer by label, pass the label (a str) first"
        )
    return make_check(expected, rtol=rtol, atol=atol, digits=digits, inputs=inputs, hint=hint)


def make_check(
    expected,
    *,
    rtol: float = 1e-6,
    atol: float = 0.0,
    digits: int | None = None,
    inputs=None,
    hint: str = "",
):
    """A self-check for an exercise: returns ``check(answer)``, which says whether ``answer`` is right.

    The answer key comes from softlin's closed forms or a simulation, never a pasted number: ``expected`` is
    a callable of no arguments returning the value (a number, array or tensor), or, with ``inputs``, a
    reference *function*, and the reader's answer is then a function evaluated at each of ``inputs`` (a list
    of argument tuples). An answer is accepted when every entry is within ``atol + rtol * max|key|``;
    with ``digits`` (the precision the exercise states, "to three significant digits"), when it is within
    half a unit of the key's last asked digit, ``0.5 * 10**(floor(log10 max|key|) - digits + 1)``: the
    key rounded to ``digits`` significant digits passes, an answer off by more than that rounding fails.
    ``check`` prints "Correct" or what is wrong (a shape, NaN, text such as ``"0.199"`` instead of a
    number, the relative error and at which input)
    followed by ``hint``; it never prints the key, and ``check(None)`` says that no answer was given yet.
    The key is computed at each call (a bug in it raises, it is not blamed on the reader).

    Returns
    -------
    callable ``check(answer)`` returning a verdict that is true or false like a ``bool`` (an ``int`` that a
    notebook does not echo below the printed message); ``check.inputs`` is ``inputs``.

    Raises
    ------
    TypeError if ``expected`` is not callable; ValueError if ``rtol`` or ``atol`` is negative, ``digits``
    is not a positive int, or ``inputs`` is not a non-empty list of argument tuples.
    """
    import numpy as np

    if not callable(expected):
        raise TypeError(
            "expected must be a callable that computes the answer key, got "
            f"{type(expected).__name__}"
        )
    check_real("rtol", rtol, nonneg=True), check_real("atol", atol, nonneg=True)
    check_positive_int("digits", digits, allow_none=True)  # significant digits
    check_str("hint", hint)
    if inputs is not None:
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(
                f"inputs must be a list of argument tuples, got {type(inputs).__name__}"
            )
        inputs = [tuple(a) if isinstance(a, (tuple, list)) else (a,) for a in inputs]
        if not inputs:
            raise ValueError("inputs must hold at least one argument tuple, got an empty list")
    tail = f" {hint}" if hint else ""

    as_array = _as_array

    def verdict(answer) -> str | float:  # what is wrong, or the worst relative error
        if inputs is not None and not callable(answer):
            return f"your answer should be a function (def ... or lambda), it is a {type(answer).__name__}"
        worst = 0.0
        for k, args in enumerate(inputs or [()]):
            where = "" if inputs is None else f" at test input {k + 1} of {len(inputs)}"
            want = as_array(expected(*args))
            try:
                value = answer if inputs is None else answer(*args)
                if isinstance(value, (str, bytes)):  # numpy would parse "0.199": no text answers
                    return f"your answer{where} is text, {value!r}: give a number, without quotes"
                got = as_array(value)
            except Exception as exc:  # the reader's code may fail: say so instead of a traceback
                called = (
                    ""
                    if inputs is None
                    else " (it was called with "
                    + ", ".join(f"a {type(a).__name__}" for a in args)
                    + ": a function of math's works on floats only, torch's on tensors)"
                )
                return f"evaluating your answer{where} raised {type(exc).__name__}: {exc}{called}"
            if got.shape != want.shape and not got.size == want.size == 1:
                return f"your answer{where} has shape {got.shape}, which is not the expected shape"
            if not np.all(np.isfinite(got)):
                return f"your answer{where} contains NaN or inf"
            scale = float(np.abs(want).max()) if want.size else 0.0
            err = float(np.abs(got.reshape(want.shape) - want).max()) if want.size else 0.0
            if digits is not None and scale > 0:
                # half a unit of the last asked digit, and float rounding of the key itself
                allowed = 0.5 * 10.0 ** (math.floor(math.log10(scale)) - digits + 1) + 1e-12 * scale
            else:
                allowed = atol + rtol * scale
            if err > allowed:
                flipped = float(np.abs(got.reshape(want.shape) + want).max()) if want.size else 0.0
                if flipped <= allowed:  # right size, wrong sign: say so, not "off by 2"
                    return f"your answer{where} has the wrong sign (its size is right)"
                shaped = got.reshape(want.shape)
                for factor, words in (
                    (2.0, "twice"),
                    (0.5, "half"),
                ):  # a factor 1/2 lost or doubled
                    if float(np.abs(shaped - factor * want).max()) <= factor * allowed:
                        return (
                            f"your answer{where} is {words} the expected value (a factor 2 "
                            "lost or added somewhere?)"
                        )
                if digits is not None and digits > 1 and err <= 10 * allowed:
                    return (  # as the site's box says: right to one digit fewer than asked
                        f"your answer{where} is close, right to {digits - 1} significant digits "
                        f"but not {digits}: a slip in the last digit, or a small term missing?"
                    )
                return (
                    f"your answer{where} is off by {err / scale if scale else err:.2g} (relative "
                    "error)"
                )
            worst = max(worst, err / scale if scale else err)
        return worst

    def check(answer) -> _Verdict:
        if answer is None:
            _no_answer_yet(NO_ANSWER)
            return _Verdict(False)
        result = verdict(answer)
        ok = not isinstance(result, str)
        if ok and digits is not None:
            print(f"Correct (to {digits} significant digits).")
        else:
            print(f"Correct (relative error {result:.1g})." if ok else f"Not yet: {result}.{tail}")
        return _Verdict(ok)

    check.inputs = inputs
    return check


class _Verdict(int):
    """True or False, like a bool, that IPython does not display (the check has printed its message)."""

    def __repr__(self):
        return repr(bool(self))

    def _ipython_display_(self):
        pass
