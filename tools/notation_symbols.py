#!/usr/bin/env python
"""Which mathematical symbols each page of the book uses, and which of them the notation page lists.

    .venv/bin/python tools/notation_symbols.py           # symbols on two or more pages, and the pages

A *symbol* is a Greek letter (``\\alpha``, ``\\Gamma``, ...) or a Latin letter used as a variable in the
pages' math (``$...$`` and ``$$...$$``), with its decorations dropped (``\\hat\\mu_L`` counts as ``\\mu``,
``A^\\star`` as ``A``), letters inside ``\\operatorname{}``, ``\\mathrm{}``, ``\\text{}`` and macro names
not counted. ``tests/test_notation.py`` asks that ``book/notation.md`` list every symbol that two or more
pages (lessons, labs and the other pages of the book) use, apart from :data:`CONVENTIONS`, the letters
whose use is the usual one (indices, the exponential, differentials), which the notation page names in
one line.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_book import ROOT, toc_files

GREEK = (
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi "
    "rho varrho sigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma "
    "Upsilon Phi Psi Omega"
).split()
#: Letters with their usual meaning, named on the notation page in one line: indices and counters,
#: Euler's e, differentials, and function names written in plain letters (log, exp, ...).
CONVENTIONS = set("ijklne") | {"d"}
TEXT_MACROS = (
    r"\\(?:operatorname|mathrm|text|mathsf|texttt|rm|mbox|label|tag)\s*\{[^{}]*\}"  # words
    r"|\\rm\s*[A-Za-z]+"  # words written {\rm soft}
    r"|\\(?:begin|end)\s*\{[^{}]*\}|\\\\\[[^\]]*\]"  # environments, \\[2pt]
    r"|\\(?:mathbb|mathcal|mathrm)\s*\{?[A-Za-z]\}?"  # E, R, N of the usual sets and laws
    r"|_\{?F\}?(?![A-Za-z])"  # the Frobenius norm's subscript
)
#: ``$$...$$``, or ``$...$`` within one paragraph (inline math may wrap onto the next line).
MATH = re.compile(r"\$\$(.+?)\$\$|(?<!\\)\$((?:[^$\n]|\n(?!\s*\n))+?)(?<!\\)\$", re.S)


def math_segments(text: str) -> list[str]:
    """The math of a MyST page: ``$$...$$`` and ``$...$``, outside code cells."""
    text = re.sub(r"```\{code-cell\}.*?^```", " ", text, flags=re.S | re.M)
    text = re.sub(r"``[^`]*``|`[^`\n]*`", " ", text)  # inline code
    return [m.group(1) or m.group(2) for m in MATH.finditer(text)]


def symbols(math: str) -> set[str]:
    """The symbols of one math segment (see the module docstring)."""
    math = re.sub(TEXT_MACROS, " ", math)
    found = {g for g in re.findall(r"\\([A-Za-z]+)", math) if g in GREEK}
    math = re.sub(r"\\[A-Za-z]+", " ", math)  # other macros
    found |= set(re.findall(r"[A-Za-z]", math))
    return {f"\\{s}" if s in GREEK else s for s in found}


def pages() -> list[Path]:
    """Every Markdown page of the book's table of contents."""
    return [ROOT / f"{f}.md" for f in toc_files(ROOT / "_toc.yml") if (ROOT / f"{f}.md").exists()]


def usage() -> dict[str, set[str]]:
    """symbol -> the pages (paths inside book/) that use it, the notation page excepted."""
    out = defaultdict(set)
    for page in pages():
        if page.name == "notation.md":
            continue
        name = page.relative_to(ROOT / "book").with_suffix("").as_posix()
        for segment in math_segments(page.read_text()):
            for s in symbols(segment):
                out[s].add(name)
    return dict(out)


def listed() -> set[str]:
    """The symbols that the notation page's math mentions."""
    text = (ROOT / "book" / "notation.md").read_text()
    return set().union(*(symbols(m) for m in math_segments(text)))


def missing() -> dict[str, set[str]]:
    """Symbols on two or more pages that the notation page does not list (conventions apart)."""
    on_page = listed()
    return {
        s: p
        for s, p in sorted(usage().items())
        if len(p) >= 2 and s not in on_page and s not in CONVENTIONS
    }


def main() -> int:
    for s, p in sorted(usage().items(), key=lambda kv: -len(kv[1])):
        if len(p) >= 2:
            print(f"{s:10s} {len(p):2d} pages: {', '.join(sorted(p))}")
    gaps = missing()
    print(f"\nnot on the notation page: {sorted(gaps) or 'none'}")
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())
