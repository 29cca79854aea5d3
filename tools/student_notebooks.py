#!/usr/bin/env python
"""Write student copies of the book's notebooks: every lesson with its exercises and no solutions, and
every lab beside it, into ``_build/student-notebooks/`` (``NN_name.ipynb`` and ``labs/NN_name.ipynb``),
with a wheel of ``softlin`` in each of the two folders (``softlin-*.whl`` and
``labs/softlin-*.whl``), and a zip of them all.

The copies come from the one conversion for plain front ends (``tools/colab_notebooks.py``), the one
that makes what Colab opens and what the site offers for download: no MyST markup, exercises and
theorems numbered as on the site, every figure's caption under its figure, the setup cell installing
``softlin`` at the commit the copies were made from. A student copy has, in addition, no ``{solution}``
at all. The exercises keep their self-checks: the ``exercise-check`` cell,
``answer_check("<label>", answer, ...)``, where a student replaces ``answer = None`` by an answer and
runs the cell to be told whether it is right (never what the key is). No cell holds a key:
``softlin.book.exercises`` computes it from the label. A notebook with a cell that does hold one (a
``check_... = answer_check(...)`` key cell, an ``answer_check`` given a callable key) is refused, with
the cell named, and so is one with MyST left in it.

    python tools/student_notebooks.py                       # every lesson and lab of _toc.yml
    python tools/student_notebooks.py --out DIR 02_infinite_prompt_limit labs/02_infinite_prompt_limit

Hand the zip (or a repository/Drive folder holding these files) to students; the book's site keeps the
solutions folded in dropdowns for after class. The copies keep the setup cell, so they run in Colab as
they are. Where ``softlin`` is not importable, the setup cell installs it from a ``softlin-*.whl`` in
the working directory when there is one (a notebook opened in the unpacked folder, or in ``labs/``,
finds the wheel beside it: no GitHub needed; in Colab, upload the wheel to the session's files), else in
Colab from the book's repository at the commit the copies were made from. The wheel is built from this
checkout's working tree by ``build_wheel`` of ``tools/problem_sets.py`` (``pip wheel``), the one that
builds the problem sets' wheel.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import zipfile
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_book import ROOT, is_lab, is_lesson, notebook_chapters, page_name
from colab_notebooks import Converter, page_of, raw_myst, uncommitted_library

# A fenced {solution} directive: an opening fence of 3+ backticks or colons, up to the same fence alone
# on a line.
SOLUTION = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{solution\}[^\n]*\n.*?^(?P=fence)[ \t]*$\n?", re.MULTILINE | re.DOTALL
)


def strip_solutions(text: str) -> tuple[str, int]:
    """MyST ``text`` without its ``{solution}`` blocks, and how many were removed."""
    out, n = SOLUTION.subn("", text)
    return re.sub(r"\n{3,}", "\n\n", out), n


def answer_key_cells(nb) -> list[str]:
    """The code cells of ``nb`` that hold answer-key code, as "cell N: first line": a definition of a
    ``check_...`` function, or a call of ``answer_check`` whose key is not a registered label."""
    import ast

    found = []
    for n, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # IPython magics: read the text instead
            tree = None
        hits = []
        for node in ast.walk(tree) if tree else ():
            targets = (
                [node.name]
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                else [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            )
            if any(t.startswith("check_") for t in targets):
                hits.append(node)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, (ast.Name, ast.Attribute))
                and getattr(node.func, "id", getattr(node.func, "attr", "")) == "answer_check"
                and not (
                    node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                )
            ):
                hits.append(node)
        if tree is None and re.search(r"\bcheck_\w+\s*=|answer_check\(\s*lambda", cell.source):
            hits.append(cell)
        if hits:
            first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
            found.append(f"cell {n}: {first[:80]}")
    return found


_CONVERTERS: dict[Path, Converter] = {}


def converter_for(root: Path = ROOT) -> Converter:
    """The (cached) converter of the book at ``root``."""
    root = Path(root).resolve()
    if root not in _CONVERTERS:
        _CONVERTERS[root] = Converter(root)
    return _CONVERTERS[root]


def student_copy(
    ipynb, page: str | None = None, converter: Converter | None = None
) -> tuple[nbformat.NotebookNode, int]:
    """The student copy of a notebook of the book (a path, or a notebook with its ``page``, e.g.
    ``book/01_measure_view``): converted for plain front ends, without solutions. Returns the copy and
    how many solutions it lost."""
    conv = converter or converter_for(ROOT)
    if isinstance(ipynb, nbformat.NotebookNode):
        if page is None:
            raise ValueError(
                "student_copy of a notebook needs its page (e.g. 'book/01_measure_view')"
            )
        nb = ipynb
    else:
        nb = nbformat.read(ipynb, as_version=4)
        page = page or page_of(Path(ipynb), conv.root)
    copy = conv.convert(nb, page, audience="student")
    return copy, copy.metadata["softlin"]["solutions_removed"]


def readme(site: str) -> str:
    """The folder's README.md: how to run a copy (Colab or Jupyter, the wheel beside it) and where its
    links go (``site``, the student edition they were built for)."""
    return f"""# The lessons and labs, for students

