#!/usr/bin/env python
"""Build the course's graded problem sets with otter-grader, and grade submissions locally (no Docker).

    python tools/problem_sets.py                       # every set -> _build/problem-sets/ (`make problem-sets`)
    python tools/problem_sets.py ps2_concentration     # one set
    python tools/problem_sets.py --grade ps1_measures submission.ipynb [...]   # score submissions
    python tools/problem_sets.py --grade ps1_measures --csv grades.csv *.ipynb  # ... into a gradebook
    python tools/problem_sets.py --variant SEED        # fresh numbers: _build/problem-sets-variant-SEED/
    python tools/problem_sets.py --variant SEED --grade ps1_measures submission.ipynb   # grade against it

(SEED: a private seed of eight digits or so, for graded use; see "Numerical inputs and variants".)

One problem set per session, ``course/problem_sets/psN_name.md``: a MyST notebook (jupytext) written in
otter-grader's assignment format (raw cells ``# BEGIN QUESTION`` ... ``# END QUESTION``, solutions between
``# BEGIN SOLUTION`` and ``# END SOLUTION`` or marked ``# SOLUTION``, test cells with a ``TEST CONFIG``
giving their points and whether they are ``hidden``; manually graded questions carry their model answer
and rubric as their solution). ``otter assign`` turns each into

* ``_build/problem-sets/psN_name/student/psN_name.ipynb``: the student version, solutions removed, the
  public checks kept in the notebook (``grader.check("q1")``): in its metadata, where otter-grader reads
  them in Jupyter, and packed into its setup cell, which under Colab writes them to a folder and loads
  them from there (:func:`add_colab_checks`: otter-grader 7 reads only test files under Colab, and a
  Colab kernel cannot open its own notebook);
* ``_build/problem-sets/psN_name/autograder/``: the solution notebook (model answers and rubrics
  included) and ``autograder.zip`` with the public and the hidden tests;
* ``_build/problem-sets/psN_name/solutions/``: the solution sheet for students, as a notebook and as
  HTML (:func:`solution_sheet`: the answers and rubrics without the tests);

**Numerical inputs and variants.** The numbers a set's computations use (the rate of the exponential
tokens, the two-point law and its tilt, the seeds and inputs of the hidden tests, the simulation's tilt and
prompt length) are written in the sources as placeholders, ``{{name}}`` or ``{{name:fmt}}`` (a Python format
spec), and filled in from :func:`parameters` before anything else reads a source (:func:`source`): the
question text, the solution, the public and hidden tests and the model answers all take the same values.
Without ``--variant`` they are the defaults; ``--variant SEED`` draws other values from ``SEED``, so that
each year's students get fresh numbers whose solution and tests agree (``otter assign`` checks it by
running the tests on the solution). A variant is built into ``_build/problem-sets-variant-SEED/``; its
titles say "(variant)" but not the seed, which only that folder's README.md records: with the seed and
this repository anyone can rebuild the variant's solutions, so a lecturer keeps it private. A variant
changes numbers, and the tokens' law: set 1's question 2 asks about Gamma tokens of shape 2 or 3
(``ps1_shape``) instead of the exponential law (shape 1), and set 2's questions 1 and 3 take the same
tokens, so their public derivations do not answer a variant. The other functions the sets ask for take
general inputs, and the other derivations and written answers keep their wording, so the public
solutions answer every variant there (book/grading.md says which questions a variant protects).

Before ``otter assign``, the setup cell's ``@main`` becomes the commit the set is built from
(:func:`pin_setup`, ``git rev-parse HEAD`` as ``tools/colab_notebooks.py`` does for the lessons), so a
student notebook installs ``softlin`` at the commit whose hidden tests grade it, as the student copies of
the lessons do; outside git the sources' ``@main`` stays.

This script also adds ``psN_name/rubric.md`` (points per question, the manual questions' model answers
and rubrics), ``psN_name/questions.json`` (the questions, their points and which are graded by hand, which
the shipped ``grade_all.py`` reads), ``README.md``, ``student-versions.zip``, the oral bank
``oral-checks.md``, ``grade_all.py`` (from ``course/``) and ``written_check.py`` (from ``tools/``). ``otter assign`` runs every test against the
solution notebook, so a set whose solution fails its own tests does not build.

**The written check.** ``tools/written_check.py`` (:func:`written_check.build`, run by :func:`main`)
adds a written check ready to print, the cheaper alternative of book/grading.md to the oral check:
``written-check.html`` and ``.md`` (30 minutes, closed book, three questions of 4 points, one per
set, each a follow-up of the oral bank; at most two A4 pages) and ``written-check-key.html`` and ``.md``
(every answer in full with its numbers, computed with the library, and a scoring guide of 0 to 4 per
question on the bank's scale, 0 to 2 and 0 to 2), with their PDFs where headless Chromium is installed
(optional: the build does not need it). The default build's inputs are fixed numbers other than the bank's
printed follow-ups; a variant's are drawn from its seed, by a stream of their own (the sets' numbers do
not change), and every number of a variant's key differs from the default key's, so the public default
key does not answer a variant's check. The build folder's README.md says so. The generator ships too
(:func:`add_written_check`): ``written_check.py`` beside the sets, which run there with ``--seed SEED``
(the folder's softlin wheel installed, no repository) writes the same sheet and key as ``--variant SEED``
builds; set 1's first draws live in it (:func:`written_check.set_draws`, imported by :func:`_inputs`), so
that the copy draws the variant's set 1 shape, which its check avoids, as this script does.

This script ships too (:func:`ship_generator`): ``variants/`` in the build folder holds it with the sets'
sources, the written check's generator, the bank, ``grade_all.py`` and the commit the kit was built from.
There, ``python variants/problem_sets.py --variant SEED`` (:data:`IN_KIT`) writes a seed's whole kit into
``variant-SEED/`` without the repository: the same notebooks as ``--variant SEED`` here.

The site hosts the student versions, and only them (:func:`publish`, which ``tools/build_book.py`` runs
after the Sphinx build): ``<site>/problem-sets/psN_name.ipynb`` and ``student-versions.zip``, listed on
the instructor page. They are built there without otter's run of the tests on the solutions (the
student version does not depend on it; ``make problem-sets`` and the tests run them): measured at about
1 s in the build (0.9-1.3 s, 0.6-0.7 s of it importing otter; 2.7-3.8 s in a fresh process that must
also import jupytext and nbformat), against some 20 s with the test runs. The solutions, hidden tests
and rubrics never reach the site.

Grading runs the submission in this environment (``otter.api.grade_submission``: no container, no
network; softlin and torch must be installed, as ``make install`` does), and prints the points of each
question awarded and possible; the manually graded questions are listed with their points possible, to be
graded by hand with the rubric (the JSON line's ``manual_possible``). ``--csv FILE`` also writes a gradebook
(:func:`write_gradebook`): one row per submission, the points the autograder awarded on each question, an
empty column for each question graded by hand, then ``auto_awarded``, ``auto_possible``, an empty
``manual_awarded``, ``manual_possible``, an empty ``total_awarded``, ``total_possible`` and an empty
``comments``. The shipped ``grade_all.py`` writes the
same columns: the functions that write them live there (it must run without the repository) and
:func:`write_gradebook` imports them (:func:`grade_all_module`). ``--grade`` prints for the grader only
(points, no check's message); the feedback for students is ``grade_all.py``'s: per question the points,
the failed public checks' messages and only how many hidden checks failed (their messages state hidden
inputs and expected values).

``autograder.zip`` is otter's autograder for Gradescope, which builds its own environment from the zip:
:func:`add_requirements` makes the zip list torch, scipy and softlin beside otter's own requirements;
``make problem-sets`` (:func:`main`) then puts the softlin wheel of this checkout in the zip and makes
the environment install it from there (:func:`bundle_wheel`), so a kit built from a fork grades with
its own library; :func:`add_git` adds git, which pip needs where the URL stays (the site's copies).
That path is not run by the tests here, which check only that the zip lists them and holds the wheel;
book/adapting.md says how to check it on Gradescope before relying on it.

Why otter-grader rather than nbgrader: one source notebook gives the student version and the
autograder, with public and hidden tests and points per test case, in the notebook format students
already use; grading needs neither a course database nor Jupyter server extensions, and otter runs the
tests without Docker.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import math
import random
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from fractions import Fraction
from pathlib import Path

import written_check  # tools/: set 1's first draws, and the written check

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: Run from a built kit's ``variants/`` folder (:func:`ship_generator`), this module needs no repository:
#: the sets' sources, the oral-check bank, ``grade_all.py``, the written check's generator and the commit
#: the kit was built from lie beside it, and the kit's softlin wheel in the folder above.
IN_KIT = (HERE / "sources").is_dir() and not (ROOT / "lib" / "softlin").is_dir()
SOURCES = HERE / "sources" if IN_KIT else ROOT / "course" / "problem_sets"
OUT = ROOT / "_build" / "problem-sets"
#: A pipe inside a Markdown table cell (a message quoting |T_L - T(a)|), escaped so the table keeps
#: its columns and the cell shows the pipe itself.
PIPE = "\\|"
QUESTION = re.compile(r"```\{raw-cell\}\n# BEGIN QUESTION\n(?P<config>.*?)```", re.S)
PLACEHOLDER = re.compile(r"\{\{(?P<name>\w+)(?::(?P<fmt>[^{}]*))?\}\}")


def sets() -> list[str]:
    """The problem sets' names, in session order (``psN_name``)."""
    return sorted(p.stem for p in SOURCES.glob("ps*.md"))


def variant_out(variant: int | None) -> Path:
    """Where a build goes by default: ``_build/problem-sets/`` or ``_build/problem-sets-variant-SEED/``
    (:func:`written_check.variant_out`, which the written check's own command line uses too); from a
    built kit, ``variant-SEED/`` in the kit's folder."""
    if IN_KIT:
        return ROOT / ("variant-default" if variant is None else f"variant-{variant}")
    return written_check.variant_out(variant)


def built_from() -> str | None:
    """The commit whose softlin the sets install: the checkout's ``HEAD`` in the repository, the one
    recorded in ``BUILT_FROM`` (:func:`ship_generator`) in a built kit; None where there is none."""
    if IN_KIT:
        recorded = HERE / "BUILT_FROM"
        commit = recorded.read_text().strip() if recorded.exists() else ""
        return commit if re.fullmatch(r"[0-9a-f]{40}", commit) else None
    from colab_notebooks import checkout_commit

    return checkout_commit(ROOT)


# --- the numerical inputs ------------------------------------------------------------------------------


