"""softlin.book.widgets: the precomputed (static) explorer and the exercise self-checks.

The browser side of the static explorer (the controls really move the picture) is checked in
tests/test_explorer_page.py on a small page of its own, and on every chapter in tests/test_site.py.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from ipywidgets import (
    Dropdown,
    FloatLogSlider,
    FloatSlider,
    IntSlider,
    SelectionSlider,
    Text,
    fixed,
)
from PIL import Image
from softlin.book import widgets
from softlin.book.exercises import KEYS

pytestmark = pytest.mark.unit  # the library's unit tests: `make check` runs them


@pytest.fixture
def static(monkeypatch):
    monkeypatch.setenv(widgets.STATIC_ENV, "1")
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "book" / "_ext"))


def parse(html_obj) -> tuple[str, dict]:
    page = html_obj.data
    payload = re.search(
        r'<script type="application/json" class="softlin-explorer-data">(.*?)</script>',
        page,
        re.DOTALL,
    )
    return page, json.loads(payload.group(1))


def decode(uri: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB"))


def test_static_explorer_draws_every_state_once_in_c_order_and_shows_the_default(static):
    calls = []

    def plot(ax, L, law, c):
        calls.append((L, law, c))
        ax.plot([0, 1], [0, L])
        ax.set_title(f"L={L} {law}")

    out = widgets.explorer(
        plot,
        L=SelectionSlider(options=[10, 30, 100], value=30, description="L"),
        law=Dropdown(options=["gauss", "student"], value="student"),
        c=fixed(7),
    )
    page, data = parse(out)
    states = [(L, law, 7) for L in (10, 30, 100) for law in ("gauss", "student")]
    assert calls[0] == (30, "student", 7)  # the default first: its layout is kept for every state
    drawn = [
        c for i, c in enumerate(calls[1:-1]) if i == 0 or c != calls[i]
    ]  # a redraw for room: once
    assert drawn == states  # every state, the last control varying fastest
    assert calls[-1] == (30, "student", 7)  # the default drawn again: the determinism check
    assert data["shape"] == [3, 2] and data["default"] == [1, 1]
    assert data["labels"] == [["10", "30", "100"], ["gauss", "student"]]
    flat = 1 * 2 + 1
    assert data["frames"][flat] is None and sum(f is None for f in data["frames"]) == 1
    src = re.search(r'<img class="softlin-explorer-frame" src="([^"]+)"', page).group(1)
    assert src.startswith("data:image/png;base64,") and f'data-frame="{flat}"' in page
    pictures = [decode(f) if f else decode(src) for f in data["frames"]]
    assert pictures[0].shape == (360, 576, 3)  # FIGSIZE at DPI, the same for every frame
    assert len({p.tobytes() for p in pictures}) == 6, (
        "the six states must give six different pictures"
    )
    assert 'value="1"' in page and "<select" in page and 'type="range"' in page
    assert 'alt="Explorer picture at L = 30, law = student' in page
    assert plt.get_fignums() == []


@pytest.mark.slow  # 3.5 s of CPU (every slider drawn): left to `make test`
def test_slider_values_are_every_step_and_include_the_default(static):
    seen = {}

    def plot(ax, a, b, n):
        seen.setdefault("a", set()).add(a)
        seen.setdefault("b", set()).add(b)
        seen.setdefault("n", set()).add(n)

    out = widgets.explorer(
        plot,
        a=FloatSlider(value=0.75, min=0.0, max=1.0, step=0.25),
        b=FloatLogSlider(value=1.0, base=10, min=-1, max=1, step=1),
        n=IntSlider(3, 1, 5, 2),
    )
    _, data = parse(out)
    assert sorted(seen["a"]) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert np.allclose(sorted(seen["b"]), [0.1, 1.0, 10.0]) and 1.0 in seen["b"]
    assert sorted(seen["n"]) == [1, 3, 5]
    assert data["labels"][0] == ["0.00", "0.25", "0.50", "0.75", "1.00"] and data["default"] == [
        3,
        1,
        1,
    ]


def test_too_many_states_is_an_error_that_names_the_controls(static):
    with pytest.raises(ValueError, match=r"400 states \(L: 20 x tilt: 20 values\).*at most 60"):
        widgets.explorer(
            lambda ax, L, tilt: None,
            L=IntSlider(value=5, min=5, max=100, step=5),
            tilt=FloatSlider(value=0.1, min=0.1, max=2.0, step=0.1),
        )


def test_a_control_without_finite_values_or_a_default_off_its_steps_is_refused(static):
    with pytest.raises(TypeError, match="'name' is a Text"):
        widgets.explorer(lambda ax, name: None, name=Text(value="x"))
    slider = FloatSlider(value=0.3, min=0.0, max=1.0, step=0.5)  # ipywidgets keeps 0.3 off the grid
    if slider.value == 0.3:
        with pytest.raises(ValueError, match="not one of its steps"):
            widgets.explorer(lambda ax, a: None, a=slider)


def test_a_plot_that_is_not_deterministic_is_refused(static):
    rng = np.random.default_rng(0)

    def noisy(ax, L):
        ax.plot(rng.normal(size=L))

    with pytest.raises(ValueError, match="deterministic"):
        widgets.explorer(noisy, L=SelectionSlider(options=[5, 10], value=5))


def test_the_live_explorer_is_unchanged_without_the_environment_variable(monkeypatch):
    monkeypatch.delenv(widgets.STATIC_ENV, raising=False)
    box = widgets.explorer(
        lambda ax, L: ax.plot([0, L]), L=SelectionSlider(options=[1, 2], value=1)
    )
    slider, image = box.children
    assert type(slider).__name__ == "SelectionSlider" and bytes(image.value[:4]) == b"\x89PNG"


def test_a_tex_description_is_typeset_and_kept_out_of_the_alt_text(static):
    out = widgets.explorer(
        lambda ax, a: ax.plot([0, a]),
        a=SelectionSlider(options=[1, 2], value=2, description=r"$\alpha$"),
    )
    page, data = parse(out)
    assert r'<span class="math notranslate nohighlight">\(\alpha\)</span>' in page
    assert data["names"] == ["alpha"] and 'alt="Explorer picture at alpha = 2' in page


# --- answer_check -------------------------------------------------------------------------------------


def test_answer_check_accepts_the_key_and_rejects_without_printing_it(capsys):
    key = torch.tensor([0.123456, -2.5])
    check = widgets.answer_check(lambda: key, rtol=1e-9, hint="Hint: look at the weights.")
    assert check(key.clone()) == True
    assert capsys.readouterr().out.startswith("Correct")
    assert check(key * 1.1) == False
    out = capsys.readouterr().out
    assert "off by 0.1 (relative error)" in out and "Hint: look at the weights." in out
    assert "0.123" not in out and "2.5" not in out
    assert check(None) == False and "No answer yet" in capsys.readouterr().out
    assert check(torch.zeros(3)) == False and "not the expected shape" in capsys.readouterr().out
    assert check(torch.tensor([float("nan"), 0.0])) == False and "NaN" in capsys.readouterr().out
    # the right size with the wrong sign is named as such, not "off by 2"
    assert check(-key) == False
    out = capsys.readouterr().out
    assert "has the wrong sign (its size is right)" in out and "off by" not in out
    # twice or half the key is named as such (a half-MSE risk against the full MSE, say)
    for factor, words in (
        (2.0, "is twice the expected value"),
        (0.5, "is half the expected value"),
    ):
        assert check(factor * key) == False
        out = capsys.readouterr().out
        assert words in out and "off by" not in out and "0.123" not in out
    assert check(2.2 * key) == False and "off by 1.2" in capsys.readouterr().out


def test_answer_check_rejects_text_that_numpy_would_parse_as_the_right_number(capsys):
    check = widgets.answer_check(lambda: 0.199, digits=3)
    assert check(0.199) == True
    capsys.readouterr()
    assert check("0.199") == False
    assert "is text, '0.199': give a number" in capsys.readouterr().out
    function = widgets.answer_check(lambda x: 2 * x, inputs=[(1.0,)], digits=3)
    assert function(lambda x: "2.0") == False
    assert "at test input 1 of 1 is text" in capsys.readouterr().out


def test_answer_check_of_a_function_names_the_failing_input(capsys):
    check = widgets.answer_check(lambda x: np.tanh(x), inputs=[(0.5,), (2.0,)], rtol=1e-8)
    assert check(np.tanh) == True
    assert check(lambda x: np.tanh(x) if x < 1 else 1.0) == False
    assert "at test input 2 of 2" in capsys.readouterr().out.splitlines()[-1]
    assert check(0.46) == False and "should be a function" in capsys.readouterr().out
    assert check(lambda x: 1 / 0) == False and "ZeroDivisionError" in capsys.readouterr().out
    assert check.inputs == [(0.5,), (2.0,)]


def test_answer_check_rejects_bad_arguments():
    with pytest.raises(TypeError, match="callable"):
        widgets.answer_check(3.0)
    with pytest.raises(ValueError, match="non-negative"):
        widgets.answer_check(lambda: 1.0, rtol=-1)
    with pytest.raises(ValueError, match="at least one"):
        widgets.answer_check(lambda x: x, inputs=[])


def test_a_verdict_is_true_or_false_and_not_echoed():
    check = widgets.answer_check(lambda: 1.0)
    verdict = check(1.0)
    assert verdict and verdict == True and repr(verdict) == "True"
    assert hasattr(verdict, "_ipython_display_") and not check(2.0)


def test_a_control_with_one_value_is_not_shown(static):
    out = widgets.explorer(
        lambda ax, L, seed: ax.plot([0, L + seed]),
        L=SelectionSlider(options=[1, 2], value=1),
        seed=[5],
    )
    page, data = parse(out)
    assert data["names"] == ["L"] and page.count("data-control=") == 1


def test_in_check_mode_the_explorer_validates_and_draws_the_default_only(monkeypatch):
    monkeypatch.setenv(widgets.STATIC_ENV, "check")
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
    calls = []
    out = widgets.explorer(
        lambda ax, L: calls.append(L), L=SelectionSlider(options=[1, 2, 3], value=2)
    )
    assert calls == [2, 2, 2] and "checked the 3 states" in out.data
    with pytest.raises(ValueError, match="more than the 60"):
        widgets.explorer(lambda ax, L: None, L=IntSlider(value=1, min=1, max=100))


def test_the_default_layout_is_kept_unless_a_state_needs_more_room(static):
    from static_explorer import _draw

    def plot(ax, label):
        ax.plot([0, 1], [0, 1])
        ax.set_ylabel(label)

    rgb, position = _draw(plot, {"label": "y"})
    assert rgb.shape == (360, 576, 3) and position is not None
    frozen, _ = _draw(plot, {"label": "y"}, position)
    assert np.array_equal(frozen, rgb)  # the same layout gives the same picture
    wide = "a label far too long " * 3
    fitted, _ = _draw(plot, {"label": "\n".join([wide] * 4)}, position)  # falls back to a layout
    plt.close("all")
    assert fitted.shape == rgb.shape

    def with_colorbar(ax):
        image = ax.imshow(np.eye(3))
        ax.figure.colorbar(image, ax=ax)

    _, position = _draw(with_colorbar, {})
    assert position is None  # two axes: every state is laid out by constrained layout


def test_a_stated_precision_accepts_the_rounded_key_and_rejects_a_wrong_digit(capsys):
    from softlin.book.widgets import make_check

    check = make_check(lambda: 2.0529373, digits=4)
    assert check(2.053) and check(2.0529373) and check(2.0526)
    assert "Correct (to 4 significant digits)" in capsys.readouterr().out
    assert not check(2.054) and not check(2.052)
    said = capsys.readouterr().out  # right to 3 digits, not 4: named as close, as the site's box
    assert said.count("close, right to 3 significant digits but not 4") == 2, said
    assert not check(2.07)  # off in the third digit: an error, not a rounding
    said = capsys.readouterr().out
    assert "off by 0.0083 (relative error)" in said and "close" not in said, said
    assert make_check(lambda: -0.000123456, digits=3)(-0.000123)
    assert not make_check(lambda: -0.000123456, digits=3)(-0.000124)
    function = make_check(lambda x: 3.14159 * x, digits=3, inputs=[(1.0,), (2.0,)])
    assert function(lambda x: 3.14 * x) and not function(lambda x: 3.13 * x)
    with pytest.raises(ValueError, match="digits must be a positive int"):
        make_check(lambda: 1.0, digits=0)


def test_a_labelled_key_is_the_same_whatever_torch_default_dtype(capsys):
    """A reader who restarts the kernel and runs only an exercise's cells has torch's float32 default:
    every key that needs no chapter object gives the same verdict there (no dtype error, the float64
    key's value, or function, still accepted, one 10 % off still refused)."""
    from softlin.book.exercises import KEYS

    plain = {label: key for label, key in KEYS.items() if not key.objects and not key.inputs}
    assert plain, (
        "no exercise key without chapter objects and inputs: the test would assert nothing"
    )
    functions = {label: key for label, key in KEYS.items() if not key.objects and key.inputs}
    assert functions, "no exercise key whose answer is a function: the test would assert nothing"
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the pages' default: the keys' reference values
    try:
        keys = {label: key.compute() for label, key in plain.items()}
        torch.set_default_dtype(torch.float32)
        for label, value in keys.items():
            assert widgets.answer_check(label, value), f"{label}: its own key refused in float32"
            assert torch.get_default_dtype() == torch.float32, (
                f"{label}: default dtype not restored"
            )
            off = (
                np.asarray(value, dtype=float) * 1.1 + 0.1
            )  # beyond any stated precision (at most two digits off)
            assert not widgets.answer_check(label, off), (
                f"{label}: a wrong answer accepted in float32"
            )
        for label, key in functions.items():
            # the key function itself as the answer, run in float64 on float64 copies of the inputs (a
            # reference independent of the check's own casting); then the same answer 10 % off
            def reference(*args, key=key):
                old = torch.get_default_dtype()
                torch.set_default_dtype(torch.float64)
                try:
                    return key.compute(*[a.double() if torch.is_tensor(a) else a for a in args])
                finally:
                    torch.set_default_dtype(old)

            assert widgets.answer_check(label, reference), (
                f"{label}: its own key refused in float32"
            )
            assert torch.get_default_dtype() == torch.float32, f"{label}: dtype not restored"
            wrong = widgets.answer_check(label, lambda *args, ref=reference: ref(*args) * 1.1 + 0.1)
            assert not wrong, f"{label}: a wrong function accepted in float32"
    finally:
        torch.set_default_dtype(before)
    capsys.readouterr()


def _box_rounds(box: dict, numbers, tag: str, q, digest: str) -> bool:
    ints = [int(np.floor(x / 10.0 ** int(q) + 0.5)) for x in np.ravel(numbers)]
    return widgets._fnv1a(f"{box['label']}:{tag}{','.join(map(str, ints))}") == digest


def _box_accepts(box: dict, numbers) -> bool:
    """The site's answer box (book/_ext/static/softlin-reader.js, item 6), in Python: the numbers
    typed, rounded to the box's unit, hash to the box's hash."""
    return _box_rounds(box, numbers, "", box["q"], box["hash"])


def _box_says(box: dict, numbers) -> str:
    """What the site's box tells a wrong answer, in Python: a slip's tag ("sign:", "twice:",
    "half:"), "near<k>:" for the first k significant digits right, or "" (nothing more to say)."""
    for slip in box["slips"].split(";"):
        tag, q, digest = slip.split(" ")
        if _box_rounds(box, numbers, tag, q, digest):
            return tag
    for i, near in enumerate(box["near"].split(";") if box["near"] else []):
        k = int(box["digits"]) - 1 - i
        q, digest = near.split(" ")
        if _box_rounds(box, numbers, f"near{k}:", q, digest):
            return f"near{k}:"
    return ""


@pytest.mark.parametrize("key", [0.19865241, -85.6667, 241.358, [0.5423, 0.19244], [2.5, -0.0123]])
def test_the_answer_box_names_a_slip_and_a_near_answer_without_the_key(key):
    """A wrong answer in the site's box is told what the notebook's check says of it where a hash
    can tell: the key negated, doubled or halved (each rounded to the asked digits) is named, the key
    rounded to 2 of the 3 asked digits (or truncated) is "near", one right to 1 digit only is told
    nothing more (it may be wrong in its idea). No datum of the box holds the key's digits."""
    key = np.asarray(key, float)
    box = widgets.answer_box("ex-demo", key, 3, hint="Hint: look again.")
    assert box["hint"] == "Hint: look again."

    def at(x, digits):  # x rounded to `digits` significant digits of its largest entry
        unit = 10.0 ** (np.floor(np.log10(np.abs(x).max())) - digits + 1)
        return np.floor(x / unit + 0.5) * unit  # half up, as the box rounds (np.round: half even)

    assert _box_says(box, at(-key, 3)) == "sign:"
    assert _box_says(box, at(2 * key, 3)) == "twice:"
    assert _box_says(box, at(key / 2, 3)) == "half:"
    two, one = at(key, 2), at(key, 1)  # "0.2" for 0.19865 is also 0.20: right at 2 digits
    assert _box_accepts(box, two) or _box_says(box, two) == "near2:", (two, _box_says(box, two))
    if not np.allclose(one, two):  # right to one digit only: no more than the hint
        assert _box_says(box, one) == "", (one, _box_says(box, one))
    unit = 10.0 ** int(box["q"])
    truncated = np.trunc(key / unit - 0.5 * np.sign(key)) * unit  # a last digit lost to truncation
    assert _box_accepts(box, truncated) or _box_says(box, truncated).startswith("near"), truncated
    assert _box_says(box, 3.7 * key + 1.0) == ""  # nothing to say of an unrelated answer
    digits_of_key = {f"{abs(x):.3g}".replace(".", "").lstrip("0")[:3] for x in key.ravel()}
    assert not any(d in str(box) for d in digits_of_key if len(d) == 3), (digits_of_key, box)


@pytest.mark.parametrize(
    "key", [0.19865241, 1.6666667, -85.6667, 241.358, [0.5423, 0.19244], [2.5, -0.0123]]
)
def test_the_answer_box_accepts_the_key_rounded_as_asked_and_rejects_a_unit_off(key):
    """The box on the site accepts the key rounded to its digits, and an answer within a third of a
    unit of the last asked digit; it rejects one moved by 1.5 units, or by one unit in one entry."""
    key = np.asarray(key, float)
    box = widgets.answer_box("ex-demo", key, 3)
    unit = 10.0 ** int(box["q"])
    assert box["size"] == str(key.size) and box["digits"] == "3"
    rounded = np.round(key / unit) * unit
    assert _box_accepts(box, rounded), (key, rounded)
    assert _box_accepts(box, rounded + unit / 3)
    assert not _box_accepts(box, rounded + 1.5 * unit)
    one_off = rounded.copy().ravel()
    one_off[-1] += unit
    assert not _box_accepts(box, one_off)
    assert widgets.answer_box("ex-other", key, 3)["hash"] != box["hash"]  # the label salts it


def test_a_check_cell_with_no_answer_hands_the_box_a_hash_not_the_key(monkeypatch):
    """An exercise's check cell with no answer (``answer = None``) displays the box's data: the hash of
    the rounded key, its unit and size, never the key's digits; a key that is a function gets no box,
    unless its exercise names one value to compute (``site_at``): then the box asks for that value."""
    shown = []
    monkeypatch.setattr(widgets, "_no_answer_yet", lambda message, box=None: shown.append(box))
    assert widgets.answer_check("ex-ch4-gronwall", None) == False
    box = shown.pop()
    assert box["label"] == "ex-ch4-gronwall" and box["size"] == "1", box
    assert "198" not in str(box) and "199" not in str(box), box  # the key is 0.19865...
    assert _box_accepts(box, 0.199) and not _box_accepts(box, 0.201)
    sigma_key = KEYS["ex-ch3-sigma"]  # a function key whose exercise named no value: no box
    monkeypatch.setitem(KEYS, "ex-ch3-sigma", dataclasses.replace(sigma_key, site_at=None))
    assert widgets.answer_check("ex-ch3-sigma", None) == False
    assert shown.pop() is None
    monkeypatch.setitem(KEYS, "ex-ch3-sigma", sigma_key)
    assert widgets.answer_check("ex-ch3-sigma", None) == False  # -1 / (2 sigma^2 u^2): -0.617
    box = shown.pop()
    assert box["what"] == "the exponent at sigma = 1.5, u = 0.6" and "617" not in str(box), box
    assert _box_accepts(box, -0.617) and not _box_accepts(box, -0.619)
    assert widgets.answer_check("ex-ch3-constant", None) == False  # C(u); the site asks for C(0.5)
    box = shown.pop()
    c_half = 3 / math.sqrt(2)  # (1 - 2u^2)^(-1/2) + u^2 (1 - 2u^2)^(-3/2) at u = 0.5, by hand
    assert box["what"] == "C(0.5)" and "212" not in str(box), box
    assert _box_accepts(box, round(c_half, 2)) and not _box_accepts(box, round(c_half, 2) + 0.015)
    with pytest.raises(TypeError, match="what must be a str"):
        widgets.answer_box("ex-demo", 1.0, 3, 0.5)


def test_the_answer_box_refuses_a_key_it_cannot_round():
    for bad in ([0.0, 0.0], [float("nan")], []):
        with pytest.raises(ValueError, match="key must hold finite numbers"):
            widgets.answer_box("ex-demo", bad, 3)
    with pytest.raises(ValueError, match="digits"):
        widgets.answer_box("ex-demo", 1.0, 0)


def test_a_show_that_part_gets_its_steps_folded_one_inside_the_other(monkeypatch, capsys):
    """With no answer yet, the check cell of an exercise with a "show that" part shows its step hints
    below the answer box: in a notebook as HTML ``details``, step k + 1 inside step k, so a reader opens
    one step at a time (and the print style leaves them out); in plain Python as a numbered list. Once
    an answer is given, only the verdict is printed."""
    with_steps = [label for label, key in KEYS.items() if key.steps]
    assert len(with_steps) >= 6, with_steps
    for label in with_steps:
        assert all(isinstance(s, str) and len(s) > 30 for s in KEYS[label].steps), label
    shown = []
    monkeypatch.setattr(widgets, "_no_answer_yet", lambda message, box=None: shown.append("box"))
    widgets.answer_check("ex-ch4-gronwall", None)
    out = capsys.readouterr().out
    steps = KEYS["ex-ch4-gronwall"].steps
    assert shown == ["box"] and "Stuck on the proof?" in out, out
    assert all(f"Step {k}. {s}" in out for k, s in enumerate(steps, 1)), out
    assert widgets.answer_check("ex-ch4-gronwall", 0.199) == True
    assert "Stuck" not in capsys.readouterr().out  # an answer gets its verdict only

    displayed = []
    monkeypatch.setattr("IPython.get_ipython", lambda: object())
    monkeypatch.setattr(
        "IPython.display.display", lambda data, raw=False: displayed.append(data["text/html"])
    )
    widgets._proof_steps(("first <step>", "second", "third"))
    html = displayed.pop()
    assert html.startswith('<div class="softlin-proof-steps">'), html
    assert html.count("<details>") == 3 and "first &lt;step&gt;" in html, html
    nested = html.index("Step 1 of 3") < html.index("Step 2 of 3") < html.index("Step 3 of 3")
    assert nested and html.index("</details>") > html.index("third"), html  # 3 inside 2 inside 1
    css = Path(__file__).resolve().parents[1] / "book" / "_ext" / "static" / "book_site.css"
    hidden = [ln for ln in css.read_text().splitlines() if "softlin-proof-steps" in ln]
    assert hidden and "display: none" in hidden[0], "the print style keeps the step hints"
