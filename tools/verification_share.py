"""Share of main-text sentences that talk about the verification machinery, per chapter.

The main line of a chapter should teach; how a check is calibrated belongs in a folded block (see the
style guide, "Teaching first"). This script counts, in each chapter's MyST source, the sentences of
the main text (markdown outside code cells, other code fences, display math, solutions, folded blocks
(dropdown admonitions, ``{dropdown}``, ``{toggle}``), headings, tables and HTML comments) and the
share of them that mention standard errors, asserts, tolerances, false alarms, seeds or rounding
bounds (the keyword list ``KEYWORDS`` below).

    python tools/verification_share.py            # a table, one row per chapter
    python tools/verification_share.py -v 03      # also the flagged sentences of chapter 03, with lines

The counting is deliberately simple (a regular-expression sentence splitter and a keyword list), so
read the share as an indicator, not as a measure of style.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

BOOK = Path(__file__).resolve().parent.parent / "book"

# Words that mark a sentence as being about how a check is made rather than about the mathematics.
KEYWORDS = re.compile(
    r"standard error|std\.? ?err|stderr|\bSEs?\b|\bassert|toleran|false[- ]alarm|\bseeds?\b"
    r"|rounding|error bars?|z[- ]scores?|\bZ_[A-Z]+|calibrat|not asserted|machine precision"
    r"|\bulp\b|confidence (?:level|interval)",
    re.IGNORECASE,
)
# `SE` only in capitals (not the word "se"); recheck case-sensitively.
_CASE_SENSITIVE = {"se": re.compile(r"\bSEs?\b")}

FOLDED_DIRECTIVES = {"solution", "dropdown", "toggle", "solution-start"}
_OPEN = re.compile(r"^\s*(?P<fence>:{3,}|`{3,})\{(?P<name>[^}]*)\}")
_PLAIN_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})")
_ABBREV = re.compile(r"\b(e\.g|i\.e|cf|vs|Fig|Eq|Eqs|Prop|Sec|Thm|Lem|resp|approx|etc|al|Ch)\.")


@dataclass
class Sentence:
    line: int
    text: str
    flagged: bool


def _is_flagged(text: str) -> bool:
    for match in KEYWORDS.finditer(text):
        word = match.group(0)
        if word.lower().startswith("se") and len(word) <= 3:
            if _CASE_SENSITIVE["se"].search(text):
                return True
            continue
        return True
    return False


def main_text_blocks(source: str) -> list[tuple[int, str]]:
    """Paragraphs of main text as (first line number, text)."""
    lines = source.splitlines()
    i = 0
    if lines and lines[0].strip() == "---":  # front matter
        i = 1
        while i < len(lines) and lines[i].strip() != "---":
            i += 1
        i += 1
    stack: list[tuple[str, bool]] = []  # (fence, folded)
    in_solution_range = False
    in_comment = False
    in_math = False
    blocks: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0

    def flush():
        nonlocal current
        if current:
            blocks.append((start, " ".join(current)))
        current = []

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        folded = in_solution_range or any(f for _, f in stack)
        if in_comment:
            if "-->" in line:
                in_comment = False
            i += 1
            continue
        if stripped.startswith("<!--"):
            flush()
            in_comment = "-->" not in stripped
            i += 1
            continue
        if stack and re.fullmatch(r"(:{3,}|`{3,})", stripped):
            fence = stripped
            if fence[0] == stack[-1][0][0] and len(fence) >= len(stack[-1][0]):
                flush()
                stack.pop()
                i += 1
                continue
        opener = _OPEN.match(line)
        if opener:
            flush()
            name = opener.group("name").strip()
            fence = opener.group("fence")
            if name == "solution-start":
                in_solution_range = True
            if name == "solution-end":
                in_solution_range = False
                i += 1
                continue
            if name in ("solution-start", "solution-end"):
                i += 1
                continue
            is_code = name in ("code-cell", "code", "code-block", "math", "raw", "eval-rst", "glue")
            this_folded = name in FOLDED_DIRECTIVES or is_code
            j = i + 1
            while j < len(lines) and re.match(r"^\s*:[\w-]+:", lines[j]):
                opt = lines[j]
                if re.match(r"^\s*:class:.*\b(dropdown|toggle)\b", opt):
                    this_folded = True
                j += 1
            if fence.startswith("`") and is_code:
                # skip to the matching backtick fence
                k = j
                while k < len(lines) and not (
                    lines[k].strip().startswith(fence) and set(lines[k].strip()) == {"`"}
                ):
                    k += 1
                i = k + 1
                continue
            stack.append((fence, this_folded))
            i = j
            continue
        plain = _PLAIN_FENCE.match(line)
        if plain:
            flush()
            fence = plain.group("fence")
            k = i + 1
            while k < len(lines) and not lines[k].strip().startswith(fence):
                k += 1
            i = k + 1
            continue
        if stripped.startswith("$$"):
            flush()
            if not (stripped.endswith("$$") and len(stripped) > 2):
                in_math = not in_math
            i += 1
            continue
        if in_math:
            i += 1
            continue
        if (
            not stripped
            or stripped.startswith(("#", "|", "+++", ":"))
            or re.fullmatch(r"\([\w-]+\)=", stripped)
        ):
            flush()
            i += 1
            continue
        if folded:
            i += 1
            continue
        if not current:
            start = i + 1
        current.append(stripped)
        i += 1
    flush()
    return blocks


def sentences(source: str) -> list[Sentence]:
    out = []
    for line, block in main_text_blocks(source):
        text = re.sub(r"\$[^$]*\$", "X", block)  # inline math
        text = re.sub(r"\{(cite|doc|ref|numref|eq|term)[^}]*\}`[^`]*`", "REF", text)
        text = re.sub(r"^[-*] |^\d+\. ", "", text)
        protected = _ABBREV.sub(lambda m: m.group(0)[:-1] + "\u2024", text)
        for raw in re.split(r"(?<=[.!?:])\s+(?=[A-Z(*\"`\u201c])|\s+(?=- )", protected):
            piece = raw.replace("\u2024", ".").strip(" -")
            if len(re.findall(r"[A-Za-z]{2,}", piece)) >= 3:
                out.append(Sentence(line, piece, _is_flagged(piece)))
    return out


def share(path: Path) -> tuple[int, int]:
    found = sentences(path.read_text())
    return sum(s.flagged for s in found), len(found)


def chapters() -> list[Path]:
    return sorted(BOOK.glob("0[1-6]_*.md"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "-v",
        "--verbose",
        nargs="*",
        default=None,
        help="print the flagged sentences of these chapters (prefixes; all if empty)",
    )
    args = parser.parse_args(argv)
    print(f"{'chapter':32s} {'flagged':>7s} {'of':>5s} {'share':>6s}")
    for path in chapters():
        flagged, total = share(path)
        print(f"{path.stem:32s} {flagged:7d} {total:5d} {100 * flagged / max(total, 1):5.1f}%")
        if args.verbose is not None and (
            not args.verbose or any(path.stem.startswith(p) for p in args.verbose)
        ):
            for s in sentences(path.read_text()):
                if s.flagged:
                    print(f"    {s.line:5d}: {s.text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
