"""The one conversion for plain Markdown front ends: what Colab opens, what the site offers for download
and the student copies.

``tools/colab_notebooks.py`` turns each page's MyST markup into CommonMark (with HTML ``<details>`` and
links): no directive fence, role, target or option line is left, and the text of every theorem,
exercise, solution and admonition of the source is still there; exercises, theorems and figures carry
the site's numbers (counted as Sphinx counts them; ``tests/test_reader_channels.py`` compares them with
a built site); every captioned figure is followed by its caption; the setup cell installs ``softlin`` at
the commit the notebook was converted from. A construct the conversion does not know is an error, shown
on planted constructs. The badge and the launch button open the ``colab`` branch, which the Pages
workflow writes from these copies.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import colab_notebooks as cn
import nbformat
import pytest
import yaml
from build_book import notebook_chapters, page_name
from new_chapter import setup_code

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = notebook_chapters(ROOT)
COMMIT = "0123456789abcdef0123456789abcdef01234567"
TITLE = re.compile(
    r"^[> ]*(?:<a id=\"[^\"]+\"></a>)?\*\*(?P<kind>Exercise|Theorem|Lemma|Proposition|Corollary|"
    r"Definition|Assumption|Remark|Example|Conjecture|Notation)(?: (?P<number>L?[\d.]+))?\*\*",
    re.MULTILINE,
)


@pytest.fixture(scope="module")
def converter():
    return cn.Converter(ROOT, commit=COMMIT)


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


def numbered_sources(text: str) -> list[tuple[str, bool]]:
    """(kind, numbered?) of every exercise and theorem-like block of MyST ``text``, in order."""
    out = []
    for block in cn.parse_blocks(text):
        if isinstance(block, str):
            continue
        name = block["name"]
        if name == "exercise" or (name.startswith("prf:") and name != "prf:proof"):
            kind = "Exercise" if name == "exercise" else cn.PRF_KINDS[name[4:]]
            out.append((kind, "nonumber" not in block["options"]))
        out += numbered_sources(block["body"])
    return out


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_the_colab_notebook_has_no_myst_left_and_keeps_every_statement(md, converter):
    source = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    page = md.relative_to(ROOT).with_suffix("").as_posix()
    nb = converter.convert(source, page)
    assert cn.raw_myst(markdown(nb)) == []
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source for c in code[1:]] == [
        c.source for c in source.cells if c.cell_type == "code"
    ][1:], "code cells other than the setup cell must not change"
    # the code the site folds (hide-input, hide-cell) is folded in Colab and JupyterLab too
    for cell in code[1:]:
        folded = bool(cn.FOLDED_TAGS & set(cn.tags(cell)))
        assert (cell.metadata.get("cellView") == "form") is folded, (md.stem, cell.source[:60])
        assert cell.metadata.get("jupyter", {}).get("source_hidden", False) is folded
    converted = flat(markdown(nb))
    missing = []
    for cell in source.cells:
        if cell.cell_type == "markdown":
            for name, piece in directive_fragments(cell.source):
                missing += [(name, piece)] if flat(piece) not in converted else []
    assert not missing, f"{md.stem}: text of the source's directives missing: {missing[:5]}"
    # every exercise and theorem-like block is titled with its kind, numbered unless :nonumber:
    expected = numbered_sources(markdown(source))
    titles = [(m["kind"], m["number"]) for m in TITLE.finditer(markdown(nb))]
    assert [k for k, _ in titles] == [k for k, _ in expected], (titles, expected)
    for (kind, number), (_, numbered) in zip(titles, expected):
        assert (number is not None) == numbered, (md.stem, kind, number)
    n_solutions = len(re.findall(r"^(?:`{3,}|:{3,})\{solution\}", markdown(source), re.M))
    assert len(re.findall(r"<summary><b>Solution to Exercise L?[\d.]+[ <]", markdown(nb))) == (
        n_solutions
    )


@pytest.mark.parametrize("md", CHAPTERS, ids=page_name)
def test_every_captioned_figure_is_followed_by_its_number_and_caption(md, converter):
    source = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    page = md.relative_to(ROOT).with_suffix("").as_posix()
    nb = converter.convert(source, page)
    figures = [c for c in source.cells if cn.shows_figure(c)]
    shown = 0
    for cell, after in zip(nb.cells, nb.cells[1:]):
        if cn.shows_figure(cell):
            assert after.cell_type == "markdown" and cn.CAPTION_TAG in after.metadata["tags"]
            fig = cn.figure_of(cell)
            number = converter.labels[fig["name"]]["number"]
            assert after.source.startswith(f'<a id="{fig["name"]}"></a>**Fig. {number}.** ')
            for piece in cn.ROLE.split(str(fig["caption"]))[::3]:  # the text between roles
                assert " ".join(piece.split()) in " ".join(after.source.split()), (md.stem, piece)
            shown += 1
    assert shown == len(figures)


def test_the_setup_cell_installs_the_commit_it_was_converted_from(converter):
    md = CHAPTERS[0]
    nb = converter.convert(nbformat.read(md.with_suffix(".ipynb"), as_version=4), f"book/{md.stem}")
    setup = next(c for c in nb.cells if c.cell_type == "code")
    assert setup.source == setup_code(COMMIT)
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    assert f'"git+{url}@{COMMIT}"' in setup.source and "@main" not in setup.source
    assert f"converted from commit {COMMIT[:12]}" in setup.source
    assert nb.metadata["softlin"]["converted_from"] == COMMIT
    # by default, the checkout's HEAD
    head = cn.checkout_commit(ROOT)
    if head:
        assert cn.Converter(ROOT).commit == head


def test_roles_become_links_to_the_site_and_citations_the_reference(converter):
    md = ROOT / "book" / "01_measure_view.md"
    nb = converter.convert(
        nbformat.read(md.with_suffix(".ipynb"), as_version=4), "book/01_measure_view"
    )
    text = markdown(nb)
    site = converter.site
    assert re.search(
        rf"\[Fig\. 1\.\d+\]\({re.escape(site)}book/01_measure_view\.html#fig-ch1-", text
    )
    assert "[Boursier and Boyer (2026)](https://arxiv.org/abs/2512.11784)" in text
    assert "<details>\n<summary><b>Solution to Exercise 1.1 (" in text


PLANTED_PAGE = """---
kernelspec: {display_name: Python 3, language: python, name: python3}
---

