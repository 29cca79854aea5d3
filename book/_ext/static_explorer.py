"""The static-frame builder of the explorers, used only when the book's site is built.

``softlin.book.widgets.explorer`` calls :func:`static_explorer` when ``SOFTLIN_STATIC_EXPLORERS`` is set
(``tools/build_book.py`` sets it and puts this folder on the kernels' ``PYTHONPATH``): it draws every
combination of the controls' values once and returns the HTML that ``static/softlin-explorer.js`` swaps
with no kernel. Colab and Jupyter readers never need it: their explorers redraw live.
"""

from __future__ import annotations

__all__ = ["static_explorer"]

#: The most pictures one explorer precomputes: about 1 MB of page per 60 pictures of 576 x 360 pixels.
FRAME_LIMIT = 60


def _draw(plot, params, position=None, *, figsize=(6.4, 4.0), dpi=90):
    """``plot(ax, **params)`` on a fresh white figure -> (RGB pixels (H, W, 3), axes position or None).

    With ``position`` (figure fractions) the axes are placed there, about twice as fast as constrained
    layout; if the plot then adds axes or reaches outside the figure, it is drawn again with constrained
    layout. The position returned is the axes' own when the figure holds one axes, else None."""
    import matplotlib.pyplot as plt
    import numpy as np

    if position is None:
        fig, ax = plt.subplots(figsize=figsize, dpi=dpi, layout="constrained", facecolor="white")
    else:
        fig = plt.figure(figsize=figsize, dpi=dpi, facecolor="white")
        ax = fig.add_axes(position)
    try:
        plot(ax, **params)
        fig.canvas.draw()
        again = {"figsize": figsize, "dpi": dpi}
        if position is not None and len(fig.axes) > 1:
            return _draw(plot, params, **again)
        if position is not None:
            box = ax.get_tightbbox(fig.canvas.get_renderer())  # labels, ticks, title, legend
            if min(box.x0, box.y0) < 0 or box.x1 > fig.bbox.width or box.y1 > fig.bbox.height:
                return _draw(plot, params, **again)
        rgb = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
        return rgb, ax.get_position().bounds if len(fig.axes) == 1 else None
    finally:
        plt.close(fig)


def _png(rgb, colours: int) -> bytes:
    """PNG bytes of an RGB array quantised to a palette of ``colours`` (about 3x smaller for line art),
    compressed at level 9 (about 7 % smaller than the live redraw's level 6)."""
    import io

    from PIL import Image

    img = Image.fromarray(rgb).quantize(
        colors=colours, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE
    )
    buf = io.BytesIO()
    img.save(buf, format="png", compress_level=9)
    return buf.getvalue()


def _control_values(name, w):
    """Every value control ``w`` can take: (labels, values, index of its value, "range" or "select")."""
    import math

    import ipywidgets as widgets

    if isinstance(
        w,
        (
            widgets.SelectionSlider,
            widgets.Dropdown,
            widgets.RadioButtons,
            widgets.ToggleButtons,
            widgets.Select,
        ),
    ):
        kind = "range" if isinstance(w, widgets.SelectionSlider) else "select"
        return list(w._options_labels), list(w._options_values), w.index, kind
    if isinstance(w, (widgets.Checkbox, widgets.ToggleButton)):
        return ["off", "on"], [False, True], int(bool(w.value)), "select"
    if isinstance(w, widgets.IntSlider):
        values = list(range(w.min, w.max + 1, w.step))
    elif isinstance(w, (widgets.FloatSlider, widgets.FloatLogSlider)):
        exps = [round(w.min + k * w.step, 12) for k in range(round((w.max - w.min) / w.step) + 1)]
        values = [w.base**e for e in exps] if isinstance(w, widgets.FloatLogSlider) else exps
    else:
        raise TypeError(
            f"explorer control {name!r} is a {type(w).__name__}, which has no finite set of "
            "values to precompute; use a SelectionSlider(options=[...], value=...), a Dropdown, "
            "an IntSlider or a FloatSlider"
        )
    index = min(range(len(values)), key=lambda k: abs(values[k] - w.value))
    if not math.isclose(values[index], w.value, rel_tol=1e-9, abs_tol=1e-12):
        raise ValueError(
            f"explorer control {name!r}: its value {w.value!r} is not one of its steps "
            f"{values[0]!r}, ..., {values[-1]!r}"
        )
    values[index] = w.value
    return [format(v, w.readout_format) for v in values], values, index, "range"


