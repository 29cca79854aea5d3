#!/usr/bin/env python
"""How long the lessons are, and how much of their visible code is checking: the budgets of DESIGN.md
section 4 ("Lessons and labs"), measured on the MyST sources.

    .venv/bin/python tools/lesson_metrics.py          # one row per lesson, and the totals

* **Prose words**: the words of the Markdown outside code cells and outside exercise solutions (folded
  blocks count: a folded block is still part of what the page asks a reader to read); display math is
  dropped and inline math counts as one word.
* **Visible code lines**: non-blank, non-comment lines of the code cells a reader sees unfolded (not
  tagged ``remove-cell``, ``remove-input``, ``hide-input`` or ``hide-cell``).
* **Check lines**: those of them that belong to an ``assert`` or to a ``check_*`` call.

``tests/test_lessons.py`` holds the budgets: at most :data:`WORDS_PER_LESSON` words per lesson and
:data:`WORDS_IN_ALL` in all, check lines at most :data:`CHECK_SHARE` of the lessons' visible code lines.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import NamedTuple

import jupytext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_book import ROOT, lessons

WORDS_PER_LESSON = 2_500
WORDS_IN_ALL = 12_000
CHECK_SHARE = 0.10
FOLDED = ("remove-cell", "remove-input", "hide-input", "hide-cell")
CHECK_CALL = re.compile(r"(^|\.)check_\w+$")


class LessonMetrics(NamedTuple):
    page: str
    prose_words: int
    visible_code_lines: int
    check_lines: int


def prose_words(text: str) -> int:
    """Words of a MyST page's prose (see the module docstring)."""
    prose = re.sub(r"```\{code-cell\}.*?^```", " ", text, flags=re.S | re.M)
    prose = re.sub(r"(`{3,}|:{3,})\{solution\}.*?^\1\s*$", " ", prose, flags=re.S | re.M)
    prose = re.sub(r"\$\$.*?\$\$", " ", prose, flags=re.S)
    prose = re.sub(r"\$[^$]+\$", "x", prose)
    return len(re.findall(r"[A-Za-z][A-Za-z'-]*", prose))


def _code_lines(source: str) -> list[str]:
    return [
        line for line in source.splitlines() if line.strip() and not line.strip().startswith("#")
    ]


def _check_lines(source: str) -> int:
    """Non-blank, non-comment lines of ``source`` inside an assert or a ``check_*(...)`` call."""
    lines = source.splitlines()
    code = "\n".join("" if line.startswith(("%", "!")) else line for line in lines)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return 0
    covered = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) or (
            isinstance(node, ast.Call) and CHECK_CALL.search(ast.unparse(node.func))
        ):
            covered.update(range(node.lineno, node.end_lineno + 1))
    return sum(
        1 for i in covered if lines[i - 1].strip() and not lines[i - 1].strip().startswith("#")
    )


def measure(md: Path) -> LessonMetrics:
    """The three counts of one MyST notebook page."""
    visible = checks = 0
    for cell in jupytext.read(md).cells:
        if cell.cell_type != "code" or any(t in cell.metadata.get("tags", []) for t in FOLDED):
            continue
        visible += len(_code_lines(cell.source))
        checks += _check_lines(cell.source)
    return LessonMetrics(md.stem, prose_words(md.read_text()), visible, checks)


def main() -> int:
    rows = [measure(md) for md in lessons(ROOT)]
    print("| lesson | prose words | visible code lines | check lines | share |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        share = r.check_lines / max(r.visible_code_lines, 1)
        print(
            f"| {r.page} | {r.prose_words} | {r.visible_code_lines} | {r.check_lines} | {share:.0%} |"
        )
    words = sum(r.prose_words for r in rows)
    code = sum(r.visible_code_lines for r in rows)
    checks = sum(r.check_lines for r in rows)
    print(
        f"| **all** | **{words}** | **{code}** | **{checks}** | **{checks / max(code, 1):.0%}** |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
