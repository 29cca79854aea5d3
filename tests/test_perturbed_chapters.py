"""Each chapter stops at the right check when one of the library's formulas is slightly wrong.

For chapters 1 to 6: the chapter is executed in fast mode with one softlin function replaced,
right after the parameters cell, by a perturbed version of itself (``functools.wraps`` keeps the
page's ``show_source`` on the original code). The chapter must then stop with an AssertionError
raised by the check that compares that formula with an independent computation (finite
differences, Monte Carlo, two training flows), not at another check and not with an unrelated
error. Each perturbation is small, a subtle bug, but above the tolerance of its check. The
unperturbed chapters pass in fast mode: that is the fast run of ``tests/test_book.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]


def failing_check(chapter: str, patch: str) -> str:
    """Execute ``book/<chapter>.md`` in fast mode with the code ``patch`` run right after its
    parameters cell; it must raise. Returns ``"<exception type>: <message>"`` followed by the lines
    of the traceback that IPython marks as executing (the statement of the cell that failed, then
    the calls below it), without terminal colours."""
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = jupytext.read(ROOT / "book" / f"{chapter}.md")
    i = next(k for k, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell("mode = 'fast'\n" + patch))
    nb.cells = [c for c in nb.cells if "google.colab" not in c.source]
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3",
        "language": "python",
        "name": "python3",
    }
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    with pytest.raises(CellExecutionError) as info:
        client.execute()
    err = info.value
    traceback = re.sub(r"\x1b\[[0-9;]*m", "", err.traceback)
    executing = [line.strip() for line in traceback.splitlines() if re.match(r"\s*-+>", line)]
    return "\n".join([f"{err.ename}: {err.evalue}", *executing])


def replaced(module: str, name: str, wrong: str, define: str = "") -> str:
    """The code that replaces ``module.name`` (an attribute path, such as ``Class.method``) by the
    expression ``wrong``, in which ``_right`` is the original (``define`` runs first, after the
    imports); ``functools.wraps`` keeps the page's ``show_source`` on the original code."""
    target = f"{module}.{name}"
    return (
        f"import functools, torch, {module}\n_right = {target}\n{define}"
        f"{target} = functools.wraps(_right)({wrong})"
    )


@pytest.mark.book
def test_chapter_1_fails_when_the_tilted_mean_is_perturbed():
    """Lesson 1's proposition that softmax attention is a tilted mean, ``grad Lambda(a)``:
    `softlin.tilted_mean` scaled by 1 + 2e-7 (the size of a float32 rounding) is off by 2.3e-7, ten
    times the tolerance 2.4e-8 (Taylor remainder plus rounding) of the lesson's one check, against
    central finite differences of the log-MGF, which must catch it. `softmax_attention` calls its
    own module's function, so nothing before that check notices."""
    patch = replaced("softlin", "tilted_mean", "lambda *a, **k: (1 + 2e-7) * _right(*a, **k)")
    failure = failing_check("01_measure_view", patch)
    assert failure.startswith(
        "AssertionError: check failed: tilted mean vs finite differences of the log-MGF"
    )


@pytest.mark.book
def test_chapter_2_fails_when_lemma_2_1_is_perturbed():
    """Lesson 2's Lemma 2.1: `softlin.gaussian_attention_limit` plus 1e-6, far below what Monte
    Carlo could see, must stop the lesson at its one check, quadrature on law A (max |quadrature -
    closed form| below a rounding bound of about 5e-11)."""
    patch = replaced(
        "softlin", "gaussian_attention_limit", "lambda *a, **k: _right(*a, **k) + 1e-6"
    )
    failure = failing_check("02_infinite_prompt_limit", patch)
    assert failure.startswith(
        "AssertionError: check failed: law A: shifted, full rank: largest |quadrature"
    )


@pytest.mark.book
def test_chapter_3_fails_when_the_fixed_query_constant_is_perturbed():
    """Chapter 3's fixed-query lemma, ``L E|error|^2 -> C_1 = e^s (psi + zeta)``, checked in its lab:
    the perturbed `concentration.fixed_query_mse_expansion` returns ``C_1 = e^s psi``, the term
    ``zeta`` of the random normaliser forgotten (exact at s = 0, 28 % low at s = 0.5, 54 % low at
    s = 1.5). The Monte Carlo check of ``L MSE / C_1 = 1`` at the longest prompt, tilt by tilt,
    allows 5 SE plus ``|C_2| / (C_1 L)`` (0.18 to 0.84 in fast mode), so it must catch it at one
    of the tilts s > 0, before any other check."""
    without_zeta = (
        "def _without_zeta(queries, U, V, cov):\n"
        "    C1, C2 = _right(queries, U, V, cov)\n"
        "    a = queries @ U.mT\n"
        "    psi, zeta = torch.trace(V @ cov @ V.mT), ((a @ cov @ V.mT) ** 2).sum(-1)\n"
        "    return C1 * psi / (psi + zeta), C2\n"
    )
    patch = replaced(
        "softlin.concentration", "fixed_query_mse_expansion", "_without_zeta", without_zeta
    )
    failure = failing_check("labs/03_concentration", patch)
    assert failure.startswith("AssertionError: check failed: L·MSE/C1 at the largest L, s = ")
    assert "check_close(ratio[-1, k], 1" in failure