def _inputs(rng: random.Random | None) -> dict:
    """The free inputs of the three sets: the defaults (``rng`` None) or a variant's draws. Tilts of the
    exponential tokens are in units of their rate ``lam``."""
    if rng is None:
        return {
            "lam": DEFAULT_RATE,
            "ps1_shape": 1,  # set 1's question 2: Gamma(shape, lam) tokens, 1 the exponential law
            "ps1_seeds": (13, 14),
            "ps1_scale": (2, 7),
            "ps1_tilts": (-4.0, -0.7, 0.35, 0.8, 0.95),
            "ps1_infinite": (1.0, 1.3, 4.0),
            "ps1_law": DEFAULT_LAW,  # atoms x1 < x2, probability of x1, tilt
            "ps2_tilts": (-3.0, -0.4, 0.15, 0.3, 0.45),
            "ps2_infinite": (0.5, 0.7, 0.95),
            "ps2_seed": 23,
            "ps2_lmax": 0.3,
            # tilt, prompt length, the hidden checks' seed (not 0, 1 or 2, the seeds one tries)
            "ps2_sim": (0.2, 1000, 4711),
            "ps3_seeds": (61, 62, 64),
            "ps3_dims": ((3, 6, 9), (2, 7, 12)),
            "ps3_cases": ((3, 0.5, 0.2), (5, 0.2, 0.1), (8, 1.0, 3.0)),
        }

    def u(lo, hi):
        return round(rng.uniform(lo, hi), 2)

    def seed():
        return rng.randrange(100, 100_000)

    # set 1's two-point law, the rate and set 1's Gamma shape (another member of the family: the public
    # solution's derivation, the exponential law's generating function, does not answer it) come first,
    # drawn by the written check's module: its copy in a built folder draws the same shape from a seed
    first = written_check.set_draws(rng)
    return {
        "lam": first["lam"],
        "ps1_shape": first["ps1_shape"],
        "ps1_seeds": (seed(), seed()),
        "ps1_scale": (rng.choice((2, 3)), rng.choice((-5, -2, 3, 7))),
        "ps1_tilts": (u(-4, -1), u(-1, -0.05), u(0.05, 0.5), u(0.5, 0.9), u(0.9, 0.98)),
        "ps1_infinite": (1.0, u(1.01, 2), u(2, 5)),
        "ps1_law": first["ps1_law"],
        "ps2_tilts": (u(-3, -1), u(-1, -0.05), u(0.05, 0.2), u(0.2, 0.4), u(0.4, 0.48)),
        "ps2_infinite": (0.5, u(0.51, 0.8), u(0.8, 0.99)),
        "ps2_seed": seed(),
        # lambda_max(M) up to 0.3: the Gauss-Hermite reference of set 2's question 2 was checked to 1e-10
        # there; the simulation's tilt up to 0.2 lambda (4a < lambda, so its standard error is itself
        # reliable) and L from 500: its hidden test wants the redrawn prompts' standard error below 6 % of
        # C_1 at n = 4000
        "ps2_lmax": u(0.2, 0.3),
        "ps2_sim": (round(rng.uniform(0.1, 0.2), 3), rng.randrange(500, 1501, 50), seed()),
        "ps3_seeds": (seed(), seed(), seed()),
        "ps3_dims": (
            tuple(sorted(rng.sample(range(2, 10), 3))),
            tuple(sorted(rng.sample(range(2, 13), 3))),
        ),
        "ps3_cases": tuple(
            (rng.randint(2, 9), rng.choice((0.2, 0.5, 1.0)), rng.choice((0.05, 0.1, 0.5, 2.0)))
            for _ in range(3)
        ),
    }


# The rate of the exponential tokens: the default sets' (not 1), and the range a variant's is drawn from,
# with set 1's default two-point law; they live with the draws in tools/written_check.py
# (:func:`written_check.set_draws`), one implementation for the sets and the written check's copy.
DEFAULT_RATE = written_check.DEFAULT_RATE
RATES = written_check.RATES
DEFAULT_LAW = written_check.DEFAULT_LAW


def _gamma_texts(k: int, lam: float) -> dict[str, str]:
    """Set 1's question 2 in words for Gamma(k, lam) tokens: the law, its name, the mean at no tilt,
    and the model answer's derivation; ``k = 1`` (the default sets) is written as the exponential law."""
    if k == 1:
        return {
            "q2_law": rf"the exponential law of rate $\lambda = {lam}$ (density $\lambda e^{{-\lambda x}}$ on $x > 0$)",
            "q2_name": "the exponential law",
            "q2_mean": "1 / lambda",
            "q2_T": r"$T(a) = 1/(\lambda - a)$",
            "q2b_fraction": "a half for exponential tokens",
            "q2_model": (
                r"$\mathbb E\,e^{aX} = \int_0^\infty \lambda e^{-(\lambda - a)x}\,dx = \frac{\lambda}{\lambda - a}$ for"
                "\n"
                r"$a < \lambda$, and $+\infty$ for $a \ge \lambda$ (the integrand does not decay). So $\Lambda(a) = \log\lambda -"
                "\n"
                r"\log(\lambda - a)$ and $T(a) = \Lambda'(a) = 1/(\lambda - a)$ for $a < \lambda$; equivalently, the tilted law"
                "\n"
                r"$\propto e^{ax}\lambda e^{-\lambda x}$ is $\mathrm{Exp}(\lambda - a)$, whose mean is $1/(\lambda - a)$."
            ),
        }
    return {
        "q2_law": (
            rf"the Gamma law of shape $k = {k}$ and rate $\lambda = {lam}$ (density "
            rf"$\lambda^k x^{{k-1}} e^{{-\lambda x}}/(k-1)!$ on $x > 0$)"
        ),
        "q2_name": "this Gamma law",
        "q2_mean": "k / lambda",
        "q2_T": r"$T(a) = k/(\lambda - a)$",
        # At a = lam the weighted tokens have density ~ x^{k-1} up to the largest token M: mean k M/(k+1).
        "q2b_fraction": rf"$k/(k+1) = {k}/{k + 1}$ for these Gamma tokens",
        "q2_model": (
            r"$\mathbb E\,e^{aX} = \int_0^\infty \frac{\lambda^k x^{k-1}}{(k-1)!} e^{-(\lambda - a)x}\,dx"
            r" = \big(\frac{\lambda}{\lambda - a}\big)^k$ for"
            "\n"
            r"$a < \lambda$, and $+\infty$ for $a \ge \lambda$ (the integrand does not decay). So $\Lambda(a) = k\log\lambda -"
            "\n"
            rf"k\log(\lambda - a)$ and $T(a) = \Lambda'(a) = k/(\lambda - a)$ for $a < \lambda$, here with $k = {k}$; equivalently,"
            "\n"
            r"the tilted law $\propto e^{ax}x^{k-1}e^{-\lambda x}$ is $\mathrm{Gamma}(k, \lambda - a)$, whose mean is $k/(\lambda - a)$."
        ),
    }


def points_label(x: float) -> str:
    """``x`` points in words: "1 point", "0.5 points", "2 points"."""
    return f"{x:g} point" + ("" if x == 1 else "s")


def gamma_correction(lam: float, a: float, k: int = 1) -> float:
    """``C_2`` of ``L E(T_L - T)^2 = C_1 + C_2 / L + O(L^-2)`` for Gamma(k, lam) tokens (``k = 1``: the
    exponential law) at the tilt ``a`` (``3a < lam``): the delta method's second order,
    ``-2 E[Y^2 e] + 3 E[Y^2] E[e^2] + 6 E[Y e]^2`` with ``w = e^{aX} / E e^{aX}``, ``Y = w (X - T)``,
    ``e = w - 1``, from the moments ``E[e^{taX} X^j] = lam^k (k + j - 1)! / ((k - 1)! (lam - ta)^{k+j})``.
    Problem set 2's question 3 states ``2 |C_2| / L`` as its allowance for the bias (its hidden test
    computes ``C_2`` again, by quadrature)."""

    def moment(t, j):
        return (
            lam**k * math.factorial(k + j - 1) / (math.factorial(k - 1) * (lam - t * a) ** (k + j))
        )

    Z, T = moment(1, 0), moment(1, 1) / moment(1, 0)

    def square(t):  # E[w^t (X - T)^2]
        return (moment(t, 2) - 2 * T * moment(t, 1) + T * T * moment(t, 0)) / Z**t

    c1 = square(2)
    cross = (moment(2, 1) - T * moment(2, 0)) / Z**2
    return -2 * (square(3) - c1) + 3 * c1 * (moment(2, 0) / Z**2 - 1) + 6 * cross**2


def _gamma_constant_texts(k: int, lam: float) -> dict[str, str]:
    """Set 2's questions 1, 1a, 1b and 3 for the tokens of set 1's question 2, Gamma(k, lam) (``k = 1``,
    the default sets: the exponential law): the function's body, the public checks' values, the model
    answer and the simulation's draws. A variant (``k`` 2 or 3) asks for another closed form, which the
    public solution of the default set does not give."""
    at_minus = Fraction(4, 3) ** k * k * (4 + k) / 36  # C_1(-lam) lam^2 = (4/3)^k k (4 + k) / 36
    common = {
        "q1_law": _gamma_texts(k, lam)["q2_law"],
        "q1_var": f"{k} / lambda^2",
        "q1_at_minus": f"{at_minus.numerator} / ({at_minus.denominator} lambda^2)",
        "q1_at_minus_num": at_minus.numerator,
        "q1_at_minus_den": at_minus.denominator,
        "q3_T": f"T(a) = {k} / (lambda - a)",
    }
    if k == 1:
        return {
            **common,
            "q1_name": "Exp(lambda)",
            "q1_solution": (
                "    # T_L = (mean of x e^{ax}) / (mean of e^{ax}); to first order T_L - T = mean of e^{ax}(x - T) / E e^{ax},\n"
                "    # so C_1 = E[e^{2aX}(X - T)^2] / (E e^{aX})^2 with T = 1/(lam - a), E e^{aX} = lam/(lam - a). The\n"
                "    # numerator is finite iff 2a < lam: with c = lam - 2a it is lam (2/c^3 - 2T/c^2 + T^2/c), and\n"
                "    # C_1 = (lam^2 - 2 a lam + 2 a^2) / (lam (lam - 2a)^3).\n"
                f"    lam = {lam}\n"
                "    if a >= lam / 2:\n"
                "        return math.inf\n"
                "    return (lam * lam - 2 * a * lam + 2 * a * a) / (lam * (lam - 2 * a) ** 3)"
            ),
            "q1a_model": (
                r"whose limits are $N$ and $Z = \mathbb E\,e^{aX} = \lambda/(\lambda - a)$, with $T = N/Z = 1/(\lambda - a)$. To"
                "\n"
                r"first order, $T_L - T = \big((\bar N - N) - T(\bar Z - Z)\big)/Z = \frac1L\sum_i e^{ax_i}(x_i - T)/Z$, a mean"
                "\n"
                r"of centred terms, so $C_1 = \mathbb E[e^{2aX}(X - T)^2]/Z^2$. With $c = \lambda - 2a$, $\mathbb E[e^{2aX}X^j] ="
                "\n"
                r"\lambda\,j!/c^{j+1}$, finite iff $a < \lambda/2$; then the numerator is $\lambda(2/c^3 - 2T/c^2 + T^2/c)$ and"
                "\n"
                r"$C_1(a) = \dfrac{\lambda^2 - 2a\lambda + 2a^2}{\lambda(\lambda - 2a)^3}$ for $a < \lambda/2$, infinite for"
                "\n"
                r"$\lambda/2 \le a < \lambda$."
            ),
            "q1b_tail": r"$P(e^{aX} > t) = t^{-\lambda/a}$",
            "q3_draw": "`torch.empty(n, L, 1).exponential_(lam, generator=g)`",
            "q3_draw_short": "torch.empty(n, L, 1).exponential_(lambda, generator=g)",
            "q3_tokens": "tokens = torch.empty(n, L, 1).exponential_(lam, generator=g)",
            "q3_limit": "1 / (lam - a)",
        }
    return {
        **common,
        "q1_name": f"Gamma({k}, lambda)",
        "q1_solution": (
            "    # T_L = (mean of x e^{ax}) / (mean of e^{ax}); to first order T_L - T = mean of e^{ax}(x - T) / E e^{ax},\n"
            "    # so C_1 = E[e^{2aX}(X - T)^2] / Z^2 with Z = E e^{aX} = (lam/(lam - a))^k and T = k/(lam - a). The\n"
            "    # Gamma density times e^{2ax} is (lam/c)^k times the Gamma(k, c) density, c = lam - 2a: finite iff\n"
            "    # 2a < lam, and then E[e^{2aX}(X - T)^2] = (lam/c)^k (k/c^2 + (k/c - T)^2).\n"
            f"    k, lam = {k}, {lam}\n"
            "    if a >= lam / 2:\n"
            "        return math.inf\n"
            "    c, T = lam - 2 * a, k / (lam - a)\n"
            "    return ((lam - a) ** 2 / (lam * c)) ** k * (k / c**2 + (k / c - T) ** 2)"
        ),
        "q1a_model": (
            r"whose limits are $N$ and $Z = \mathbb E\,e^{aX} = \big(\lambda/(\lambda - a)\big)^k$, with $T = N/Z = k/(\lambda - a)$."
            "\n"
            r"To first order, $T_L - T = \big((\bar N - N) - T(\bar Z - Z)\big)/Z = \frac1L\sum_i e^{ax_i}(x_i - T)/Z$, a"
            "\n"
            r"mean of centred terms, so $C_1 = \mathbb E[e^{2aX}(X - T)^2]/Z^2$. With $c = \lambda - 2a$, $e^{2ax}$ times the"
            "\n"
            r"density is $(\lambda/c)^k$ times the $\mathrm{Gamma}(k, c)$ density, finite iff $a < \lambda/2$; that law has mean"
            "\n"
            r"$k/c$ and variance $k/c^2$, so the numerator is $(\lambda/c)^k\big(k/c^2 + (k/c - T)^2\big)$ and, with"
            "\n"
            rf"$k/c - T = ka/\big(c(\lambda - a)\big)$, here with $k = {k}$:"
            "\n"
            r"$C_1(a) = \Big(\dfrac{(\lambda - a)^2}{\lambda(\lambda - 2a)}\Big)^k\,\dfrac{k\big((\lambda - a)^2 + ka^2\big)}{(\lambda - 2a)^2(\lambda - a)^2}$"
            "\n"
            r"for $a < \lambda/2$, infinite for $\lambda/2 \le a < \lambda$."
        ),
        "q1b_tail": r"$P(e^{aX} > t) = t^{-\lambda/a}$ up to a power of $\log t$",
        "q3_draw": (
            f"`torch.empty(n, L, {k}).exponential_(lam, generator=g).sum(-1, keepdim=True)` (a token of the "
            f"Gamma law of integer shape $k = {k}$ is the sum of {k} independent exponential ones of rate $\\lambda$)"
        ),
        "q3_draw_short": f"torch.empty(n, L, {k}).exponential_(lambda, generator=g).sum(-1, keepdim=True)",
        "q3_tokens": f"tokens = torch.empty(n, L, {k}).exponential_(lam, generator=g).sum(-1, keepdim=True)",
        "q3_limit": f"{k} / (lam - a)",
    }