def static_explorer(plot, controls, fixed_values, *, figsize=(6.4, 4.0), dpi=90, check_only=False):
    """Draw every state of the explorer and return the HTML that shows them without a kernel.

    ``figsize`` and ``dpi`` are the live explorer's (``softlin.book.widgets`` passes them); with
    ``check_only`` (a run that builds no site: tests, seed sweeps) only the default state is drawn,
    twice, and every state's controls are checked."""
    import base64
    import hashlib
    import html
    import itertools
    import json
    import math
    import re

    import numpy as np
    from IPython.display import HTML

    spec = {name: _control_values(name, w) for name, w in controls.items()}
    for name in [n for n, s in spec.items() if len(s[1]) == 1 and len(spec) > 1]:
        fixed_values = {
            **fixed_values,
            name: spec.pop(name)[1][0],
        }  # a one-value control moves nothing
    shape = [len(values) for _, values, _, _ in spec.values()]
    n_frames, default = math.prod(shape), tuple(s[2] for s in spec.values())
    if n_frames > FRAME_LIMIT:
        sizes = " x ".join(f"{name}: {n}" for name, n in zip(spec, shape))
        raise ValueError(
            f"explorer has {n_frames} states ({sizes} values), more than the {FRAME_LIMIT} the "
            "static site precomputes; give each control a few values, e.g. "
            f"SelectionSlider(options=[...], value=...), whose product is at most {FRAME_LIMIT}"
        )

    def params_of(state):
        return {**fixed_values, **{name: s[1][k] for (name, s), k in zip(spec.items(), state)}}

    states = [default] if check_only else list(itertools.product(*map(range, shape)))  # C order
    size = {"figsize": figsize, "dpi": dpi}
    # the default state's layout, kept for every state
    _, position = _draw(plot, params_of(default), **size)
    frames = {state: _draw(plot, params_of(state), position, **size)[0] for state in states}
    again, _ = _draw(plot, params_of(default), position, **size)
    if not np.array_equal(again, frames[default]):
        raise ValueError(
            "explorer: plot drew two different pictures for the same parameters; it must be "
            "deterministic given its arguments (pass the seed in, use no global random state)"
        )
    uris = [
        "data:image/png;base64," + base64.b64encode(_png(rgb, 256)).decode()
        for rgb in frames.values()
    ]
    if check_only:
        return HTML(
            f'<div class="softlin-explorer-checked"><img src="{uris[0]}" alt="The explorer\'s '
            f'default picture"><p>Default picture only: this run checked the {n_frames} states of '
            "the explorer without drawing them (no site is built).</p></div>"
        )
    flat = int(np.ravel_multi_index(default, shape))
    uid = "softlin-explorer-" + hashlib.sha1("".join(uris).encode()).hexdigest()[:12]
    names = [str(controls[name].description or name) for name in spec]
    rows = []
    for k, (labels, _, index, kind) in enumerate(spec.values()):
        cid, label = f"{uid}-c{k}", html.escape(labels[index])
        if kind == "range":
            field = (
                f'<input type="range" id="{cid}" data-control="{k}" min="0" max="{len(labels) - 1}" '
                f'step="1" value="{index}" aria-valuetext="{label}"><output for="{cid}">{label}</output>'
            )
        else:
            options = "".join(
                f'<option value="{j}"{" selected" * (j == index)}>{html.escape(s)}</option>'
                for j, s in enumerate(labels)
            )
            field = f'<select id="{cid}" data-control="{k}">{options}</select>'
        tex = re.sub(
            r"\$([^$]+)\$",
            r'<span class="math notranslate nohighlight">\(\1\)</span>',
            html.escape(names[k]),
        )  # $...$ is typeset by MathJax, as ipywidgets does
        rows.append(
            f'<div class="softlin-explorer-control"><label for="{cid}">{tex}</label>{field}</div>'
        )
    plain = [re.sub(r"[$\\]", "", s) for s in names]
    state = html.escape(
        ", ".join(f"{s} = {spec_[0][i]}" for s, spec_, i in zip(plain, spec.values(), default))
    )
    data = {
        "names": plain,
        "labels": [s[0] for s in spec.values()],
        "shape": shape,
        "default": list(default),
        "frames": [None if i == flat else f for i, f in enumerate(uris)],
    }
    h, w = frames[default].shape[:2]
    payload = json.dumps(data).replace("<", "\\u003c")  # nothing in it can close the <script>
    return HTML(
        f'<div class="softlin-explorer" id="{uid}" data-frames="{n_frames}" data-default-frame="{flat}">'
        f'<div class="softlin-explorer-controls">{"".join(rows)}</div>'
        f'<img class="softlin-explorer-frame" src="{uris[flat]}" width="{w}" height="{h}" '
        f'data-frame="{flat}" alt="Explorer picture at {state} (one of {n_frames} pictures drawn when the '
        'book was built; move the controls to see the others)">'
        f'<p class="softlin-explorer-note">All {n_frames} pictures were drawn when this page was built, '
        "with the same plotting function; in Jupyter or Colab the controls redraw it live.</p>"
        f'<p class="softlin-explorer-print">Explorer shown at {state}; on the web page or in the notebook '
        "its controls move it.</p>"
        '<script type="application/json" class="softlin-explorer-data">'
        f"{payload}</script></div>"
    )
