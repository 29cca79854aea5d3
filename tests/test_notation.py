"""The notation page lists every symbol that two or more pages use, and gives each symbol one meaning.

The symbols are read by ``tools/notation_symbols.py`` (see its docstring for what counts as a symbol).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import notation_symbols as ns  # noqa: E402

NOTATION = ROOT / "book" / "notation.md"


def table_entries(text: str) -> dict[str, list[str]]:
    """Each symbol written in a table's first column -> the meanings (second column) it is given.

    A first cell may hold several symbols, separated by commas or semicolons outside braces; a symbol's
    definition (``= ...``, ``\\in ...``) is dropped, so ``$s = a^\\top\\Gamma a$`` lists ``s``.
    """
    out = defaultdict(list)
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or set(cells[0]) <= set("-: "):
            continue
        if cells[0] == "symbol":
            continue
        for segment in re.findall(r"\$([^$]+)\$", cells[0]):
            depth, item, items = 0, "", []
            for ch in segment:
                depth += ch == "{"
                depth -= ch == "}"
                if ch in ",;" and depth == 0:
                    items.append(item)
                    item = ""
                else:
                    item += ch
            items.append(item)
            for it in items:
                key = re.sub(r"\s+", "", re.split(r"=|\\in\b|\\propto\b", it)[0])  # s = a^T G a: s
                if key:
                    out[key].append(cells[1])
    return dict(out)


def test_every_shared_symbol_is_listed():
    gaps = ns.missing()
    assert not gaps, (
        "symbols used on two or more pages but missing from book/notation.md: "
        + ", ".join(f"{s} ({', '.join(sorted(p))})" for s, p in gaps.items())
    )


def test_each_symbol_has_one_meaning():
    entries = table_entries(NOTATION.read_text())
    assert len(entries) > 30, "the notation page's tables were not read"
    twice = {s: m for s, m in entries.items() if len(m) > 1}
    assert not twice, f"listed more than once on book/notation.md: {twice}"


def test_the_checker_sees_an_omission(tmp_path, monkeypatch):
    """Plant an omission: drop the row of Delta from a copy of the page; the check must notice."""
    text = NOTATION.read_text()
    planted = "\n".join(line for line in text.splitlines() if not line.startswith("| $\\Delta"))
    assert planted != text
    copy = tmp_path / "book" / "notation.md"
    copy.parent.mkdir()
    copy.write_text(planted)
    real_read = Path.read_text

    def read_text(self, *args, **kwargs):
        return real_read(copy if self == NOTATION else self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    assert "\\Delta" in ns.missing()


def test_the_checker_sees_a_second_meaning():
    text = NOTATION.read_text() + "\n| $s$ | the scores of the tokens | nowhere |\n"
    assert "s" in {k for k, m in table_entries(text).items() if len(m) > 1}


def test_every_row_has_its_tables_columns():
    """A stray ``|`` in a meaning would shift the "defined in" link into a column of its own."""
    width, bad = None, []
    for n, line in enumerate(NOTATION.read_text().splitlines(), 1):
        if not line.startswith("|"):
            width = None
            continue
        cells = len(re.sub(r"\$[^$]*\$", "$$", line).strip().strip("|").split("|"))
        if width is None:
            width = cells  # the table's header row
        elif cells != width:
            bad.append(f"line {n}: {cells} cells, the table's header has {width}")
    assert not bad, "; ".join(bad)


def test_no_table_row_writes_a_norm_with_an_escaped_bar():
    """In a Markdown table ``\\|`` is an escaped column bar, not TeX's ``\\|``: ``$\\|\\Sigma\\|$`` would
    render as a single-bar $|\\Sigma|$. Table rows write norms as ``\\lVert ... \\rVert``."""
    pages = sorted((ROOT / "book").glob("*.md")) + sorted((ROOT / "book" / "labs").glob("*.md"))
    bad = [
        f"{page.relative_to(ROOT)}:{n}"
        for page in pages
        for n, line in enumerate(page.read_text().splitlines(), 1)
        if line.startswith("|") and "\\|" in line
    ]
    assert not bad, f"table rows with \\| (write \\lVert ... \\rVert): {bad}"


def test_the_constants_table_gives_the_values_the_lessons_print():
    """The values of the constants table, computed again with softlin in each lesson's setting."""
    import softlin.icl as icl
    import torch

    table = NOTATION.read_text().split("(notation-constants)=", 1)[1].split("\n## ", 2)[1]
    rows = [line for line in table.splitlines() if line.startswith("| {doc}")]
    assert rows, "no constants table"
    value = {r.split("|")[2].strip(): r.split("|")[6].strip() for r in rows}
    Sigma = icl.kms_covariance(5, 0.5)
    Sigma_1 = Sigma / float(torch.linalg.matrix_norm(Sigma, ord=2))
    C = icl.risk_fluctuation_constant(*icl.bayes_optimal_parameters(Sigma), Sigma)
    C_1 = icl.risk_fluctuation_constant(*icl.bayes_optimal_parameters(Sigma_1), Sigma_1)
    star = value["$C_\\star$"]
    assert star == f"{C:.1f} at the KMS $\\Sigma$; {C_1:.1f} at $\\Sigma_1$", star
    const = icl.large_prompt_constants(Sigma, tau2=0.2, noise_var=0.1)
    at_one = (
        2
        * icl.risk_fluctuation_constant(
            *icl.bayes_optimal_parameters(Sigma), Sigma, tau2=0.2, noise_var=0.1
        )
        - const.bayes
    )
    assert f"= {at_one:.2f}$" in value[r"$\bar C_1(r)$"], value[r"$\bar C_1(r)$"]
    expected = (
        f"$C_{{\\rm lin}} = {const.linear:.2f}$; $C_{{\\rm soft}} = {const.softmax:.2f}$, "
        f"at $r^\\star = {const.scale:.3f}$"
    )
    assert value[r"$C_{\rm lin}$, $C_{\rm soft}$"] == expected, (
        value[r"$C_{\rm lin}$, $C_{\rm soft}$"],
        expected,
    )