# PAGE_TITLE

(sec-LABEL)=
## A section

```{prf:theorem} A statement
:label: thm-LABEL

Text of the theorem, see {numref}`fig-LABEL` and {prf:ref}`thm-LABEL`.
```

```{prf:theorem} The paper's own number (Theorem 9.9)
:label: thm-LABEL-paper
:nonumber:

Unnumbered on the site.
```

```{code-cell} ipython3
---
mystnb:
  figure:
    caption: A figure of {doc}`OTHER`, with $\\R^2$.
    name: fig-LABEL
---
print(1)
```

```{exercise} First
:label: ex-LABEL-one

Solve {ref}`sec-LABEL`.
```

````{solution} ex-LABEL-one
:class: dropdown

Solved.
````

```{prf:lemma} A lemma
:label: lem-LABEL

A lemma.
```

```{exercise} Second
:label: ex-LABEL-two

Again, after {numref}`ex-LABEL-one`.
```
"""


@pytest.fixture
def planted_book(tmp_path):
    """A book with two numbered lessons and two unnumbered labs, each with theorems, a lemma, a figure
    and exercises (the labs hold some too, to show the unnumbered counters)."""
    root = tmp_path / "book-root"
    (root / "book" / "labs").mkdir(parents=True)
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    (root / "_config.yml").write_text(yaml.safe_dump(cfg))
    shutil.copy2(ROOT / "book" / "references.bib", root / "book" / "references.bib")
    (root / "book" / "intro.md").write_text("# Intro\n\nThe root.\n")
    pages = {
        "book/01_a": ("Lesson A", "ch1", "labs/01_a"),
        "book/02_b": ("Lesson B", "ch2", "labs/02_b"),
        "book/labs/01_a": ("Lab 1: A", "lab1", "../01_a"),
        "book/labs/02_b": ("Lab 2: B", "lab2", "../02_b"),
    }
    for page, (title, label, other) in pages.items():
        text = (
            PLANTED_PAGE.replace("PAGE_TITLE", title)
            .replace("LABEL", label)
            .replace("OTHER", other)
        )
        (root / f"{page}.md").write_text(text)
    toc = {
        "format": "jb-book",
        "root": "book/intro",
        "parts": [
            {"caption": "Lessons", "numbered": True,
             "chapters": [{"file": "book/01_a"}, {"file": "book/02_b"}]},
            {"caption": "Labs", "chapters": [{"file": "book/labs/01_a"}, {"file": "book/labs/02_b"}]},
        ],
    }  # fmt: skip
    (root / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    return root


def convert_planted(root, page, audience="colab"):
    import jupytext

    conv = cn.Converter(root, commit=COMMIT)
    return conv, conv.convert(jupytext.read(root / f"{page}.md"), page, audience)


def test_numbers_follow_the_sites_counters(planted_book):
    _, nb = convert_planted(planted_book, "book/02_b")
    text = markdown(nb)
    # per kind and per numbered chapter; :nonumber: blocks take no number
    assert '<a id="thm-ch2"></a>**Theorem 2.1** (A statement)' in text
    assert "**Theorem** (The paper's own number (Theorem 9.9))" in text
    assert "**Lemma 2.1** (A lemma)" in text
    assert "**Exercise 2.1** (First)" in text and "**Exercise 2.2** (Second)" in text
    assert "<summary><b>Solution to Exercise 2.1 (First)</b></summary>" in text
    assert '<a id="fig-ch2"></a>**Fig. 2.1.** A figure of [Lab 2: B](' in text
    assert r"$\mathbb{R}^2$" in text  # the site's TeX macros are written out
    assert "[Exercise 2.1](" in text and "[Fig. 2.1](" in text  # {numref}
    assert "[Theorem 2.1](" in text  # {prf:ref}: as the site writes it
    assert "[A section](" in text  # {ref} of a section: its title
    # a lab numbers its blocks on its own, after its lesson's number: lab 2's Fig. L2.1, ...
    _, lab = convert_planted(planted_book, "book/labs/02_b")
    text = markdown(lab)
    assert "**Theorem L2.1** (A statement)" in text and "**Exercise L2.1** (First)" in text
    assert "**Fig. L2.1.** A figure of [Lesson B](" in text


def test_a_student_copy_of_a_planted_page_has_numbers_and_no_solution(planted_book):
    _, nb = convert_planted(planted_book, "book/01_a", audience="student")
    text = markdown(nb)
    assert "Solved." not in text and "<details>" not in text
    assert "**Exercise 1.1** (First)" in text and "**Exercise 1.2** (Second)" in text
    assert nb.metadata["softlin"]["solutions_removed"] == 1


@pytest.mark.parametrize(
    "planted, error",
    [
        ("```{mermaid}\ngraph\n```", "directive"),
        (":::{margin}\nside\n:::", "directive"),
        ("see {abbr}`MGF (moment generating function)`", "role"),
        ("see {numref}`fig-nowhere`", "unknown label"),
        ("see {cite}`nobody2099`", "no reference"),
    ],
)
def test_a_planted_construct_without_a_plain_form_is_an_error(converter, planted, error):
    with pytest.raises((ValueError, KeyError), match=error):
        converter.convert_markdown(planted, "book/01_measure_view")


@pytest.mark.parametrize(
    "raw",
    [
        "```{note}\nx\n```",
        "> :::{tip}",
        "as {ref}`somewhere` says",
        "(my-label)=",
        ":label: ex-x",
        "> :class: dropdown",
    ],
)
def test_raw_myst_finds_every_kind_of_construct(raw):
    assert cn.raw_myst(f"Some text.\n\n{raw}\n\nMore text.") != []
    assert cn.raw_myst("Plain text with `code`, $x^2$, a [link](#x) and (a remark)=") == []


def test_the_site_downloads_are_converted_with_their_outputs(converter, tmp_path):
    md = CHAPTERS[0]
    page = md.relative_to(ROOT).with_suffix("").as_posix()
    nb = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    nb.cells.insert(
        2, nbformat.v4.new_code_cell('mode = "fast"', metadata={"tags": ["injected-parameters"]})
    )
    figure = next(c for c in nb.cells if cn.shows_figure(c))
    figure.outputs = [nbformat.v4.new_output("stream", text="drawn\n")]
    target = tmp_path / "_sources" / f"{page}.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(nb, target)
    assert cn.convert_site_downloads(ROOT, tmp_path, commit=COMMIT) == [target]
    out = nbformat.read(target, as_version=4)
    assert cn.raw_myst(markdown(out)) == []
    assert not any("injected-parameters" in c.metadata.get("tags", []) for c in out.cells)
    kept = next(c for c in out.cells if cn.shows_figure(c))
    assert kept.outputs[0]["text"] == "drawn\n"


def test_the_badge_and_the_launch_button_open_the_converted_branch():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cfg["repository"]["branch"] == "colab"
    workflow = (ROOT / ".github" / "workflows" / "book.yml").read_text()
    assert "tools/colab_notebooks.py" in workflow and "git push -f origin colab" in workflow
    assert "book/labs" in workflow or "cp -r" in workflow, "the labs go to the colab branch too"


def test_the_student_branch_has_the_same_notebooks_without_solutions(tmp_path):
    """``--student`` writes the colab-student branch's notebooks (the student edition's Colab links):
    the colab branch's, without a solution; the workflow pushes both."""
    page = "02_infinite_prompt_limit"
    assert cn.main(["--out", str(tmp_path / "colab"), "--commit", COMMIT, page]) == 0
    assert cn.main(["--out", str(tmp_path / "student"), "--commit", COMMIT, "--student", page]) == 0
    folded = nbformat.read(tmp_path / "colab" / "book" / f"{page}.ipynb", as_version=4)
    student = nbformat.read(tmp_path / "student" / "book" / f"{page}.ipynb", as_version=4)
    assert "Solution to Exercise" in markdown(folded)
    assert "Solution to Exercise" not in markdown(student)
    assert student.metadata["softlin"]["solutions_removed"] >= 3
    workflow = (ROOT / ".github" / "workflows" / "book.yml").read_text()
    assert "tools/colab_notebooks.py --student" in workflow
    assert "git push -f origin colab-student" in workflow


def test_the_tool_writes_every_page(tmp_path):
    assert cn.main(["--out", str(tmp_path), "--commit", COMMIT]) == 0
    written = sorted(
        p.relative_to(tmp_path / "book").with_suffix("").as_posix()
        for p in (tmp_path / "book").rglob("*.ipynb")
    )
    assert written == sorted(page_name(md) for md in CHAPTERS)