@pytest.mark.book
def test_chapter_4_fails_when_the_gronwall_envelope_is_perturbed():
    """Chapter 4's Grönwall bound (the proof of Lemma D.1), checked in lab 4: `stability.gronwall_envelope`,
    the solution of ``E' = g + beta_inf^-(t) E``, scaled by 0.5, as if the force ``g`` of finite prompts
    were under-counted by half. At its tightest the one-sided bound is only 1.13 times the
    measured distance between the finite- and infinite-prompt flows (fast mode), so the check that
    every bound lies above that distance, up to the solver's error, must catch it."""
    patch = replaced(
        "softlin.stability", "gronwall_envelope", "lambda *a, **k: 0.5 * _right(*a, **k)"
    )
    failure = failing_check("labs/04_training_stability", patch)
    assert failure.startswith("AssertionError: check failed: |θ_L - θ_∞| against the "), failure
    assert "bound: " in failure.splitlines()[0] and " NOT below " in failure, failure


@pytest.mark.book
def test_chapter_5_fails_when_the_infinite_prompt_risk_is_perturbed():
    """Lesson 5's infinite-prompt risk ``R_inf = 1/2 tr(Delta Sigma Delta^T)``, ``Delta = b Sigma A - I``,
    checked in its lab: `icl.infinite_prompt_risk` 5 % too high (0.14 on 2.71). The plain Monte Carlo
    average of ``1/2 (y_inf - y_q)^2`` over 50 000 tasks and queries (fast mode) allows 4 SE, 0.096, so
    it must catch it, before the gradient checks that follow."""
    patch = replaced(
        "softlin.icl", "infinite_prompt_risk", "lambda *a, **k: 1.05 * _right(*a, **k)"
    )
    failure = failing_check("labs/05_icl_linear_regression", patch)
    assert failure.startswith("AssertionError: check failed: R_inf by Monte Carlo")


@pytest.mark.book
def test_chapter_7_fails_when_the_sign_law_log_mgf_is_perturbed():
    """Lab 7's Rademacher law, ``Lambda(a) = sum_j log cosh a_j``: `RademacherMeasure.log_mgf`
    plus 0.01 (an MGF normalised to e^0.01). Every limit of lesson 7 and its lab reads only its
    gradient, which is unchanged; the effective sample size reads its values,
    ``E[ESS / L] -> exp(2 Lambda(a) - Lambda(2a))``, which moves by 1 %, 25 times the 4-SE
    tolerance (0.16 %) of the lab's Monte Carlo check of ESS / L at the longest prompt, which must
    catch it."""
    patch = replaced(
        "softlin", "RademacherMeasure.log_mgf", "lambda self, a: _right(self, a) + 0.01"
    )
    failure = failing_check("labs/07_beyond_the_paper", patch)
    assert failure.startswith("AssertionError: check failed: Rademacher, ESS / L at the largest L")


@pytest.mark.book
def test_lesson_6_fails_when_the_fluctuation_constant_is_perturbed():
    """Lesson 6's large-prompt constant of softmax attention: `icl.risk_fluctuation_constant` scaled by
    1.1 raises C_soft from 20.3 to about 22.4, seven standard errors above the extrapolated L x excess
    of the numerically found best softmax model (19.9 +- 0.3), which the lesson's check compares with
    it."""
    patch = replaced(
        "softlin.icl", "risk_fluctuation_constant", "lambda *a, **k: 1.1 * _right(*a, **k)"
    )
    failure = failing_check("06_paper_experiment", patch)
    assert failure.startswith("AssertionError")
    assert "extrapolated" in failure and "NOT within" in failure


@pytest.mark.book
def test_lab_6_fails_when_the_linear_class_optimum_is_perturbed():
    """Lab 6's check that trained linear attention sits at its class optimum: the closed form
    `icl.linear_class_optimum` evaluated at 2L instead of L (its 1/L terms halved, a subtle bug of the
    fourth moments) is 0.13 below the trained models at L = 10, seven standard errors of the check."""
    patch = replaced(
        "softlin.icl", "linear_class_optimum", "lambda S, L, **k: _right(S, 2 * L, **k)"
    )
    failure = failing_check("labs/06_paper_experiment", patch)
    assert failure.startswith("AssertionError")
    assert "linear minus its class optimum" in failure and "NOT within" in failure
