#!/usr/bin/env python
"""Write student copies of the chapter notebooks: the paired ``.ipynb`` files with every
``{solution}`` block removed, into ``_build/student-notebooks/`` and a zip of them. The exercises stay, and
so do their self-checks: the key cell (tagged ``remove-cell``, hidden on the site, which computes the
answer key from softlin) and the ``exercise-check`` cell, where a student replaces ``answer = None`` by
an answer and runs the cell to be told whether it is right (never what the key is).

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
from build_book import notebook_chapters

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


def student_copy(ipynb: Path) -> tuple[nbformat.NotebookNode, int]:
    """The notebook without its solutions (every code cell kept as it is), and how many were removed."""
    nb = nbformat.read(ipynb, as_version=4)
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
        md for md in notebook_chapters(ROOT) if not args.chapters or md.stem in args.chapters
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    archive = args.out.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for md in chapters:
            nb, removed = student_copy(md.with_suffix(".ipynb"))
            target = args.out / (md.stem + ".ipynb")
            nbformat.write(nb, target)
            zf.write(target, target.name)
            checks = sum("exercise-check" in c.metadata.get("tags", []) for c in nb.cells)
            print(
                f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}: "
                f"{removed} solution(s) removed, {checks} self-check cell(s) kept"
            )
    print(f"zip: {archive}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