Each lesson is a notebook (`01_measure_view.ipynb` ...) without solutions; `labs/` holds the labs
beside them, a second reading. A lesson runs in about a minute on a CPU, a lab in up to a few.

- **Colab**: *File > Upload notebook*, then upload the `softlin-*.whl` of this folder (of `labs/` for a
  lab) to the *Files* pane, and *Run all*. The first cell installs it; without it, the cell installs
  softlin from the book's repository.
- **Jupyter on your machine**: keep the wheel beside the notebooks, install torch's CPU build once
  (`pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu`, the torch the book is
  tested with, as the problem sets pin it), open a notebook, *Run All*.

Each exercise ends in a cell that checks your answer (`answer = None`: put yours in its place).

Links to other pages of the book go to {site}.
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "pages", nargs="*", help="pages, e.g. 01_measure_view labs/01_measure_view (default: all)"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "student-notebooks")
    ap.add_argument("--root", type=Path, default=ROOT, help="the book (default: this one)")
    ap.add_argument(
        "--site",
        help="the address where you host the student edition (make student-site): the copies' links "
        "to other pages go there, not to the public book and its folded solutions",
    )
    args = ap.parse_args(argv)
    root = args.root.resolve()
    pages = [
        md
        for md in notebook_chapters(root)
        if (is_lesson(md) or is_lab(md)) and (not args.pages or page_name(md) in args.pages)
    ]
    conv = converter_for(root)
    if args.site:
        if not args.site.startswith(("https://", "http://")):
            ap.error(f"--site must be an http(s) address, got {args.site!r}")
        conv = Converter(root, site=args.site)
    if conv.commit and uncommitted_library(root):
        print(
            f"note: lib/ has uncommitted changes; the wheel beside the copies holds them, but "
            f"without it the copies install softlin at {conv.commit[:12]}",
            file=sys.stderr,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    archive = args.out.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for md in pages:
            try:
                nb, removed = student_copy(md.with_suffix(".ipynb"), converter=conv)
            except (KeyError, ValueError) as exc:
                print(f"{page_name(md)}: {exc}", file=sys.stderr)
                return 1
            keys = answer_key_cells(nb)
            if keys:
                print(
                    f"{page_name(md)}: refusing to write a student copy with answer-key code in "
                    + "; ".join(keys)
                    + ' (check with answer_check("<label>", answer, ...) and register the key in '
                    "lib/softlin/book/exercises.py)",
                    file=sys.stderr,
                )
                return 1
            left = raw_myst("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
            if left:  # the converter refuses this already; kept as the tool's own promise
                print(f"{page_name(md)}: MyST left in the copy: {left[:5]}", file=sys.stderr)
                return 1
            target = args.out / (page_name(md) + ".ipynb")
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target)
            zf.write(target, target.relative_to(args.out).as_posix())
            checks = sum("exercise-check" in c.metadata.get("tags", []) for c in nb.cells)
            shown = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
            print(f"{shown}: {removed} solution(s) removed, {checks} self-check cell(s) kept")
        (args.out / "README.md").write_text(readme(conv.student_site))
        zf.write(args.out / "README.md", "README.md")
        for wheel in add_wheels(args.out):
            zf.write(wheel, wheel.relative_to(args.out).as_posix())
            shown = wheel.relative_to(ROOT) if wheel.is_relative_to(ROOT) else wheel
            print(f"{shown}: the setup cells beside it install softlin from it")
    print(f"zip: {archive}")
    return 0


def add_wheels(out: Path) -> list[Path]:
    """A wheel of softlin (this checkout's working tree) in ``out`` and in ``out/labs/`` when it holds
    notebooks, so that the setup cell of a lesson or of a lab finds one in its own folder; older
    wheels there are removed. Returns the wheels written."""
    from problem_sets import build_wheel  # the problem sets' wheel, built the same way

    wheel = build_wheel(out)  # removes the softlin-*.whl already in ``out``
    written = [wheel]
    labs = out / "labs"
    if labs.is_dir():
        for old in labs.glob("softlin-*.whl"):
            old.unlink()
        if any(labs.glob("*.ipynb")):
            written.append(Path(shutil.copy2(wheel, labs / wheel.name)))
    return written


if __name__ == "__main__":
    sys.exit(main())