def _atom(x: float) -> str:
    """The exponent ``x a`` of ``e^{x a}`` in LaTeX: ``a``, ``-a``, ``2a``."""
    k = int(x)
    return {1: "a", -1: "-a"}.get(k, f"{k}a")


def parameters(variant: int | None = None) -> dict[str, dict]:
    """The values of every set's placeholders: the defaults, or those of ``variant`` (a seed)."""
    x = _inputs(None if variant is None else random.Random(variant))
    lam = x["lam"]

    def scaled(ms):
        return tuple(round(m * lam, 6) for m in ms)

    title = (
        "" if variant is None else " (variant)"
    )  # not the seed: with it, anyone can rebuild the key
    x1, x2, p1, tilt = x["ps1_law"]
    k = x["ps1_shape"]
    p2 = round(1 - p1, 10)
    a, L, sim_seed = round(x["ps2_sim"][0] * lam, 6), x["ps2_sim"][1], x["ps2_sim"][2]
    return {
        "ps1_measures": {
            "variant": title,
            "lam": lam,
            "q1_seed_c2": x["ps1_seeds"][0],
            "q1_seed_c3": x["ps1_seeds"][1],
            "q1_scale": x["ps1_scale"][0],
            "q1_shift": x["ps1_scale"][1],
            "q2_tilts": scaled(x["ps1_tilts"]),
            "q2_infinite": scaled(x["ps1_infinite"]),
            "q2_edge": round(0.99 * lam, 6),
            "shape": k,
            **_gamma_texts(k, lam),
            "x1": x1,
            "x2": x2,
            "p1": p1,
            "p2": p2,
            "tilt": tilt,
            "mean": f"{round(p1 * x1 + p2 * x2, 10):g}",
            "var": f"{round(p1 * p2 * (x2 - x1) ** 2, 10):g}",
            "log_mgf": rf"\log({p1}e^{{{_atom(x1)}}} + {p2}e^{{{_atom(x2)}}})",
        },
        "ps2_concentration": {
            "variant": title,
            "lam": lam,
            "q1_tilts": scaled(x["ps2_tilts"]),
            "q1_infinite": scaled(x["ps2_infinite"]),
            "q1_edge": round(0.49 * lam, 6),
            "q2_seed": x["ps2_seed"],
            "q2_lmax": x["ps2_lmax"],
            "q3_a": a,
            "q3_L": L,
            "q3_seed": sim_seed,
            "q3_bias": f"{2 * abs(gamma_correction(lam, a, k)) / L:.2g}",
            "shape": k,
            **_gamma_constant_texts(k, lam),
        },
        "ps3_regression": {
            "variant": title,
            "q1_seed": x["ps3_seeds"][0],
            "q1_dims": x["ps3_dims"][0],
            "q2_seed": x["ps3_seeds"][1],
            "q2_dims": x["ps3_dims"][1],
            # question 3 takes question 2's dimensions and a seed of its own derived from question 2's
            "q3_seed": x["ps3_seeds"][1] + 1,
            "q3_dims": x["ps3_dims"][1],
            "q4_seed": x["ps3_seeds"][2],
            "q4_cases": x["ps3_cases"],
        },
    }


def render(text: str, values: dict, name: str = "set") -> str:
    """Fill the placeholders ``{{name}}`` (a string as it is, a number or tuple by ``repr``) and
    ``{{name:fmt}}`` (``format(value, fmt)``); a placeholder without a value, or a value no placeholder
    uses, is an error."""
    used = set()

    def fill(m: re.Match) -> str:
        key, fmt = m["name"], m["fmt"]
        if key not in values:
            raise SystemExit(f"problem_sets: {name} has a placeholder {{{{{key}}}}} with no value")
        used.add(key)
        value = values[key]
        if fmt:
            return format(value, fmt)
        return value if isinstance(value, str) else repr(value)

    out = PLACEHOLDER.sub(fill, text)
    unused = sorted(set(values) - used)
    if unused:
        raise SystemExit(f"problem_sets: {name} has no placeholder for {unused}")
    return out


def source(name: str, variant: int | None = None) -> str:
    """The text of set ``name`` with its numerical inputs filled in (the defaults, or ``variant``'s)."""
    return render((SOURCES / f"{name}.md").read_text(), parameters(variant)[name], name)


def read_notebook(name: str, variant: int | None = None):
    import jupytext

    return jupytext.reads(source(name, variant), fmt="md:myst")


# --- questions and rubrics -----------------------------------------------------------------------------


#: The autograded questions whose prompt prescribes the code (the calls to make, on the numbers it
#: gives): an honest answer is the solution's token for token, so grade_all.py does not name code
#: there as the solution's (``prescribed`` in questions.json); set 1's question 3 names
#: ``sl.EmpiricalMeasure`` and ``sl.attention_limit``, and a lecturer's answer with them scored 1.00.
PRESCRIBED_CODE = {"ps1_measures": ("q3",)}


def questions(name: str, variant: int | None = None) -> list[dict]:
    """Each question's ``name``, ``points`` and ``manual`` flag, from the source's question configs,
    and ``prescribed`` (:data:`PRESCRIBED_CODE`)."""
    import yaml

    out = []
    for m in QUESTION.finditer(source(name, variant)):
        cfg = yaml.safe_load(m.group("config"))
        out.append(
            {
                "name": cfg["name"],
                "points": float(cfg["points"]),
                "manual": bool(cfg.get("manual")),
                "prescribed": cfg["name"] in PRESCRIBED_CODE.get(name, ()),
            }
        )
    return out


TEST_CONFIG = re.compile(r'""" # BEGIN TEST CONFIG\n(?P<config>.*?)""" # END TEST CONFIG', re.S)


def hidden_tests(name: str, variant: int | None = None) -> dict[str, list[tuple[float, str]]]:
    """Each autograded question's hidden tests: ``{question: [(points, what it checks), ...]}``, read
    from the source's test configs (their ``points`` and ``failure_message``)."""
    import yaml

    text, out = source(name, variant), {}
    starts = [
        (m.start(), yaml.safe_load(m.group("config"))["name"]) for m in QUESTION.finditer(text)
    ]
    for k, (start, question) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(text)
        for m in TEST_CONFIG.finditer(text, start, end):
            cfg = yaml.safe_load(m.group("config"))
            if cfg.get("hidden"):
                out.setdefault(question, []).append(
                    (float(cfg.get("points", 0)), str(cfg.get("failure_message", "")).strip())
                )
    return out


def rubric(name: str, variant: int | None = None) -> str:
    """The rubric page of a set: points per question, and each manual question with its model answer."""
    nb = read_notebook(name, variant)
    qs = {q["name"]: q for q in questions(name, variant)}
    title = (
        next(c.source for c in nb.cells if c.cell_type == "markdown").splitlines()[0].lstrip("# ")
    )
    lines = [
        f"# {title}: points and rubrics",
        "",
        "| question | points | graded |",
        "|---|---:|---|",
    ]
    lines += [
        f"| {q['name']} | {q['points']:g} | {'by hand (rubric below)' if q['manual'] else 'autograder'} |"
        for q in qs.values()
    ]
    total = sum(q["points"] for q in qs.values())
    auto = sum(q["points"] for q in qs.values() if not q["manual"])
    lines += [f"| **total** | **{total:g}** | {auto:g} by the autograder |", ""]
    tests = hidden_tests(name, variant)
    if tests:
        lines += [
            "## The autograded points, test by test",
            "",
            "Each hidden test earns its points or none; the last column is what it checks, its message "
            "when it fails: otter's results.json shows it to the grader, while the students' feedback "
            "(grade_all.py) says only how many hidden checks failed.",
            "",
            "| question | points | the hidden test checks (message when it fails) |",
            "|---|---:|---|",
        ]
        lines += [
            f"| {q} | {pts:g} | {msg.replace('|', PIPE)} |"  # a pipe, escaped in its table cell
            for q, rows in tests.items()
            for pts, msg in rows
        ]
        lines += [""]
    current, inside = None, False
    for cell in nb.cells:
        src = cell.source.strip()
        if cell.cell_type == "raw" and src.startswith("# BEGIN QUESTION"):
            current = re.search(r"name:\s*(\S+)", src).group(1)
        elif cell.cell_type == "raw" and src == "# BEGIN SOLUTION" and qs[current]["manual"]:
            inside = True
            lines += [f"## {current} ({points_label(qs[current]['points'])}, by hand)", ""]
        elif cell.cell_type == "raw" and src == "# END SOLUTION":
            inside = False
        elif inside and cell.cell_type == "markdown":
            lines += [cell.source.strip(), ""]
    return "\n".join(lines)


