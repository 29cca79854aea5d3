"""The chain of results (book/chain_of_results.md): the paper's argument on at most two printed pages.

* At most about 1 500 words of prose; each link of the chain (Lemma 2.1, Propositions 3.1 and 3.4,
  Corollary D.3, Lemma D.1, Theorem 4.3, Theorem 5.2) in order, each with a link to its lesson; the
  formulas a student must carry (the tilt, V(m + Gamma U z), C_1, the threshold u^2 = 1/2, R_inf, b*, A*).
* Linked from the intro and the instructor page.
* Printed from the built site with the handouts' settings (headless Chromium, A4, the site's print
  style; tools/handouts.py, which prints it after the syllabus, first among the handouts), it takes at
  most two pages.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from lesson_metrics import prose_words

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "chain_of_results.md"
CHAIN = [
    "Lemma 2.1",
    "Propositions 3.1 and 3.4",
    "Corollary D.3",
    "Lemma D.1",
    "Theorem 4.3",
    "Theorem 5.2",
]
FORMULAS = {
    "the tilt": r"V\,\nabla\Lambda_\mu(Uz)",
    "the Gaussian limit": r"V(m + \Gamma Uz)",
    "the fixed-query constant": r"C_1 = e^{s}",
    "the threshold": r"u^2 < \tfrac12",
    "the infinite-prompt risk": r"R_\infty(A, b) = \tfrac12",
    "b*": r"b^\star = \operatorname{tr}(\Sigma^{-2})^{1/4}",
    "A*": r"A^\star = \Sigma^{-1}/b^\star",
}


def test_the_chain_is_short_and_in_order():
    text = PAGE.read_text()
    words = prose_words(text)
    assert words <= 1_500, f"{words} prose words"
    positions = [text.find(f"**{i + 1}. {name}") for i, name in enumerate(CHAIN)]
    assert all(p >= 0 for p in positions), dict(zip(CHAIN, positions))
    assert positions == sorted(positions)


def test_the_chain_carries_the_formulas_and_links_its_lessons():
    text = PAGE.read_text()
    missing = [name for name, tex in FORMULAS.items() if tex not in text]
    assert not missing, missing
    for stem in (
        "01_measure_view",
        "02_infinite_prompt_limit",
        "03_concentration",
        "04_training_stability",
        "05_icl_linear_regression",
        "06_paper_experiment",
        "07_beyond_the_paper",
    ):
        assert f"<{stem}>`" in text, stem


def test_the_intro_and_the_instructor_page_link_the_chain():
    for page in ("intro", "instructor"):
        assert "{doc}`chain_of_results`" in (ROOT / "book" / f"{page}.md").read_text(), page


def test_the_handouts_print_the_syllabus_then_the_chain_first():
    from handouts import handout_pages

    titles = handout_pages(ROOT)
    assert list(titles)[:2] == ["syllabus", "chain_of_results"], list(titles)[:3]
    assert titles["chain_of_results"] == "The chain of results"


def pdf_pages(pdf: bytes) -> int:
    return len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", pdf))


@pytest.mark.browser
@pytest.mark.book
def test_the_chain_prints_on_at_most_two_pages(built_book, tmp_path):
    from conftest import chromium_path
    from handouts import print_pages

    chromium_path()  # installs Debian's chromium when missing
    rc, log, stage = built_book
    assert rc == 0, log[-3000:]
    html = stage / "_build" / "html"
    (printed,) = print_pages(
        html, ["chain_of_results"], tmp_path, {"chain_of_results": "The chain of results"}
    )
    pages = pdf_pages(printed["pdf"].read_bytes())
    report = ROOT / "_build" / "kit-report.json"
    old = json.loads(report.read_text()) if report.exists() else {}
    words = prose_words(PAGE.read_text())
    report.write_text(json.dumps({**old, "chain_of_results": {"pages": pages, "words": words}}))
    assert 1 <= pages <= 2, f"the chain of results prints on {pages} pages"
