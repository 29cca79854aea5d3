#!/usr/bin/env python
"""Write student copies of the chapter notebooks: the paired ``.ipynb`` files with every
``{solution}`` block removed, into ``_build/student-notebooks/`` and a zip of them. The exercises stay, and
so do their self-checks: the ``exercise-check`` cell, ``answer_check("<label>", answer, ...)``, where a
student replaces ``answer = None`` by an answer and runs the cell to be told whether it is right (never
what the key is). No cell holds a key: ``softlin.book.exercises`` computes it from the label. A notebook
with a cell that does hold one (a ``check_... = answer_check(...)`` key cell, an ``answer_check`` given a
callable key) is refused, with the cell named.

    python tools/student_notebooks.py                 # all chapters of _toc.yml
    python tools/student_notebooks.py --out DIR 02_infinite_prompt_limit

Hand the zip (or a repository/Drive folder holding these files) to students; the book's site keeps the
solutions folded in dropdowns for after class. The copies keep the Colab setup cell, so they run in
Colab as they are.
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_book import notebook_chapters, page_name

ROOT = Path(__file__).resolve().parents[1]

# A fenced {solution} directive: an opening fence of 3+ backticks or colons, up to the same fence alone
# on a line.
SOLUTION = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{solution\}[^\n]*\n.*?^(?P=fence)[ \t]*$\n?", re.MULTILINE | re.DOTALL
)


def strip_solutions(text: str) -> tuple[str, int]:
    """``text`` without its ``{solution}`` blocks, and how many were removed."""
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


def student_copy(ipynb) -> tuple[nbformat.NotebookNode, int]:
    """The notebook (a path, or a notebook changed in place) without its solutions (every code cell kept
    as it is), and how many were removed."""
    nb = ipynb if isinstance(ipynb, nbformat.NotebookNode) else nbformat.read(ipynb, as_version=4)
    removed = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source, n = strip_solutions(cell.source)
            removed += n
    nb.cells = [c for c in nb.cells if c.cell_type != "markdown" or c.source.strip()]
    return nb, removed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "chapters", nargs="*", help="chapter stems (default: every chapter of _toc.yml)"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "student-notebooks")
    args = ap.parse_args(argv)
    chapters = [
        md for md in notebook_chapters(ROOT) if not args.chapters or page_name(md) in args.chapters
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    archive = args.out.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for md in chapters:
            nb, removed = student_copy(md.with_suffix(".ipynb"))
            keys = answer_key_cells(nb)
            if keys:
                print(
                    f"{md.stem}: refusing to write a student copy with answer-key code in "
                    + "; ".join(keys)
                    + ' (check with answer_check("<label>", answer, ...) and register the key in '
                    "lib/softlin/book/exercises.py)",
                    file=sys.stderr,
                )
                return 1
            target = args.out / (page_name(md) + ".ipynb")
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target)
            zf.write(target, target.relative_to(args.out).as_posix())
            checks = sum("exercise-check" in c.metadata.get("tags", []) for c in nb.cells)
            print(
                f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}: "
                f"{removed} solution(s) removed, {checks} self-check cell(s) kept"
            )
    print(f"zip: {archive}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