SETUP_INSTALL = re.compile(r'("git\+[^"@]+)@main"')


def pin_setup(nb, commit: str | None, name: str = "set"):
    """Point the setup cell's install of softlin at ``commit`` (in place; ``None`` keeps ``@main``)."""
    setup = [c for c in nb.cells if c.cell_type == "code" and SETUP_INSTALL.search(c.source)]
    if len(setup) != 1:
        raise SystemExit(f"problem_sets: {name} needs one setup cell installing softlin @main")
    if commit:
        cell = setup[0]
        cell.source = SETUP_INSTALL.sub(rf'\1@{commit}"', cell.source).replace(
            "# Setup:",
            f"# Built from commit {commit[:12]} of the book: softlin is installed at that commit, so that\n"
            "# the set and its library agree.\n# Setup:",
            1,
        )
    return nb


SOFTLIN_URL = re.compile(r'"(git\+[^"]+)"')
#: An extra index with torch's CPU build (about 200 MB, not PyPI's default with CUDA, several GB):
#: for the pin ``torch==2.13.0`` pip ranks its ``2.13.0+cpu`` above PyPI's ``2.13.0`` (a local version
#: sorts after its public one), and grading needs no GPU. A line of the zip's requirements.txt.
CPU_TORCH_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"
#: The torch the kit was built and tested with (requirements.txt's pin; a test keeps them equal), which
#: the README's install names: a later torch should do, this one is known to.
TORCH = "2.13.0"
AUTOGRADER_PACKAGES = (CPU_TORCH_INDEX, f"torch=={TORCH}", "scipy")


def add_requirements(nb, name: str = "set"):
    """Make the assignment config of ``nb`` (its ``# ASSIGNMENT CONFIG`` raw cell) list the packages the
    sets import, so that ``otter assign`` puts them in ``autograder.zip`` (in place; run after
    :func:`pin_setup`). otter's own requirements (otter-grader) are kept, and these are added: torch
    at :data:`TORCH`, the version the sets are tested with (from the CPU build's index,
    :data:`CPU_TORCH_INDEX`), scipy and ``softlin`` from the same URL and commit as the setup cell's install. They matter only
    where the zip builds its own environment (Gradescope); ``--grade`` uses this one."""
    configs = [
        c for c in nb.cells if c.cell_type == "raw" and c.source.startswith("# ASSIGNMENT CONFIG")
    ]
    if len(configs) != 1:
        raise SystemExit(f"problem_sets: {name} needs one raw cell '# ASSIGNMENT CONFIG'")
    if re.search(r"^requirements:", configs[0].source, re.M):
        raise SystemExit(
            f"problem_sets: {name} lists requirements in its assignment config; "
            "tools/problem_sets.py adds them (add_requirements)"
        )
    urls = {
        m.group(1)
        for c in nb.cells
        if c.cell_type == "code"
        for m in SOFTLIN_URL.finditer(c.source)
    }
    if len(urls) != 1:
        raise SystemExit(f"problem_sets: {name} needs one setup cell that pip installs softlin")
    packages = [*AUTOGRADER_PACKAGES, f"softlin @ {urls.pop()}"]
    configs[0].source = (
        configs[0].source.rstrip("\n")
        + "\nrequirements:\n"
        + "".join(f"  - {json.dumps(p)}\n" for p in packages)
    )
    return nb


GRADER = 'grader = otter.Notebook("{name}.ipynb")'
COLAB_SETUP = """\
# The public checks, for Colab or a renamed copy: run this cell as it is, nothing to read in it. (There
# the kernel cannot see this notebook's metadata, where the checks are kept; this copy goes to a folder.)
{checks_name} = "{packed}"
import os

if "google.colab" in sys.modules or not os.path.exists("{name}.ipynb"):
    import base64, json, zlib

    os.makedirs("{folder}", exist_ok=True)
    for _q, _test in json.loads(zlib.decompress(base64.b64decode({checks_name}))).items():
        with open(os.path.join("{folder}", _q + ".py"), "w") as _f:
            _f.write("OK_FORMAT = True\\n\\ntest = " + repr(_test) + "\\n")
    grader = otter.Notebook(tests_dir="{folder}")
else:
    grader = otter.Notebook("{name}.ipynb")"""


def colab_folder(name: str) -> str:
    """The folder, next to the kernel's working directory, where a student notebook under Colab writes
    its public checks."""
    return f"{name}_checks"


def pack_checks(tests: dict) -> str:
    """The public checks of a student notebook (its ``metadata.otter.tests``) as one ASCII string."""
    import base64
    import zlib

    return base64.b64encode(zlib.compress(json.dumps(tests, sort_keys=True).encode(), 9)).decode()


def unpack_checks(packed: str) -> dict:
    import base64
    import zlib

    return json.loads(zlib.decompress(base64.b64decode(packed)))


