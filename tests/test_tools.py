"""The small build tools: vendored-file extraction, student copies, the Colab badge URL."""

from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import fetch_vendor
import pytest
from student_notebooks import strip_solutions, student_copy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import book_site  # noqa: E402 (found through the sys.path entry above)


def make_tgz(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_npm_tarball_names():
    assert fetch_vendor.tarball_name("mathjax@3.2.2") == "mathjax-3.2.2.tgz"
    assert fetch_vendor.tarball_name("@scope/some-pkg@1.0.15") == "scope-some-pkg-1.0.15.tgz"


def test_every_vendored_package_is_pinned_by_version_and_sha256():
    for spec, (digest, files) in fetch_vendor.PACKAGES.items():
        assert "@" in spec.lstrip("@") and spec.rsplit("@", 1)[1][0].isdigit(), spec
        assert len(digest) == 64 and int(digest, 16) >= 0, f"{spec}: not a sha256"
        assert files


def test_extract_copies_files_folders_and_globs_only(tmp_path):
    tgz = make_tgz(
        tmp_path / "p.tgz",
        {
            "package/a.js": b"a",
            "package/dist/x.woff2": b"x",
            "package/dist/sub/y.woff2": b"y",
            "package/dist/z.ttf": b"z",
            "package/fonts/f1": b"1",
            "package/fonts/deep/f2": b"2",
        },
    )
    dest = tmp_path / "out"
    n = fetch_vendor.extract(
        tgz,
        [("package/a.js", "lib/a.js"), ("package/dist/*.woff2", "w/"), ("package/fonts/", "f/")],
        dest,
    )
    assert n == 4
    assert (dest / "lib/a.js").read_bytes() == b"a"
    assert sorted(p.name for p in (dest / "w").iterdir()) == [
        "x.woff2"
    ]  # the glob does not recurse
    assert (dest / "f/f1").exists() and (dest / "f/deep/f2").exists()
    assert not (dest / "w/z.ttf").exists()


def test_extract_fails_on_a_missing_member(tmp_path):
    tgz = make_tgz(tmp_path / "p.tgz", {"package/a.js": b"a"})
    with pytest.raises(SystemExit, match=r"no 'package/b\.js'"):
        fetch_vendor.extract(tgz, [("package/b.js", "b.js")], tmp_path / "out")


def test_a_cached_tarball_with_the_wrong_hash_is_not_used(tmp_path, monkeypatch):
    make_tgz(tmp_path / "mathjax-3.2.2.tgz", {"package/a.js": b"tampered"})
    monkeypatch.setattr(
        fetch_vendor.shutil, "which", lambda name: None
    )  # no npm: must not fall back
    with pytest.raises(SystemExit, match="not in the cache"):
        fetch_vendor.fetch("mathjax@3.2.2", fetch_vendor.PACKAGES["mathjax@3.2.2"][0], tmp_path)


def test_strip_solutions_keeps_exercises_and_removes_every_solution():
    text = """## Exercises

```{exercise} One
:label: ex-one

Do it.
```

````{solution} ex-one
:class: dropdown

```python
print(1)
```
````

```{exercise} Two
:label: ex-two
Again.
```

```{solution} ex-two
:class: dropdown
Easy.
```

## Summary
"""
    out, n = strip_solutions(text)
    assert n == 2
    assert "{solution}" not in out and "print(1)" not in out and "Easy." not in out
    assert out.count("{exercise}") == 2 and "Do it." in out and "## Summary" in out


def test_a_changed_vendored_file_list_re_extracts(monkeypatch):
    stamp = fetch_vendor.wanted()
    spec, (digest, files) = next(iter(fetch_vendor.PACKAGES.items()))
    monkeypatch.setitem(fetch_vendor.PACKAGES, spec, (digest, [*files, ("package/x.js", "x.js")]))
    assert fetch_vendor.wanted()[spec] != stamp[spec] and fetch_vendor.wanted()[spec].startswith(
        digest
    )


def figure_png(path: Path, transparent: bool = False) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    x = np.linspace(0, 6, 200)
    for k in range(4):
        ax.plot(x, np.sin(x + k), label=f"series {k}")
    ax.imshow(np.outer(x, x), extent=(0, 2, -1, 0), aspect="auto")
    ax.legend()
    fig.savefig(path, transparent=transparent, facecolor="none" if transparent else "white")
    plt.close(fig)
    return path


def test_a_figure_is_served_as_a_palette_png_of_the_same_size_and_close_pixels(tmp_path):
    import numpy as np
    from PIL import Image

    png = figure_png(tmp_path / "f.png")
    before = Image.open(png).convert("RGB")
    size_before, size_after = book_site.slim_png(png)
    after = Image.open(png)
    assert after.mode == "P" and after.size == before.size and size_after < size_before / 2
    assert after.info["dpi"] == Image.open(figure_png(tmp_path / "g.png")).info["dpi"]
    err = np.abs(np.asarray(after.convert("RGB"), np.int16) - np.asarray(before, np.int16))
    assert err.max() <= book_site.PALETTE_MAX_ERROR
    assert book_site.slim_png(png) == (size_after, size_after)  # a second pass changes nothing


def test_a_transparent_figure_keeps_every_pixel(tmp_path):
    import numpy as np
    from PIL import Image

    png = figure_png(tmp_path / "t.png", transparent=True)
    before = np.asarray(Image.open(png))
    book_site.slim_png(png)
    assert np.array_equal(np.asarray(Image.open(png)), before)


def test_colab_badge_url_comes_from_the_repository_config():
    config = SimpleNamespace(
        html_theme_options={
            "repository_url": "https://github.com/org/repo",
            "repository_branch": "main",
            "launch_buttons": {"colab_url": "https://colab.research.google.com"},
        }
    )
    assert book_site.colab_url(config, "book/01_x") == (
        "https://colab.research.google.com/github/org/repo/blob/main/book/01_x.ipynb"
    )
    config.html_theme_options["path_to_docs"] = "docs/"
    assert book_site.colab_url(config, "a").endswith("/blob/main/docs/a.ipynb")
    config.html_theme_options["repository_url"] = "https://gitlab.com/org/repo"
    assert book_site.colab_url(config, "a") is None


def test_a_student_copy_keeps_the_key_and_check_cells_and_drops_the_solutions(tmp_path):
    import jupytext
    import nbformat
    from colab_notebooks import Converter
    from conftest import make_book

    root = make_book(tmp_path / "book", ["01_explorer_and_exercises.md"])
    md = root / "book" / "01_explorer_and_exercises.md"
    ipynb = md.with_suffix(".ipynb")
    nbformat.write(jupytext.read(md), ipynb)
    nb, removed = student_copy(ipynb, converter=Converter(root, commit=""))
    text = "\n".join(c.source for c in nb.cells)
    assert removed == 3 and "{solution}" not in text and "answer = V @ z0" not in text
    tags = [c.metadata.get("tags", []) for c in nb.cells if c.cell_type == "code"]
    assert sum("exercise-check" in t for t in tags) == 2
    assert (
        "check_ex_fx_value = answer_check(" in text
        and "check_ex_fx_function = answer_check(" in text
    )
    # the fixture book's chapters are unnumbered: one counter over the book
    assert [f"**Exercise {n}**" in text for n in (1, 2, 3)] == [True] * 3


def test_softlin_ships_book_data_as_links_each_listed_in_pyproject():
    """Colab and student copies read book/data's files from softlin (softlin._data.committed_data):
    each package-data file is a working link to the one committed source, matched by pyproject's
    package-data (so a wheel holds its content), and the files the pages read are among them."""
    from fnmatch import fnmatch

    tomllib = pytest.importorskip("tomllib")
    data = ROOT / "lib" / "softlin" / "data"
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setuptools["package-data"]["softlin"]
    names = {p.name for p in data.iterdir()}
    committed = {p.name for p in (ROOT / "book" / "data").glob("*.json")}
    assert committed == names, (committed, names)
    for p in data.iterdir():
        assert p.is_symlink() and p.is_file(), f"{p} is not a working link"
        assert p.resolve() == (ROOT / "book" / "data" / p.name).resolve(), p
        assert any(fnmatch(f"data/{p.name}", pat) for pat in patterns), (p.name, patterns)


def test_the_committed_reference_values_are_the_scripts_run():
    """book/data/reference_values.json holds what tools/reference_values.py computes at its own sizes
    and seeds (not a trial run), for every value the pages compare with, each with its error."""
    import json

    import reference_values as rv

    doc = json.loads(rv.TARGET.read_text())
    assert doc["script"] == "tools/reference_values.py" and len(doc["commit"]) == 40
    slopes, risks = doc["rate_slopes"], doc["risk_star"]
    assert slopes["prompts"] == rv.RATE_PROMPTS * rv.RATE_BATCHES and slopes["L"] == rv.RATE_L
    assert slopes["nodes"] == rv.RATE_NODES and slopes["seeds"][0] == rv.RATE_SEED
    assert risks["prompts"] == rv.RISK_PROMPTS * rv.RISK_BATCHES
    assert risks["seeds"][0] == rv.RISK_SEED
    assert min(rv.RATE_SEED, rv.RISK_SEED) > 10_000  # independent of the seeds a reader sets
    assert sorted(map(float, slopes["u"])) == rv.RATE_U
    assert sorted(map(int, risks["L"])) == rv.RISK_L
    for v in slopes["u"].values():
        assert 0 < v["slope_se"] <= v["slope_se_fit"] and v["batches_se"] > 0, v
    for v in risks["L"].values():
        assert v["risk"] > 0 and v["se"] > 0, v
