"""The notebooks the Colab badge and launch button open are converted for plain Markdown front ends.

``tools/colab_notebooks.py`` turns each chapter's MyST markup into CommonMark (with HTML ``<details>`` and
links): no directive fence and no role is left, and the text of every theorem, exercise, solution and
admonition of the source is still there. The badge and the launch button open the ``colab`` branch, which
the Pages workflow writes from these copies.
"""

from __future__ import annotations

import re
from pathlib import Path

import colab_notebooks as cn
import nbformat
import pytest
import yaml
from build_book import notebook_chapters, page_name

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = notebook_chapters(ROOT)


@pytest.fixture(scope="module")
def converter():
    return cn.Converter(ROOT)


def markdown(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def flat(text: str) -> str:
    """Text with blockquote markers, HTML tags and runs of white space removed."""
    text = re.sub(r"^[ \t]*(>[ \t]?)+", "", text, flags=re.MULTILINE)
    return " ".join(re.sub(r"</?(details|summary|b)>", " ", text).split())


def directive_fragments(text: str):
    """(directive name, fragment) for every stretch of directive body text between roles."""
    for block in cn.parse_blocks(text):
        if isinstance(block, str):
            continue
        yield from directive_fragments(block["body"])
        plain = [b for b in cn.parse_blocks(block["body"]) if isinstance(b, str)]  # nested: above
        for raw in cn.ROLE.sub("\0", cn.TARGET.sub("", "\0".join(plain))).split("\0"):
            piece = " ".join(raw.split())
            if len(piece) >= 4 and not cn.OPTION.match(piece):
                yield block["name"], piece
        if block["arg"] and block["name"] != "solution":  # a solution's argument is a label
            yield block["name"], " ".join(cn.ROLE.sub("", block["arg"]).split())


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_the_colab_notebook_has_no_myst_left_and_keeps_every_statement(md, converter):
    source = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    page = md.relative_to(ROOT).with_suffix("").as_posix()
    nb = converter.convert(source, page)
    assert cn.raw_myst(markdown(nb)) == []
    assert re.search(r"\{[a-z:]+\}`", markdown(source)) or md.stem == "performance"
    assert [c.source for c in nb.cells if c.cell_type == "code"] == [
        c.source for c in source.cells if c.cell_type == "code"
    ], "code cells must not change"
    converted = flat(markdown(nb))
    missing = []
    for cell in source.cells:
        if cell.cell_type == "markdown":
            for name, piece in directive_fragments(cell.source):
                missing += [(name, piece)] if flat(piece) not in converted else []
    assert not missing, f"{md.stem}: text of the source's directives missing: {missing[:5]}"
    fences = r"^(?:`{3,}|:{3,})\{(exercise|solution|prf:(?!proof)\w+)\}"
    n_sources = len(re.findall(fences, markdown(source), re.MULTILINE))
    titles = (
        r"^[> ]*\*\*(Exercise|Theorem|Lemma|Proposition|Corollary|Definition|Assumption|Remark)"
    )
    n_blocks = len(re.findall(titles, markdown(nb), re.MULTILINE))
    n_blocks += markdown(nb).count("<summary><b>Solution</b></summary>")
    assert n_blocks == n_sources, (n_blocks, n_sources)


def test_roles_become_links_to_the_site_and_citations_the_reference(converter):
    md = ROOT / "book" / "01_measure_view.md"
    nb = converter.convert(
        nbformat.read(md.with_suffix(".ipynb"), as_version=4), "book/01_measure_view"
    )
    text = markdown(nb)
    site = converter.site
    assert f"[Fig. 1.2]({site}book/01_measure_view.html#fig-ch1-lln)" in text
    assert "[Boursier and Boyer (2026)](https://arxiv.org/abs/2512.11784)" in text
    assert "<details>\n<summary><b>Solution</b></summary>" in text


def test_unknown_markup_is_an_error_not_raw_text(converter):
    with pytest.raises(ValueError, match="directive"):
        converter.convert_markdown("```{mermaid}\ngraph\n```", "book/x")
    with pytest.raises(KeyError, match="unknown label"):
        converter.convert_markdown("see {numref}`fig-nowhere`", "book/x")


def test_the_badge_and_the_launch_button_open_the_converted_branch():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cfg["repository"]["branch"] == "colab"
    workflow = (ROOT / ".github" / "workflows" / "book.yml").read_text()
    assert "tools/colab_notebooks.py" in workflow and "colab" in workflow


def test_the_tool_writes_every_chapter(tmp_path):
    assert cn.main(["--out", str(tmp_path)]) == 0
    written = sorted(
        p.relative_to(tmp_path / "book").with_suffix("").as_posix()
        for p in (tmp_path / "book").rglob("*.ipynb")
    )
    assert written == sorted(page_name(md) for md in CHAPTERS)
