"""Each chapter's MyST source and its committed, paired .ipynb hold the same cells; the .ipynb has no
outputs; each chapter has the Colab setup cell (pointing at the repository URL of _config.yml) first and
one `parameters` cell."""

from __future__ import annotations

import json
from pathlib import Path

import jupytext
import pytest
import yaml
from build_book import is_notebook_source, notebook_chapters, page_name, toc_files

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = notebook_chapters(ROOT)


def _cells(nb):
    return [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", []))) for c in nb.cells]


def test_every_toc_entry_exists():
    for f in toc_files(ROOT / "_toc.yml"):
        assert (ROOT / (f + ".md")).exists() or (ROOT / (f + ".ipynb")).exists(), (
            f"_toc.yml lists missing {f}"
        )


def test_every_book_notebook_is_in_the_toc():
    listed = {ROOT / (f + ".md") for f in toc_files(ROOT / "_toc.yml")}
    for md in [*(ROOT / "book").glob("*.md"), *(ROOT / "book" / "labs").glob("*.md")]:
        if is_notebook_source(md):
            assert md in listed, f"{md.name} is a notebook chapter missing from _toc.yml"


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_paired_ipynb_matches_source(md):
    ipynb = md.with_suffix(".ipynb")
    assert ipynb.exists(), f"{ipynb.name} missing: run `jupytext --sync {md.relative_to(ROOT)}`"
    src = jupytext.read(md)
    paired = jupytext.read(ipynb)
    assert _cells(src) == _cells(paired), (
        f"{md.name} and {ipynb.name} differ: run `jupytext --sync {md.relative_to(ROOT)}` and commit both"
    )


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_paired_ipynb_has_no_outputs(md):
    raw = json.loads(md.with_suffix(".ipynb").read_text())
    for i, cell in enumerate(raw["cells"]):
        if cell["cell_type"] == "code":
            assert cell.get("outputs", []) == [], (
                f"{md.stem}.ipynb cell {i} has outputs; clear them"
            )
            assert cell.get("execution_count") is None, (
                f"{md.stem}.ipynb cell {i} has an execution count"
            )


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_setup_and_parameters_cells(md):
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    code = [c for c in jupytext.read(md).cells if c.cell_type == "code"]
    setup = code[0]
    assert "google.colab" in setup.source and f"git+{url}@main" in setup.source, (
        f"{md.name}: the first code cell must be the Colab setup cell installing from {url}"
    )
    assert "torch" not in setup.source.split("%pip", 1)[-1], (
        "the setup cell must never install torch"
    )
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, f"{md.name}: exactly one cell must be tagged `parameters`"
    for name in ("mode", "device", "seed"):
        assert f"{name} =" in params[0].source, f"{md.name}: the parameters cell must define {name}"