def add_colab_checks(notebook: Path, name: str) -> None:
    """Make the student notebook ``notebook`` of set ``name`` check answers under Colab too (in place).

    otter-grader 7 reads a notebook's public checks from its metadata only when it can open the notebook
    file; under Colab it refuses metadata checks and requires a folder of test files, and the kernel's
    working directory holds neither the notebook nor such a folder. So the setup cell's
    ``grader = otter.Notebook(...)`` line becomes: under Colab, or where the notebook's file is not in the
    working directory under its own name (a copy saved as ``smith_ps1.ipynb``, or ``ps1_measures (1).ipynb``
    as a browser saves it), write the public checks (carried, packed, in the cell itself) to
    :func:`colab_folder` and load them from there; elsewhere, the line as it was.
    Only public checks are packed: a hidden one in the metadata is an error."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    tests = nb.metadata.get("otter", {}).get("tests")
    if not tests:
        raise SystemExit(f"problem_sets: {notebook} carries no checks in its metadata")
    hidden = [
        q
        for q, spec in tests.items()
        for suite in spec.get("suites", [])
        for case in suite.get("cases", [])
        if case.get("hidden")
    ]
    if hidden:
        raise SystemExit(f"problem_sets: {notebook} carries hidden checks ({hidden})")
    line = GRADER.format(name=name)
    cells = [c for c in nb.cells if c.cell_type == "code" and line in c.source.splitlines()]
    if len(cells) != 1:
        raise SystemExit(f"problem_sets: {name} needs one setup cell with the line {line!r}")
    block = COLAB_SETUP.format(
        checks_name="PUBLIC_CHECKS",
        packed=pack_checks(dict(tests)),
        folder=colab_folder(name),
        name=name,
    )
    cells[0].source = "\n".join(block if ln == line else ln for ln in cells[0].source.splitlines())
    unlock(nb)
    nbformat.write(nb, notebook)


def unlock(nb) -> int:
    """Let students edit every cell of the notebook ``nb`` (in place; returns how many were locked).

    otter assign 7 marks the cells of a question block ``"editable": false`` (and ``"deletable": false``),
    the answer cells among them; Jupyter Notebook and JupyterLab enforce the flag, so a student could not
    type an answer there (Colab and VS Code ignore it). The flag goes; ``deletable`` stays, so that the
    cells the grader looks for are not deleted by mistake."""
    locked = 0
    for cell in nb.cells:
        if cell.metadata.get("editable") is False:
            del cell.metadata["editable"]
            locked += 1
    return locked


# --- building, publishing, grading ---------------------------------------------------------------------


def build(
    name: str,
    out: Path = OUT,
    commit: str | None = None,
    variant: int | None = None,
    run_tests: bool = True,
) -> Path:
    """Run ``otter assign`` on one set; return its output folder. ``commit``: where the setup cell
    installs softlin (default: the checkout's ``HEAD``; ``""`` keeps ``@main``); ``variant``: the seed of
    the numerical inputs (default: the sources' defaults); ``run_tests=False`` skips otter's run of the
    tests on the solution, and the solution sheet (the student version is the same; :func:`publish`
    uses it)."""
    import nbformat
    from otter.assign import main as otter_assign

    master_dir = out / "masters"
    master_dir.mkdir(parents=True, exist_ok=True)
    nb = read_notebook(name, variant)
    nb.metadata.pop("jupytext", None)
    pin_setup(nb, built_from() if commit is None else (commit or None), name)
    add_requirements(nb, name)
    master = master_dir / f"{name}.ipynb"
    nbformat.write(nb, master)
    result = out / name
    shutil.rmtree(result, ignore_errors=True)
    with local_kernels():
        otter_assign(str(master), str(result), no_pdfs=True, no_run_tests=not run_tests)
    student = result / "student" / f"{name}.ipynb"
    autograder = result / "autograder" / "autograder.zip"
    for stamped in (result / "autograder").glob(f"{name}-autograder_*.zip"):
        stamped.rename(autograder)  # otter names it by the time of the build
    for path in (student, autograder):
        if not path.exists():
            raise SystemExit(f"problem_sets: otter assign wrote no {path}")
    add_git(autograder)
    add_colab_checks(student, name)
    (result / "rubric.md").write_text(rubric(name, variant))
    if run_tests:  # the site's build (publish) wants only the student version
        solution_sheet(result, name)
    # the questions, their points and which are graded by hand, for the shipped grade_all.py's gradebook
    (result / "questions.json").write_text(json.dumps(questions(name, variant), indent=1) + "\n")
    return result


#: Lines of the solution notebook that mark otter's solution blocks, dropped from the solution sheet.
SOLUTION_MARK = re.compile(r"^\s*# (BEGIN|END) SOLUTION.*\n?", re.M)


def solution_sheet(result: Path, name: str) -> list[Path]:
    """Write the set's solution sheet for students, to hand out after the deadline:
    ``result/solutions/NAME-solutions.ipynb`` and ``.html``, from the solution notebook that
    ``otter assign`` wrote (``result/autograder/NAME.ipynb``). It keeps the questions, the code that
    answers each computation and the model answer of each question graded by hand, and drops what
    is the grader's: the tests (public and hidden, in the notebook's metadata), the ``grader.check``
    cells, otter's solution markers and answer cells, and the grading tool in the setup cell, which
    still installs softlin, so that the sheet runs top to bottom in Colab or Jupyter. The HTML
    (nbconvert's ``lab`` template, with the book's MathJax beside the sets: :func:`local_mathjax`)
    is to read in a browser or post on a course page. Both are executed (nbclient, in the sheet's
    folder), so that each computation shows its numbers (the sources' lines marked ``# SOLUTION NO
    PROMPT``, which otter leaves out of the student version, print the answer at a few inputs); a cell
    that raises stops the build, naming it. Return both paths."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(result / "autograder" / f"{name}.ipynb", as_version=4)
    nb.metadata = nbformat.NotebookNode(
        {k: v for k, v in nb.metadata.items() if k in ("kernelspec", "language_info")}
    )
    cells = []
    for cell in nb.cells:
        src = cell.source
        tags = cell.metadata.get("tags", [])
        if "otter_answer_cell" in tags or re.match(r"\s*grader\.check", src):
            continue
        if cell.cell_type == "markdown":
            src = re.sub(r"(---\s*)?To double-check your work.*", "", src, flags=re.S)
        if "otter_assign_solution_cell" in tags and src.startswith("**What a full-mark report"):
            # the report's example, calibration and anchors are the graders'
            src = (
                "*The report is marked on the six items its question lists, 0, ½ or 1 each; your "
                "feedback gives its mark and your grader's comments.*"
            )
        if cell.cell_type == "markdown" and src.startswith("**Name:**"):
            continue
        src = re.sub(r"<!-- (BEGIN|END) QUESTION -->\s*", "", src)
        if cell.cell_type == "code":
            src = SOLUTION_MARK.sub("", src)
            src = re.sub(r"\s+# SOLUTION( NO PROMPT)?$", "", src, flags=re.M)
            src = src.replace(' or importlib.util.find_spec("otter") is None', "")
            src = src.replace(" otter-grader==7.0.0", "")
            src = re.sub(r"^import otter\n|^grader = otter\.Notebook\(.*\)\n?", "", src, flags=re.M)
            src = src.replace(
                " and the grading tool where either is missing", " where it is missing"
            )
            src = src.replace(" where both are installed", " where it is installed")
            src = re.sub(r" Then load the checks of this problem set\.", "", src)
            cell.outputs, cell.execution_count = [], None
        if cell.cell_type == "code" and all(
            line.strip().startswith("#") or line.strip() in ("", "...") for line in src.splitlines()
        ):  # a cell left for the student's own code (the report's computation)
            continue
        if not src.strip():
            continue
        cell.source = src.rstrip()
        cell.metadata = nbformat.NotebookNode({})
        cells.append(cell)
    # the title, and the opening's first sentence (which session, which lessons): the rest of the
    # opening is about points, checks and handing in
    title, _, opening = cells[0].source.partition("\n")
    session = re.match(r"\s*(.+?\.)\s", opening + " ")
    cells[0].source = "\n".join(
        [
            f"{title}: solutions",
            "",
            *([session.group(1).replace("\n", " "), ""] if session else []),
            "The solutions, for after the deadline: the code that answers each computation, and the "
            "model answer and rubric of each question graded by hand. Run it top to bottom (its "
            "first cell installs softlin where it is missing), then try the functions on inputs of "
            "your own.",
        ]
    )
    nb.cells = cells
    if any("otter" in c.source or "SOLUTION" in c.source for c in cells if c.cell_type == "code"):
        raise SystemExit(f"problem_sets: {name}'s solution sheet still holds otter's markup")
    folder = result / "solutions"
    folder.mkdir(exist_ok=True)
    execute_sheet(nb, folder, name)
    sheet = folder / f"{name}-solutions.ipynb"
    nbformat.write(nb, sheet)
    page = folder / f"{name}-solutions.html"
    heading = title.lstrip("# ").strip()
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(
        nb, resources={"metadata": {"name": f"{heading}: solutions"}}
    )
    # no widgets here: require.js (from a CDN) is not needed
    body = re.sub(r'<script src="https://[^"]*require(\.min)?\.js"></script>', "", body)
    body = body.replace("</head>", f"<style>{SHEET_PRINT_CSS}</style>\n</head>", 1)
    page.write_text(local_mathjax(body, "../../mathjax/startup.js"))
    return [sheet, page]


#: A solution sheet printed from the browser: code and outputs wrap instead of running off the page
#: behind a scroll bar (JupyterLab's template keeps long lines on one line).
SHEET_PRINT_CSS = """@media print {
  .jp-InputArea-editor pre, .jp-OutputArea-output pre, .highlight pre {
    white-space: pre-wrap !important; overflow-wrap: anywhere; overflow: visible !important; }
  .jp-InputArea-editor, .jp-OutputArea-output, .highlight { overflow: visible !important; }
}"""


def execute_sheet(nb, folder: Path, name: str, timeout: float = 600) -> None:
    """Run the solution sheet ``nb`` in place, top to bottom, in ``folder`` (a kernel of the Python
    that builds, over IPC: grade_all.py's ``local_kernel_manager``, which its reruns use). A cell that raises stops the build (SystemExit
    naming set ``name``, the cell and the error): a sheet handed to students must run."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(folder)}},
        kernel_manager_class=grade_all_module().local_kernel_manager(),
    )
    try:
        client.execute()
    except CellExecutionError as exc:
        raise SystemExit(
            f"problem_sets: {name}'s solution sheet raises when run: {str(exc)[-1500:]}"
        ) from None


#: Where a page whose own copy of MathJax is missing (the HTML alone, posted on a course page) takes it.
MATHJAX_CDN = "https://cdn.jsdelivr.net/npm/mathjax@3.2.2/es5/tex-chtml.js"
#: The book's MathJax (``tools/fetch_vendor.py``), which :func:`add_mathjax` copies beside the sets.
MATHJAX = (ROOT / "mathjax") if IN_KIT else (ROOT / "book" / "_vendor" / "mathjax")


def local_mathjax(page: str, startup: str) -> str:
    """nbconvert's ``page`` with MathJax 3 from ``startup`` (a path relative to the page: the copy
    :func:`add_mathjax` puts beside the sets, so that the formulas show offline) in place of the
    template's MathJax 2 from a CDN; where that copy is missing, MathJax 3 comes from
    :data:`MATHJAX_CDN`. Inline math between ``$`` signs, as the sets write it."""
    start, end = "<!-- Load mathjax -->", "<!-- End of mathjax configuration -->"
    if start not in page or end not in page:
        raise SystemExit("problem_sets: nbconvert's page has no MathJax block to replace")
    config = {
        "loader": {"load": ["input/tex", "output/chtml"]},
        "tex": {
            "inlineMath": [["$", "$"], ["\\(", "\\)"]],
            "displayMath": [["$$", "$$"], ["\\[", "\\]"]],
            "processEscapes": True,
        },
    }
    fallback = (
        "var s = document.createElement('script'); "
        f"s.src = '{MATHJAX_CDN}'; document.head.appendChild(s);"
    )
    block = (
        f"<script>window.MathJax = {json.dumps(config)};</script>\n"
        f'<script defer src="{startup}" onerror="{fallback}"></script>'
    )
    head, rest = page.split(start, 1)
    return head + block + rest.split(end, 1)[1]


def add_mathjax(out: Path) -> Path | None:
    """A copy of the book's MathJax in ``out/mathjax/``, for the solution sheets' HTML (and in a built
    kit, for a variant's); its folder, or ``None`` where there is none to copy."""
    if not MATHJAX.is_dir() or MATHJAX.resolve() == (out / "mathjax").resolve():
        return None
    shutil.rmtree(out / "mathjax", ignore_errors=True)
    return Path(shutil.copytree(MATHJAX, out / "mathjax"))


@contextlib.contextmanager
def local_kernels():
    """Inside, every kernel that Jupyter starts (``otter assign`` runs each solution in one) talks to its
    client over IPC, Unix sockets in Jupyter's private runtime folder, instead of TCP on localhost, over
    which ipykernel warns, once per kernel, that the traffic is unencrypted (as tools/build_book.py's
    ``LocalKernelManager``; otter builds its own executor, so the default of jupyter_client's
    ``transport`` is set for the duration, and put back). On Windows, where ZeroMQ has no IPC, TCP stays."""
    import zmq
    from jupyter_client.connect import ConnectionFileMixin

    trait = ConnectionFileMixin.class_traits()["transport"]
    before = trait.default_value
    trait.default_value = "ipc" if zmq.has("ipc") else before
    try:
        yield
    finally:
        trait.default_value = before


def add_git(autograder: Path) -> None:
    """Add ``git`` (conda-forge) to the conda dependencies of ``autograder.zip``'s environment.yml, in
    place: pip needs it to install softlin from its git URL where the zip builds its environment
    (Gradescope), and otter-grader's setup script installs none."""
    import yaml

    with zipfile.ZipFile(autograder) as z:  # entries keep their ZipInfo (permissions, times)
        members = [(i, z.read(i.filename)) for i in z.infolist()]
    for k, (info, data) in enumerate(members):
        if info.filename == "environment.yml":
            env = yaml.safe_load(data)
            deps = env["dependencies"]
            if "git" not in deps:
                deps.insert(next(i for i, d in enumerate(deps) if d == "pip"), "git")
            members[k] = (info, yaml.safe_dump(env, sort_keys=False).encode())
    with zipfile.ZipFile(autograder, "w", zipfile.ZIP_DEFLATED) as z:
        for info, data in members:
            z.writestr(info, data)


#: Where Gradescope unpacks ``autograder.zip`` (otter-grader's setup script reads its files there).
AUTOGRADER_SOURCE = "/autograder/source"


def bundle_wheel(autograder: Path, wheel: Path) -> None:
    """Put ``wheel`` (softlin, built from this checkout) into ``autograder.zip`` and make the zip's
    environment.yml install softlin from it (``/autograder/source/<wheel>``, where Gradescope unpacks the
    zip) instead of from the repository's URL, in place: a kit rebuilt from a fork, or from changes not
    pushed anywhere, grades on Gradescope with its own softlin. Raises SystemExit if the environment
    lists no softlin."""
    import yaml

    with zipfile.ZipFile(autograder) as z:
        members = [(i, z.read(i.filename)) for i in z.infolist() if not i.filename.endswith(".whl")]
    for k, (info, data) in enumerate(members):
        if info.filename == "environment.yml":
            env = yaml.safe_load(data)
            pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
            found = [i for i, req in enumerate(pip) if req.startswith("softlin")]
            if len(found) != 1:
                raise SystemExit(f"problem_sets: {autograder} lists softlin {len(found)} times")
            pip[found[0]] = f"{AUTOGRADER_SOURCE}/{wheel.name}"
            members[k] = (info, yaml.safe_dump(env, sort_keys=False).encode())
    with zipfile.ZipFile(autograder, "w", zipfile.ZIP_DEFLATED) as z:
        for info, data in members:
            z.writestr(info, data)
        z.write(wheel, wheel.name)
    loose = autograder.parent / "requirements.txt"  # otter assign's list, beside the zip
    if loose.exists() and not loose.read_text().startswith("#"):
        loose.write_text(
            f"# otter assign's list. autograder.zip does not use this file: its environment.yml "
            f"installs softlin from the wheel the zip carries ({wheel.name}).\n" + loose.read_text()
        )


def points(name: str, variant: int | None = None) -> tuple[float, float]:
    """(total, autograded) points of a set."""
    qs = questions(name, variant)
    return sum(q["points"] for q in qs), sum(q["points"] for q in qs if not q["manual"])


def softlin_requirement(built: Path) -> str:
    """The pip requirement of softlin that a built set's autograder lists (URL at its commit)."""
    req = built / "autograder" / "requirements.txt"
    lines = req.read_text().splitlines() if req.exists() else []
    return next((x.strip() for x in lines if x.startswith("softlin")), "softlin")


#: The oral-check bank (a question per derivation, each with a follow-up that changes one input, and a
#: scoring rule), copied beside the sets' rubrics; the site does not show it.
ORAL_CHECKS = HERE / "oral_checks.md" if IN_KIT else ROOT / "course" / "oral_checks.md"
# the gradebook and student-safe feedback, shipped
GRADE_ALL = HERE / "grade_all.py" if IN_KIT else ROOT / "course" / "grade_all.py"
# the course grade under the default scheme, from the three gradebooks and the checks' marks, shipped
FINAL_GRADES = HERE / "final_grades.py" if IN_KIT else ROOT / "course" / "final_grades.py"
# the term's grading rehearsed on a mock class of three, in a few minutes, shipped
REHEARSE = HERE / "rehearse.py" if IN_KIT else ROOT / "course" / "rehearse.py"


#: The kit README's sandbox for ``grade_all.py`` (step 1): bubblewrap, run in the kit folder with the
#: grading ``python``; the whole filesystem read-only but ``graded/`` and a private /tmp, the home an
#: empty tmpfs (the Python install re-bound, even under it), no network, no capabilities, killed with
#: its parent. Tested on Debian 12 with bubblewrap 0.8.0 (tests/test_kit_problem_sets.py runs it on a
#: hostile notebook where bwrap is installed).
SANDBOX = (
    "mkdir -p graded && P=$(python -c 'import sys; print(sys.prefix)') "
    "B=$(python -c 'import sys; print(sys.base_prefix)') && "
    'bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs "$HOME" '
    '--ro-bind "$B" "$B" --ro-bind "$P" "$P" --ro-bind "$PWD" "$PWD" '
    '--bind "$PWD/graded" "$PWD/graded" --chdir "$PWD" '
    "--unshare-all --new-session --die-with-parent --cap-drop ALL "
    '"$P/bin/python3" grade_all.py ps1_measures set1/'
)


def readme(names: list[str], out: Path = OUT, variant: int | None = None) -> None:
    which = "" if variant is None else f" (variant {variant}, drawn from the seed {variant})"
    lines = [
        f"# Problem sets{which}",
        "",
        "The term week by week, each step with its command, is the book's *The lecturer's guide* (two "
        "pages, `handouts/instructor/lecturer_guide.pdf`); this file is the reference for the commands.",
        "",
        "| set | points | autograded | by hand | student version | autograder |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name in names:
        total, auto = points(name, variant)
        lines.append(
            f"| {name} | {total:g} | {auto:g} | {total - auto:g} | {name}/student/{name}.ipynb | "
            f"{name}/autograder/autograder.zip |"
        )
    grade = "--grade" if variant is None else f"--variant {variant} --grade"
    softlin = softlin_requirement(out / names[0]) if names else "softlin"
    lines += [
        "",
        "## The commands, in this folder",
        "",
        "| when | command |",
        "|---|---|",
        f"| once | `pip install torch=={TORCH} --index-url https://download.pytorch.org/whl/cpu`, then "
        "`pip install otter-grader==7.0.0 ipykernel torch scipy ./softlin-*.whl` (that index out of reach: "
        "step 1 below says how to bring torch's wheel) |",
        "| before term: rehearse the grading | `python rehearse.py`: a mock class of three (ada, ben, "
        "cleo) graded through the whole term, each command below run in turn and printed, then the "
        "hard cases (a notebook that cannot be read, graded `--by-hand`; a mark out of range; a "
        "late copy; a resubmission; a second reader; sets not handed in), in three to six minutes; "
        "it says whether every point and grade is as expected, and leaves the gradebooks, "
        "feedback, collated answers and course grades in `rehearsal/` (the hard cases' in "
        "`rehearsal/hard/`) to read |",
        "| a ten-minute check on set N | `python written_check.py --seed SEED --set N` (SEED: "
        "private, eight digits, new each time) |",
        "| after set N's deadline | `python grade_all.py NAME setN/ --collate --completion` (set 3: "
        "add `--except-question q5`) |",
        "| after marking by hand | `python grade_all.py NAME setN/ --reuse` (the feedback, with your "
        "marks); return it with the set's solution sheet, `NAME/solutions/` |",
        "| part-way, and at the end | `python final_grades.py graded/ --interim`; `python "
        "final_grades.py graded/` (other weights than 30/40/30: `--weights 40,30,30`) |",
        *(
            ["| sets of your own numbers | `python variants/problem_sets.py --variant SEED` |"]
            if variant is None
            else []
        ),
        "",
        "The sections below are the reference for each row of that table.",
        "",
        "## 1. Install, once",
        "",
        "- Grading needs no GPU and no repository. On Linux, first "
        f"`pip install torch=={TORCH} --index-url https://download.pytorch.org/whl/cpu` (the torch "
        "these sets were tested with; it avoids the multi-GB CUDA build). Where that index is out of "
        "reach, `pip install` a CPU wheel of torch fetched on a machine that reaches it, with "
        f"`pip download torch=={TORCH} --no-deps --index-url https://download.pytorch.org/whl/cpu`.",
        "- Then otter, a Jupyter kernel and softlin at the commit these sets were built from, from the "
        "wheel beside this file: `pip install otter-grader==7.0.0 ipykernel torch scipy "
        "./softlin-*.whl` (or, with network, "
        f'`pip install otter-grader==7.0.0 ipykernel torch scipy "{softlin}"`).',
        "- **Students' code runs on your machine, as you.** On Linux, sandbox it with bubblewrap "
        "(`apt-get install bubblewrap`): from this folder, holding the submissions, with the "
        "`python` you grade with, run step 2's command thus (set 1):",
        "",
        "  ```bash",
        f"  {SANDBOX}",
        "  ```",
        "",
        "  It then has no network, an empty home, every other file read-only but `graded/` (the "
        "default `--out`) and a private `/tmp`, and stops with the command. It can still read files "
        "outside your home and your environment variables, write `graded/`, and use all memory: "
        "`(ulimit -v 4000000; COMMAND)` caps it at 4 GB. Tested on Debian 12, bubblewrap 0.8.0: the "
        "same points; a hostile notebook wrote nothing to your home or this folder, read no "
        "`~/.ssh`, opened no connection. On macOS or Windows: a Linux virtual machine or Docker "
        "(untested).",
        "",
        "## 2. Grade a set: `grade_all.py`",
        "",
        "`python grade_all.py NAME submissions/` runs otter on every notebook of `submissions/`, with the "
        "same public and hidden tests as the autograder (no Docker). It writes:",
        "",
        "- `graded/grades-NAME.csv`, the gradebook: the autograded points per question, an empty "
        "column per question graded by hand for you to fill in, then the totals (`manual_awarded` "
        "and `total_awarded`, added up once every hand mark of a row is in) and last `comments`, "
        "your words to the student, which the feedback quotes (the questions come from "
        "NAME/questions.json). Running again (a late submission, or `--reuse` after marking) merges "
        "into it, keeping the other rows and every hand mark you entered. A spreadsheet may save it "
        "with semicolons and decimal commas (`1,5`): it is read, and written back, so.",
        "- `graded/feedback/NAME/FILE.md` per student, to return: per question, the points, the "
        "messages of the failed public checks (those the student can run with `grader.check`) and "
        "only how many hidden checks failed, with no hidden test's message, input or expected value; "
        "the errors the student's code raised in its checks (a `NameError` when a cell stopped "
        "before defining a function); and the hand marks and comments already in the gradebook.",
        "- with `--collate`, `graded/by-question/NAME-qN.md` per question graded by hand (and "
        "`NAME-qN.html`, the same page for a browser, its formulas typeset): its model "
        "answer and rubric (folded), then every student's answer to it (with the figures it drew, "
        "and any error it raised), to mark it across the class. It runs each notebook again first "
        "and shows what its code prints now: a cell that raises on rerun, or whose saved output it "
        "does not reproduce (the report's computation, say), is flagged above the answer "
        "(`--no-rerun` shows the saved outputs alone). The reruns take about as long as otter's "
        "own runs (set 3: about a minute a notebook, more where a report computes for minutes): "
        "`--no-rerun` saves that time for a large class.",
        "",
        "A notebook that runs past `--timeout` seconds (default 900) is stopped, named and left out, "
        "like one otter cannot read; the exit status is then 1. Grade it by hand: add `--by-hand "
        "FILE.ipynb` to this run (`graded/by-hand-NAME.json` remembers it for later runs; delete "
        "its name there to have otter grade a new version). It is then never run; its row in the gradebook is yours, every question's column (an autograded "
        "question's points by its rubric), and its feedback is written from that row once you run "
        "again.",
        "",
        "**A late submission**: put it in the set's folder with the others and run the same command "
        "on it alone (`python grade_all.py NAME setN/FILE.ipynb --collate --completion`). Its row "
        "joins the gradebook, and its answers are compared with those of the class graded before "
        "(`graded/submissions-NAME.json` records where they are), so a late copy is flagged.",
        "",
        'Two messages of otter are expected: "No log found with which to verify student scores" is '
        "harmless here (these sets do not ask otter to log the students' runs; the points are those of "
        'the tests it has just run), and its summary\'s "Public Tests" row reads NaN: the public '
        "checks carry no points (all of a question's points are on its hidden tests).",
        "",
        "## 3. Mark the written answers",
        "",
        "- **For correctness**: each set's rubric.md gives the points and the rubric of each question "
        "graded by hand; mark from the collated files, enter the marks in the gradebook, then "
        "`python grade_all.py NAME submissions/ --reuse` rewrites the feedback with them (from the "
        "kept results, without running otter again).",
        "- **For completion** (the default grading): `--completion` fills each empty hand mark with "
        "the question's full points where the student wrote an answer, 0 where not, for you to read "
        "over. It leaves blank, and names, the answers to mark yourself:",
        "  - too short: under 15 words and formula symbols a point (45 for a 3-point question), one "
        "formula line at most, no code;",
        "  - off the point: fewer than two of the model answer's terms (\"I used autograd and it "
        'works"), or a phrase the rubric gives no credit ("softmax becomes linear for long '
        'prompts");',
        '  - unsure, however long: "not sure", "I don\'t know", "I think", "maybe", "TODO";',
        "  - a derivation with no formula (no `$`, `=`, `<`, `>` or code);",
        "  - a near-copy (also named by `--collate`): the model answer, half of it or more, or "
        "another student's answer. A flag is not a verdict.",
        "",
        "  Code for the autograded questions is compared too, with the solution's and the other "
        "students' (from 40 tokens of the student's own; not with the solution's on set 1's "
        "question 3, whose prompt gives the calls): code much alike is named, and keeps its points. "
        "The marks `--completion` enters reach the feedback only when you run `--reuse`, labelled "
        "*for completion: not checked for correctness*, with the rubric's criterion for full credit; "
        "marks already in the gradebook stay, so a late student's run leaves the others' alone "
        "(`graded/completion-NAME.json` records which marks are the pass's).",
        "- **Set 3's report** (question 5): add `--except-question q5`; its rubric marks it item by "
        "item in `graded/report-marks-ps3_regression.csv` (a row per reading, a second reader's in a "
        "row of its own, a notebook with no report a row of zeros, noted; q5 is the items' sum, or "
        "the readings' mean). Before the report's marks "
        "stand, talk with each author for five minutes "
        '(`oral-checks.md`, "Five minutes on the report"): an item they cannot explain gets 0 in '
        "every reading's row of the report sheet, with `talk` in its `note` column (which no "
        "feedback shows).",
        "",
        "## 4. The course grades: `final_grades.py`",
        "",
        "The default scheme: sets 30 %, the report 40 %, the two ten-minute checks 30 %.",
        "",
        "- Grade the three sets into the same folder (`graded/`, the default `--out`), naming each "
        "student's notebook the same in every set (`alice.ipynb`), and put the class list in "
        "`graded/roster.csv` (a `student` column of the same IDs: every student on it gets a row, "
        "and a notebook named otherwise is named).",
        "- `python final_grades.py graded/`: the first run writes `graded/checks.csv`, a row per "
        "student, for the checks' marks (0 to 4 each, or `excused`: the other check then carries "
        "the checks' weight); fill it in and run again. It writes `graded/course-grades.csv` (each "
        "part's points and percentage, and the course grade) and names every student whose grade "
        "still misses a mark (exit status 1). While a set has no gradebook, it names the set and "
        "exits with status 2.",
        "- Part-way through the term, `python final_grades.py graded/ --interim` writes "
        "`graded/interim-grades.csv`: the grade on the parts marked so far, each at its weight, and "
        "the share of the grade they make up (`counted_percent`).",
        "- Under the lighter load (set 3 handed out as its report alone), add `--set3-report-only`: "
        "the sets' part is then sets 1 and 2. The grades are percentages; "
        "`--letters A=90,B=80,C=70,D=60,F=0` (your institution's bands, the last at 0) adds a "
        "`letter` column; `--weights 40,30,30` changes the scheme.",
        "",
        "## Sets with other numbers",
        "",
        "The default sets' answers are public; what a variant guards against is on the site's grading "
        'page (`book/grading.html`, "Using the sets for grades"). To '
        "draw your own: pick a private seed (eight digits) and run `python variants/problem_sets.py "
        "--variant SEED` in this folder, with step 1's installs. It writes `variant-SEED/`, laid out "
        "like this folder (student versions, autograders, rubrics, README, and a written check drawn "
        "from the same seed), without the repository; hand out its student versions and grade with its "
        "`grade_all.py`. About a minute (otter runs each set's tests on its solution; should a seed's "
        "solution fail them, the command says so, writes nothing and exits with status 1: report the "
        "seed and pick another).",
        *written_check_lines(out, variant),
        "## What students get",
        "",
        "- student-versions.zip holds the three student notebooks and the softlin wheel: a set opened "
        "in the folder where the zip was unpacked installs softlin from that wheel, without GitHub "
        "(otter and torch still come from PyPI); in Colab, upload the wheel beside the notebook, or "
        "the setup cell installs softlin from the book's repository at the commit the set was built "
        "from.",
        "- **The solution sheets.** NAME/solutions/NAME-solutions.ipynb (and .html, to "
        "read in a browser: its formulas are typeset by the copy of MathJax in mathjax/, or from "
        "the network where the page travels without that folder) is the set with its answers: the "
        "code of each computation, and the model answer and rubric of each question graded by hand "
        "(set 3's report keeps only the six items its question lists). It holds no test, public or "
        "hidden, and runs top to bottom in Colab, or beside the softlin wheel of its folder without "
        "GitHub. Hand it out with the feedback, once the set's check is past (the checks' follow-ups "
        "build on the sets' derivations); a variant's sheet answers that variant, so do not reuse "
        "the variant after it.",
        "",
        "## Keep from students",
        "",
        "- the seeds of your variants and checks, and the checks' keys (written-check-key* and "
        "written-check-set*-key*, here and in each variant-SEED/);",
        "- the book's site folder (it holds every solution, folded); the student site does not;",
        "- otter's `results.json` files (in `graded/results/`) and `graded/hidden-checks-NAME.md` "
        "(each student's failed hidden checks, for you): they quote the hidden tests;",
        "- each set's rubric.md (the points per question and the rubrics of the questions graded by "
        "hand) and oral-checks.md, the bank of the oral check (a question per derivation, each with "
        "a follow-up that changes one input, and how to score them);",
        "- the solution notebook, to grade (it gets every autograded point; its written answers are "
        "the model answers, which `--completion` flags as copies), NAME/autograder/NAME.ipynb: its "
        "metadata carries the hidden tests (and set 3's, the report's rubric and its calibration). "
        "masters/ holds the sources `otter assign` reads (tests and solutions in raw cells), not "
        "notebooks to grade.",
        "",
        "## Elsewhere",
        "",
        "Each autograder.zip is also otter's Gradescope autograder (a Programming Assignment's "
        "autograder configuration); the book's page *Adapting and rebuilding the kit* says how to "
        "check it there first. "
        f"In the book's repository, `.venv/bin/python tools/problem_sets.py {grade} NAME FILE.ipynb` "
        "grades with the same tests and prints the points per question (`--csv grades.csv` writes a "
        "gradebook).",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


def written_check_lines(out: Path, variant: int | None) -> list[str]:
    """The README's paragraph on the written check (``tools/written_check.py``) built in ``out``."""
    pdf = (out / "written-check.pdf").exists()
    print_it = (
        "written-check.pdf is the sheet to print (from written-check.html, with headless Chromium)"
        if pdf
        else "print written-check.html from a browser (A4; written-check.pdf is printed too where "
        "headless Chromium is installed)"
    )
    if variant is None:
        inputs = (
            "- The default check (written-check.*): other numbers than the bank's follow-ups, but "
            "anyone rebuilds it and its key from the book's public sources: never hand out the default "
            "check for a grade; read it to see what a check looks like."
        )
    else:
        inputs = (
            f"- This build's check: its inputs are drawn from the seed {variant}, and every number of its "
            "key differs from the default build's key, so the public default key does not answer it; "
            "keep the seed private, as for the sets."
        )
    return [
        "",
        "## The written check",
        "",
        "What it is and when to give it: the site's grading page (`book/grading.html`).",
        "",
        "- The default grading's checks, one set at a time: `python written_check.py --seed SEED --set N` "
        "writes the ten-minute check on set N alone (one A4 page, 4 points: the whole check's "
        "question N for that seed), `written-check-setN.*` and its key `written-check-setN-key.*`; "
        "set 1's opens session 2 and set 2's session 3.",
        "- For a grade: pick a private seed (eight digits, that nobody can guess) and run "
        "`python written_check.py --seed SEED` in this folder (torch and the softlin wheel installed, "
        "as in step 1). It writes the seed's sheet and key into `written-check-SEED/` (`--out DIR` "
        "for another folder), the same files as `make problem-sets VARIANT=SEED` in the book's "
        "repository. Keep the seed and the key from students; the sheet does not print the seed.",
        "- The files: written-check.md and written-check.html, the sheet; written-check-key.md and "
        "written-check-key.html, each "
        "answer in full with the scoring guide (0 to 4 per question: 0 to 2 for part (a), the bank "
        f"question's derivation, 0 to 2 for parts (b) and (c)), for graders only; {print_it}.",
        inputs,
        "",
    ]


def zip_students(names: list[str], out: Path = OUT, flat: bool = False) -> Path:
    """``out/student-versions.zip`` with each set's student notebook (from ``out/psN_name/student/``,
    or from ``out/`` itself when ``flat``), and the softlin wheel of ``out`` when there is one: a
    set's setup cell installs it from its own folder, without GitHub."""
    target = out / "student-versions.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for name in names:
            notebook = out / f"{name}.ipynb" if flat else out / name / "student" / f"{name}.ipynb"
            z.write(notebook, f"{name}.ipynb")
        for wheel in sorted(out.glob("softlin-*.whl")):
            z.write(wheel, wheel.name)
    return target


DOWNLOADS = re.compile(
    r'<div id="problem-set-downloads" class="problem-set-downloads">.*?</div>', re.S
)


def publish(html_dir: Path) -> list[Path]:
    """Put the student versions of the sets (no solutions, no hidden tests) into the built site, in
    ``problem-sets/`` with softlin's wheel and a zip of them all, and list them on the instructor page (its
    ``<div id="problem-set-downloads">``); return the files written."""
    page = html_dir / "book" / "instructor.html"
    text = page.read_text(encoding="utf-8")
    if not DOWNLOADS.search(text):
        raise SystemExit(f'{page}: no <div id="problem-set-downloads"> to list the problem sets in')
    target = html_dir / "problem-sets"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    names, items = sets(), []
    with tempfile.TemporaryDirectory() as tmp:  # the autograders and solutions stay in here
        for n, name in enumerate(names, 1):
            built = build(name, Path(tmp), run_tests=False)
            shutil.copy2(built / "student" / f"{name}.ipynb", target / f"{name}.ipynb")
            total, auto = points(name)
            items.append(
                f'<li><a href="../problem-sets/{name}.ipynb" download>Problem set {n}</a>: '
                f"<code>{html.escape(name)}.ipynb</code>, {points_label(total)} ({auto:g} autograded)</li>"
            )
    wheel = build_wheel(target)  # the sets' setup cell installs it from their folder, offline
    zip_students(names, target, flat=True)
    items.append(
        '<li><a href="../problem-sets/student-versions.zip" download>The three sets</a>: '
        "<code>student-versions.zip</code>, with the <code>softlin</code> wheel that their setup "
        "cell installs when it lies beside them (no GitHub needed; in Colab, upload it to "
        "<em>Files</em>)</li>"
    )
    items.append(
        f'<li><a href="../problem-sets/{wheel.name}" download>The wheel alone</a>: '
        f"<code>{html.escape(wheel.name)}</code></li>"
    )
    block = (
        '<div id="problem-set-downloads" class="problem-set-downloads"><ul>'
        + "".join(items)
        + "</ul></div>"
    )
    page.write_text(DOWNLOADS.sub(lambda _: block, text, count=1), encoding="utf-8")
    return sorted(target.iterdir())


def grade(name: str, submission: Path, out: Path = OUT, variant: int | None = None) -> dict:
    """Grade one submission against the set's autograder (public and hidden tests), in this Python
    environment; return ``{"questions": {q: (awarded, possible)}, "auto": (awarded, possible),
    "manual_possible": {q: possible}, "failed": {q: [(hidden, message), ...]}}``: the autograded
    questions with their points awarded and possible, their totals, the points possible of each
    question graded by hand (nothing is awarded for those here: they are graded with the rubric), and
    each autograded question's failed checks, whether hidden and their failure messages (for the
    grader: the students' feedback quotes no hidden check's). ``out`` and ``variant`` must be those of
    the build."""
    from otter.api import grade_submission

    autograder = out / name / "autograder" / "autograder.zip"
    if not autograder.exists():
        raise SystemExit(f"{autograder} does not exist: build the set first (make problem-sets)")
    # The notebook's setup cell opens ``otter.Notebook("<name>.ipynb")``: grade a copy under that name,
    # so that a submission saved as alice.ipynb runs exactly as the student's own copy did.
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / f"{name}.ipynb"
        shutil.copyfile(submission, copy)
        results = grade_submission(str(copy), str(autograder), quiet=True)
    qs = {q["name"]: q for q in questions(name, variant)}
    scores, failed = {}, {}
    for q in qs.values():
        if q["manual"]:
            continue
        result = results.results.get(q["name"])
        scores[q["name"]] = (float(result.score) if result else 0.0, q["points"])
        failed[q["name"]] = [
            (bool(r.test_case.hidden), str(r.test_case.failure_message or "").strip())
            for r in (result.test_case_results if result else [])
            if not r.passed
        ]
    return {
        "questions": scores,
        "auto": (sum(s for s, _ in scores.values()), sum(p for _, p in scores.values())),
        "manual_possible": {q["name"]: q["points"] for q in qs.values() if q["manual"]},
        "failed": failed,
    }


def grade_all_module():
    """``course/grade_all.py`` as a module: it owns the gradebook's columns (it ships beside the built
    sets and runs without the repository, so the shared code lives there, and this script imports it)."""
    import importlib.util

    module = sys.modules.get("grade_all")
    if module is None or Path(getattr(module, "__file__", "")).resolve() != GRADE_ALL.resolve():
        spec = importlib.util.spec_from_file_location("grade_all", GRADE_ALL)
        module = importlib.util.module_from_spec(spec)
        sys.modules["grade_all"] = module
        spec.loader.exec_module(module)
    return module


def write_gradebook(
    path: Path, name: str, graded: list[tuple[str, dict]], variant: int | None = None
) -> None:
    """Write ``path``, a CSV gradebook of set ``name``: one row per submission (``graded``: pairs of the
    file and its :func:`grade` result). The columns are those of the shipped ``grade_all.py``, whose
    functions write them (``grade_all.write_gradebook``), so that both gradebooks read alike. Every
    column holds points awarded unless its name ends in ``_possible``:

    * ``file``;
    * one column per question, in the set's order, named by the question: the points the autograder
      awarded, or empty for a question graded by hand (the grader fills in the points awarded);
    * ``auto_awarded`` and ``auto_possible``: the autograded questions' totals;
    * ``manual_awarded`` (empty, for the grader: the sum of the questions graded by hand, which the
      shipped ``grade_all.py`` adds up once every hand mark is in) and ``manual_possible``;
    * ``total_awarded`` (empty until ``manual_awarded`` is known) and ``total_possible``: the set's
      points, autograded and by hand;
    * ``comments`` (empty, for the grader's words to the student)."""
    rows = [(file, {q: s for q, (s, _) in r["questions"].items()}) for file, r in graded]
    grade_all_module().write_gradebook(path, questions(name, variant), rows)


#: ``--help`` in a built kit's ``variants/`` folder (:data:`IN_KIT`): the kit's own commands, not the
#: repository's (``tools/``, ``_build/``), which a kit does not have.
KIT_HELP = """Draw a variant of the course's problem sets from a private seed, in the built kit (no
repository needed): other numbers for sets 1 and 2, other inputs for every hidden test, and a written
check drawn from the same seed, with solutions, rubrics and autograders that agree.

    python variants/problem_sets.py --variant SEED                 # every set -> variant-SEED/
    python variants/problem_sets.py --variant SEED ps1_measures    # one set

Pick SEED yourself, eight digits or so that nobody can guess, and keep it private: with the seed and
the book's public repository anyone can rebuild the variant's solutions. Run it in the kit's folder
with its README.md's step 1 installs; about a minute. Hand out variant-SEED/'s student versions and
grade with its grade_all.py. The kit's README.md ("Sets with other numbers") and the book's page
"Problem sets and grading" say what a variant guards against, and what it does not."""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="variants/problem_sets.py" if IN_KIT else None,
        description=KIT_HELP if IN_KIT else __doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "names", nargs="*", help="sets to build (default: all); with --grade, NAME FILE..."
    )
    ap.add_argument(
        "--grade",
        action="store_true",
        help="grade submissions: NAME FILE [FILE ...]; prints, for the grader's terminal only, each "
        "submission's points per question and a JSON line (not otter's check messages; hand students "
        "the feedback files of the build folder's grade_all.py, which quote no hidden check)",
    )
    ap.add_argument(
        "--csv",
        type=Path,
        default=None,
        metavar="FILE",
        help="with --grade: also write a gradebook, one row per submission (file, each question's "
        "points awarded, empty for those graded by hand, then auto_awarded, auto_possible, "
        "manual_awarded (empty), manual_possible, total_awarded (empty), total_possible, "
        "comments (empty))",
    )
    ap.add_argument(
        "--variant",
        type=int,
        default=None,
        metavar="SEED",
        help="fresh numerical inputs drawn from SEED (default: the sources' own); with --grade, the "
        "variant the submission was built from",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default: variant-SEED/ in the kit's folder"
        if IN_KIT
        else "default: _build/problem-sets[-variant-SEED]",
    )
    args = ap.parse_intermixed_args(argv)  # --csv FILE may come between NAME and the files
    out = args.out or variant_out(args.variant)
    known = sets()
    if args.grade:
        if len(args.names) < 2 or args.names[0] not in known:
            ap.error(f"--grade takes a set ({known}) and one or more notebooks")
        graded = []
        for path in args.names[1:]:
            r = grade(args.names[0], Path(path), out, args.variant)
            graded.append((path, r))
            detail = ", ".join(f"{q} {s:g}/{p:g}" for q, (s, p) in r["questions"].items())
            manual = ", ".join(f"{q} ?/{p:g}" for q, p in r["manual_possible"].items())
            print(
                f"{path}: autograded {r['auto'][0]:g}/{r['auto'][1]:g} ({detail}); "
                f"to grade by hand: {manual}"
            )
            print(json.dumps(r))
        if args.csv:
            write_gradebook(args.csv, args.names[0], graded, args.variant)
            print(f"problem_sets: gradebook of {len(graded)} submissions -> {args.csv}")
        return 0
    if args.csv:
        ap.error("--csv goes with --grade")
    names = args.names or known
    unknown = sorted(set(names) - set(known))
    if unknown:
        ap.error(f"unknown problem sets {unknown}; known: {known}")
    if not IN_KIT:
        from colab_notebooks import checkout_commit, uncommitted_library

        if checkout_commit(ROOT) and uncommitted_library(ROOT):
            print(
                "note: lib/ has uncommitted changes; the sets install softlin at "
                f"{checkout_commit(ROOT)[:12]}",
                file=sys.stderr,
            )
    fresh = not out.exists()
    for name in names:
        try:
            result = build(name, out, variant=args.variant)
        except RuntimeError as exc:  # otter's run of the set's tests on its own solution failed
            seed = "" if args.variant is None else f" for the seed {args.variant}"
            if fresh:  # no half-written folder is left behind
                shutil.rmtree(out, ignore_errors=True)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            print(
                f"problem_sets: {name}{seed}: the solution fails its own tests, so the set is not "
                f"built ({first[:300]}).{' Nothing was written.' if fresh else ''} This is a fault "
                "of the kit, not of your seed: please report it with the seed; another seed builds "
                "meanwhile.",
                file=sys.stderr,
            )
            return 1
        print(
            f"problem_sets: {name} -> {result.relative_to(ROOT) if result.is_relative_to(ROOT) else result}"
        )
    wheel = build_wheel(out)
    print(f"problem_sets: {wheel.name}, for grading without the repository")
    for name in names:  # Gradescope installs this softlin, not the repository's
        bundle_wheel(out / name / "autograder" / "autograder.zip", wheel)
    add_mathjax(out)  # the solution sheets' formulas, offline
    for name in names:  # a solution sheet run in its folder installs softlin without GitHub
        if (out / name / "solutions").is_dir():
            shutil.copyfile(wheel, out / name / "solutions" / wheel.name)
    for path in add_written_check(out, args.variant):  # for the instructor; not on the site
        print(f"problem_sets: {path.name}")
    readme(known if not args.names else names, out, args.variant)
    shutil.copyfile(ORAL_CHECKS, out / "oral-checks.md")  # for the instructor; not on the site
    shutil.copyfile(GRADE_ALL, out / "grade_all.py")  # a class at once, without the repository
    shutil.copyfile(FINAL_GRADES, out / "final_grades.py")  # the course grades, from the gradebooks
    shutil.copyfile(REHEARSE, out / "rehearse.py")  # the term's grading, rehearsed before term
    zip_students(names, out)
    ship_generator(out)  # set variants from a private seed, without the repository
    return 0


def ship_generator(out: Path) -> Path:
    """``out/variants/``: this module, the written check's generator, the sets' sources, the oral-check
    bank, ``grade_all.py`` and ``BUILT_FROM`` (the commit whose softlin the sets install), so that
    ``python variants/problem_sets.py --variant SEED`` in a built kit writes that seed's sets, rubrics and
    written check into ``variant-SEED/`` without the repository (:data:`IN_KIT`); its folder."""
    generator = out / "variants"
    shutil.rmtree(generator, ignore_errors=True)
    (generator / "sources").mkdir(parents=True)
    for name in sets():
        shutil.copyfile(SOURCES / f"{name}.md", generator / "sources" / f"{name}.md")
    shutil.copyfile(Path(__file__).resolve(), generator / "problem_sets.py")
    shutil.copyfile(WRITTEN_CHECK, generator / "written_check.py")
    shutil.copyfile(ORAL_CHECKS, generator / "oral_checks.md")
    shutil.copyfile(GRADE_ALL, generator / "grade_all.py")
    shutil.copyfile(FINAL_GRADES, generator / "final_grades.py")
    shutil.copyfile(REHEARSE, generator / "rehearse.py")
    (generator / "BUILT_FROM").write_text((built_from() or "") + "\n")
    return generator


#: The written check's generator, shipped beside the sets: ``python written_check.py --seed SEED`` there
#: writes a seed's check and key without the repository (the same files as ``--variant SEED`` builds).
WRITTEN_CHECK = Path(written_check.__file__).resolve()


def add_written_check(out: Path, variant: int | None = None, pdf: bool = True) -> list[Path]:
    """The written check and its key in ``out`` (:func:`written_check.build`, the inputs of ``variant``;
    ``pdf``: print the PDFs where Chromium is installed), and ``out/written_check.py``, a copy of the
    generator, so that a lecturer with the built folder alone draws a check from a private seed
    (``python written_check.py --seed SEED``); the files written."""
    written = written_check.build(out, variant, pdf=pdf)
    shutil.copyfile(WRITTEN_CHECK, out / "written_check.py")
    return [*written, out / "written_check.py"]


def build_wheel(out: Path) -> Path:
    """A wheel of softlin at this checkout, in ``out``, so that ``otter run`` can grade where the
    repository is not at hand (``pip install ./softlin-*.whl``); its path. In a built kit, a copy of the
    kit's own wheel."""
    if IN_KIT:
        wheels = sorted(ROOT.glob("softlin-*.whl"))
        if not wheels:
            raise SystemExit(f"problem_sets: no softlin wheel in {ROOT}, the kit's folder")
        out.mkdir(parents=True, exist_ok=True)
        target = out / wheels[-1].name
        if target.resolve() != wheels[-1].resolve():
            shutil.copyfile(wheels[-1], target)
        return target
    for old in out.glob("softlin-*.whl"):
        old.unlink()
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(out)],
        check=True,
    )
    wheels = sorted(out.glob("softlin-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"problem_sets: pip wheel left {len(wheels)} softlin wheels in {out}")
    return wheels[0]


if __name__ == "__main__":
    sys.exit(main())
