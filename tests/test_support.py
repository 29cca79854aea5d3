"""The plotting style, the explorers' static fallback, and the mode tables."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
from softlin.book import modes, plotting, widgets

pytestmark = pytest.mark.unit  # the library's unit tests: `make check` runs them


def test_book_style_pairs_each_colour_with_a_marker_and_a_line_style():
    plotting.use_book_style()
    cyc = list(matplotlib.rcParams["axes.prop_cycle"])
    assert len({(c["color"]) for c in cyc}) == len(cyc) == len({c["marker"] for c in cyc})
    styles = plotting.series_styles(3)
    assert len({s["marker"] for s in styles}) == 3


def test_small_multiples_draws_one_panel_per_parameter_set():
    calls = []

    def plot(ax, a, b=0):
        calls.append((a, b))
        ax.plot([0, 1], [a, b])
        ax.set_title(f"a={a}")

    fig = widgets.small_multiples(plot, [{"a": 1}, {"a": 2}, {"a": 3}, {"a": 4}], ncols=3, b=5)
    assert calls == [(1, 5), (2, 5), (3, 5), (4, 5)]
    assert sum(ax.get_visible() for ax in fig.axes) == 4
    plt.close(fig)
    with pytest.raises(ValueError, match="at least one"):
        widgets.small_multiples(plot, [])


def test_explorer_redraws_the_image_when_a_control_changes():
    from ipywidgets import IntSlider, fixed

    calls = []

    def plot(ax, L, c):
        calls.append((L, c))
        ax.plot([0, L])

    box = widgets.explorer(plot, L=IntSlider(value=3, min=1, max=9), c=fixed(7))
    slider, image = box.children
    assert calls == [(3, 7)] and bytes(image.value[:4]) == b"\x89PNG"  # drawn once, as a PNG
    before = bytes(image.value)
    slider.value = 5
    assert calls[-1] == (5, 7) and bytes(image.value) != before
    assert plt.get_fignums() == []  # figures are closed: only the Image widget shows them
    with pytest.raises(ValueError, match="at least one slider"):
        widgets.explorer(lambda ax: None)
    with pytest.raises(TypeError, match="plot must be callable"):
        widgets.explorer(None, L=(1, 3))


def test_select_sizes():
    table = {m: {"L": n, "reps": 2 * n} for m, n in zip(modes.MODES, (1, 2, 3))}
    assert modes.select_sizes(table, "default", show=False) == {"L": 2, "reps": 4}
    with pytest.raises(ValueError, match="mode must be one of"):
        modes.select_sizes(table, "quick", show=False)
    with pytest.raises(ValueError, match="must list the keys"):
        modes.select_sizes({**table, "paper": {"L": 3}}, "fast", show=False)


def test_committed_data_reads_the_book_folder_or_the_package_copy(tmp_path, monkeypatch):
    import json
    from pathlib import Path

    from softlin.book import committed_data

    source = Path(__file__).resolve().parents[1] / "book" / "data" / "paper_experiment.json"
    monkeypatch.chdir(tmp_path)  # no data/ here: the package copy answers
    assert committed_data("paper_experiment.json") == json.loads(source.read_text())
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "paper_experiment.json").write_text('{"lengths": []}')
    assert committed_data("paper_experiment.json") == {"lengths": []}  # the book's folder first
    assert committed_data("absent.json") is None
    bad_names = (("data/paper_experiment.json", ValueError), ("x.csv", ValueError), (3, TypeError))
    for bad, exc in bad_names:
        with pytest.raises(exc, match="name"):
            committed_data(bad)
