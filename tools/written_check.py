#!/usr/bin/env python
"""The written check of the derivations, ready to print, and its answer key (`make problem-sets`).

    python tools/written_check.py              # -> _build/problem-sets/written-check*.{md,html,pdf}
    python tools/written_check.py --seed 2025  # -> _build/problem-sets-variant-2025/written-check*

    python written_check.py --seed SEED        # the copy in a built folder, without the repository:
                                               # -> written-check-SEED/ beside it
    python written_check.py --seed SEED --set 1  # the ten-minute check on problem set 1 alone
                                                 # -> written-check-SEED/written-check-set1*

**A graded check, without the repository.** ``make problem-sets`` copies this file into the build folder
(``_build/problem-sets/written_check.py``, beside ``grade_all.py`` and the softlin wheel). There, with
torch and the folder's wheel installed (``pip install softlin-*.whl``, which brings numpy and scipy;
the Python that grades with ``grade_all.py`` serves), ``python written_check.py --seed SEED [--out
DIR]`` writes the written check and key of the seed ``SEED`` (Markdown and HTML, PDF where headless
Chromium is found) into ``DIR`` (default: ``written-check-SEED/`` beside this file): the same files as
``make problem-sets VARIANT=SEED`` writes for the written check. It imports nothing but softlin and the standard library, numpy, scipy and torch
(set 1's shape is drawn from the seed by :func:`set_draws`, which ``tools/problem_sets.py`` imports
from here). For a graded check, pick a private seed (eight digits, say) and run it in the folder: the
default check's sheet and key are rebuilt by anyone from the public sources, so never hand out the
default's for a grade.

book/grading.md offers "a written check instead" of the oral check: thirty minutes in class, closed
book, three questions, one per problem set, each a follow-up of the oral bank (``course/oral_checks.md``)
with an input the lecturer changes. :func:`build` writes it into the problem sets' build folder
(``tools/problem_sets.py`` calls it):

* ``written-check.md`` and ``written-check.html``: the students' sheet (title, instructions, three
  questions of 4 points each, with the points of each part and room to write); the HTML is
  self-contained (no script, no web font, no MathJax: the mathematics is Unicode text) with a print
  style for A4 on which the sheet takes at most two pages;
* ``written-check-key.md`` and ``written-check-key.html``, for graders only: each part's full answer
  with its numbers, and a scoring guide, 0 to 4 per question: 0 to 2 for part (a), the bank question's
  derivation, and 0 to 2 for parts (b) and (c), the follow-up's numbers (1 each), the bank's scale;
* ``written-check.pdf`` and ``written-check-key.pdf`` when headless Chromium is installed (as for
  ``tools/handouts.py``); the build does not need it.

**One set at a time** (``--set N``, :func:`build`'s ``problem_set``): the default grading of
book/grading.md gives each set's question on its own, ten minutes at the start of the session after the
set is due (set 1's at session 2, set 2's at session 3). The sheet is the whole check's question ``N``
for the same seed, numbered 1, with its key, on one A4 page: ``written-check-setN.*`` and
``written-check-setN-key.*``.

**Questions.** Each set's question has two forms (:data:`FORMS`); the default takes the first of
each, and a variant draws one per set from its seed, so that a key learnt by heart does not answer the
derivations of a form it does not share. Set 1: Gamma tokens of shape ``k`` and rate ``lam``: where the
infinite-prompt limit ``T(a)`` exists and what it is, its value at a tilt, and its ``a^2`` coefficient
(the bank's follow-up on the Gamma law, and its question on Taylor coefficients); or a two-point law
(the bank's follow-up on it): ``T(a)`` at every tilt and its limits in ``a``, its value, its ``a^2``
coefficient. Set 2: Gaussian tokens ``N(0, sigma^2)`` with standard Gaussian queries at scale ``u``:
the threshold in ``u``, the effective number of tokens ``L e^{-s}`` for one query, and the
query-averaged constant by the scaling ``sigma^2 C(sigma u)``; or queries ``N(0, q^2)`` too: the
threshold ``sigma^2 u^2 q^2 < 1/2``, the prompt length at which ``N`` tokens count, and
``sigma^2 C(sigma q u)``. Set 3: ``Sigma = c I_d``, or two blocks ``c1 I_d1`` and ``c2 I_d2``:
``b*^2``, where lesson 5's constant is finite, and with label noise ``gamma^2`` the constant ``C_lin``
and the prompt length where linear attention matches softmax attention (the question states
``C_soft``, which needs a numerical minimisation).

**Inputs and variants.** Without a variant the inputs are :data:`DEFAULT` (``k = 4``, ``lam = 2``;
``sigma^2 = 4``, ``u = 0.25``; ``c = 1.5``, ``d = 4``, ...): numbers, where the bank's follow-ups are
written for a general law, for ``Sigma = I_d``, for ``L = 1000`` and for the paper's noise ``0.5``, so that
the bank's printed answers do not answer the sheet verbatim. With ``--variant SEED`` they are drawn from
``SEED`` (a stream of its own, so the sets' numbers do not change), and every number of the key differs
from the default key's (:func:`inputs` draws again until it does; set 1's shape also differs from the
variant's problem set 1, :func:`set_draws`): the public default key does not answer a variant. The
default sheet and key are rebuilt by anyone from the public sources, so for a graded check use a seed
kept private, as for the sets: ``make problem-sets VARIANT=SEED``, or ``--seed SEED`` with the copy in
a built folder (above), which writes the same files.

**Numbers.** Every number of the key is computed here, from the library where it has the function: set
1's ``T`` by :meth:`softlin.measures.TokenMeasure.tilted_mean` of the Gamma law's log-MGF (automatic
differentiation) and its ``a^2`` coefficient from the tilted covariance's derivative; set 2's effective
tokens by :func:`softlin.concentration.ess_ratio_expansion` and the averaged constant by
:func:`softlin.concentration.query_averaged_expansion` (which also places the threshold: finite just
below the closed form, infinite just above); set 3's ``b*`` by
:func:`softlin.icl.bayes_optimal_parameters`, the finiteness of lesson 5's constant by
:func:`softlin.icl.risk_fluctuation_constant` and ``C_lin``, ``C_soft`` by
:func:`softlin.icl.large_prompt_constants`. Each is compared with its closed form here (a build whose
numbers disagree stops), and tests/test_kit_written_check.py checks them by independent routes
(quadrature, closed forms, lesson 6's formula in ``u^2`` minimised with scipy).
"""

# ruff: noqa: RUF001
# (the sheet's mathematics is Unicode text, printed as it is: minus signs, Greek letters, primes)

from __future__ import annotations

import argparse
import dataclasses
import html
import math
import random
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: Whether this is the repository's tools/written_check.py (not the copy in a built folder): then the
#: default output is the problem sets' build folder.
IN_REPOSITORY = HERE.name == "tools" and (ROOT / "lib" / "softlin").is_dir()
OUT = ROOT / "_build" / "problem-sets"
FILES = ("written-check.md", "written-check.html", "written-check-key.md", "written-check-key.html")
PDFS = ("written-check.pdf", "written-check-key.pdf")
#: The problem sets a one-set check (``--set N``) can be on.
SETS = (1, 2, 3)


def files(problem_set: int | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names :func:`build` writes (:data:`FILES`, :data:`PDFS`); for the ten-minute check on one
    problem set, ``written-check-setN*`` (``written-check-set1.html``, ``written-check-set1-key.md``, ...)."""
    if problem_set is None:
        return FILES, PDFS
    tag = f"written-check-set{problem_set}"
    return tuple(n.replace("written-check", tag, 1) for n in FILES), tuple(
        n.replace("written-check", tag, 1) for n in PDFS
    )


#: The default sheet's inputs: numbers where the bank's follow-ups are general (a Gamma law of shape k,
#: Sigma = I_d) or fixed (L = 1000, s = 2 and 8, the paper's covariance with gamma^2 = 0.5).
DEFAULT = {
    "ps1": {"form": "gamma", "k": 4, "lam": 2.0, "a": 1.0},
    "ps2": {"form": "token variance", "sigma2": 4.0, "u": 0.25, "z": 2.0, "L": 2000},
    "ps3": {"form": "isotropic", "c": 1.5, "d": 4, "tau2": 0.25, "gamma2": 0.2, "L": 1000},
}
#: Each question's two forms: a variant draws one per set, so that a key learnt by heart (the default's,
#: or another seed's) answers at most the numbers of the forms it shares, never the derivations of the
#: other. Set 1: Gamma tokens, or a two-point law; set 2: the tokens' variance changed, or the
#: queries'; set 3: Sigma = c I_d, or two blocks c1 I_d1 and c2 I_d2.
FORMS = {
    "ps1": ("gamma", "two-point"),
    "ps2": ("token variance", "query variance"),
    "ps3": ("isotropic", "two blocks"),
}
#: What a variant draws from (set 1's shape: also not the variant's problem-set shape).
DRAWS = {
    "k": (2, 3, 4, 5),
    "lam": (0.5, 0.75, 1.0, 1.25, 1.5, 2.5, 3.0, 3.5, 4.0, 5.0),
    # the tilt: a multiple of 0.01 from -lam to 0.75 lam, not 0 (:func:`_tilts`)
    "a_step": 0.01,
    "sigma2": (0.25, 0.5, 2.0, 3.0, 9.0),
    "u": (0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0),
    "z": (1.0, 1.5, 2.5, 3.0),
    "L2": (500, 1000, 5000, 10000),
    "c": (0.5, 0.75, 1.25, 2.0, 2.5),
    "d": tuple(range(2, 13)),
    "tau2": (0.1, 0.2, 0.5, 1.0),
    "gamma2": (0.05, 0.1, 0.3, 0.5, 1.0),
    "L3": (500, 2000, 5000),
    # the second forms
    "x1": (-3.0, -2.0, -1.5, -1.0, -0.5, 0.0),
    "x2": (0.5, 1.0, 1.5, 2.0, 3.0, 4.0),
    # not 1/2, where the third cumulant vanishes
    "p": (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9),
    "a2": tuple(k / 4 for k in range(-8, 9) if k),  # -2 to 2 in quarters, not 0
    "q2": (0.25, 0.5, 2.0, 4.0),  # the queries' variance
    "N": (20, 50, 100, 200),  # tokens that must count
    "blocks": ((1, 2), (1, 3), (2, 2), (2, 3), (3, 2)),  # (d1, d2)
    # (c1, c2): d2 / c2^2 < 4, so that whether the constant is finite depends on d1
    "c_pair": ((1.5, 1.0), (2.0, 1.0), (1.25, 1.5), (1.5, 2.0), (2.0, 1.5), (1.0, 2.0)),
}


# --- the problem sets' first draws ------------------------------------------------------------------------
# tools/problem_sets.py imports these (one implementation): a variant's set 1 asks about Gamma tokens of a
# shape drawn from its seed, and the written check's set 1 takes another shape, so the copy of this file
# in a built folder, without problem_sets.py, must draw the same shape from the same seed.

#: The rate of the default sets: not 1, where lam / (lam - a) = 1 / (lam - a) and 1 / lam = lam, so that
#: an answer that confuses a rate with a scale, or the limit with the generating function, is wrong there.
DEFAULT_RATE = 2
#: A variant's rate of the exponential tokens is drawn log-uniformly from this range.
RATES = (0.25, 4.0)
#: The default sets' two-point law of set 1: atoms x1 < x2, the probability of x1, the tilt.
DEFAULT_LAW = (-1.0, 2.0, 0.3, 0.5)


def _rate(rng: random.Random) -> float:
    """A variant's rate ``lam`` of the exponential tokens (sets 1 and 2): log-uniform on :data:`RATES`, to
    three significant digits, and at least 5 % away from the default (:data:`DEFAULT_RATE`), so that every
    answer that scales with the rate moves by far more than its hidden test's tolerance. Every question is
    scale-free in the rate (its tilts are drawn in units of ``lam``), so any rate gives a solvable set; the
    range keeps the numbers students see moderate (token means from 0.25 to 4) and the quadratures well
    conditioned."""
    while True:
        lam = float(f"{math.exp(rng.uniform(*map(math.log, RATES))):.3g}")
        if abs(lam - DEFAULT_RATE) >= 0.05 * DEFAULT_RATE:
            return lam


def set_draws(rng: random.Random) -> dict:
    """The first draws of a variant's problem sets from their stream (``random.Random(SEED)``), in this
    order: set 1's two-point law (``ps1_law``, redrawn until it differs from :data:`DEFAULT_LAW`), the
    rate of the exponential tokens (``lam``, :func:`_rate`) and set 1's Gamma shape (``ps1_shape``, 2 or
    3: another member of the family, so that the public solution's derivation, the exponential law's,
    does not answer it). ``tools/problem_sets.py`` draws the rest of the sets' inputs from the same
    stream after these."""
    law = DEFAULT_LAW
    while law == DEFAULT_LAW:
        law = (
            rng.choice((-3.0, -2.0, -1.0)),
            rng.choice((1.0, 2.0, 3.0)),
            rng.choice((0.2, 0.3, 0.4, 0.6, 0.7, 0.8)),
            rng.choice((0.25, 0.4, 0.5, 0.6, 0.75)),
        )
    lam = _rate(rng)
    return {"ps1_law": law, "lam": lam, "ps1_shape": rng.choice((2, 3))}


def set_1_shape(variant: int) -> int:
    """The Gamma shape of the variant ``variant``'s problem set 1 (``problem_sets.parameters(variant)
    ["ps1_measures"]["shape"]``)."""
    return set_draws(random.Random(variant))["ps1_shape"]


# --- the written check's inputs ------------------------------------------------------------------------------


def _tilts(lam: float) -> list[float]:
    """The tilts a Gamma question of rate ``lam`` draws from: the multiples of ``DRAWS["a_step"]``
    from ``-lam`` to ``0.75 lam`` (well inside the domain ``a < lam``), 0 left out. With the rates,
    shapes and two-point laws of :data:`DRAWS`, set 1's question takes some twenty thousand forms, so
    that two seeds rarely share a set-1 sheet."""
    step = DRAWS["a_step"]
    lo, hi = math.ceil(-lam / step - 1e-9), math.floor(0.75 * lam / step + 1e-9)
    return [round(k * step, 2) for k in range(lo, hi + 1) if k]


def _draw(rng: random.Random, shape: int, law: tuple) -> dict:
    """One draw of a variant's inputs: each set's form (:data:`FORMS`), then its numbers (``shape``:
    the Gamma shape of the variant's problem set 1; ``law``: its two-point law, which set 1's second
    form avoids)."""
    forms = {q: rng.choice(options) for q, options in FORMS.items()}
    lam = rng.choice(DRAWS["lam"])
    sigma2 = rng.choice(DRAWS["sigma2"])
    # the scale u well below the threshold 1 / sqrt(2 sigma^2): sigma^2 u^2 from 0.02 to 0.4
    us = [u for u in DRAWS["u"] if 0.02 <= sigma2 * u * u <= 0.4]
    c = rng.choice(DRAWS["c"])
    # not at the border d = 4 c^2, where lesson 5's constant is infinite only by a rounding error
    ds = [d for d in DRAWS["d"] if d != 4 * c * c]
    x = {
        "ps1": {
            "form": forms["ps1"],
            "k": rng.choice([k for k in DRAWS["k"] if k != shape]),
            "lam": lam,
            "a": rng.choice(_tilts(lam)),
        },
        "ps2": {
            "form": forms["ps2"],
            "sigma2": sigma2,
            "u": rng.choice(us),
            "z": rng.choice(DRAWS["z"]),
            "L": rng.choice(DRAWS["L2"]),
        },
        "ps3": {
            "form": forms["ps3"],
            "c": c,
            "d": rng.choice(ds),
            "tau2": rng.choice(DRAWS["tau2"]),
            "gamma2": rng.choice(DRAWS["gamma2"]),
            "L": rng.choice(DRAWS["L3"]),
        },
    }
    if forms["ps1"] == "two-point":  # not the variant's problem-set law, nor the default sets'
        atoms = law[:3]
        while atoms in (law[:3], DEFAULT_LAW[:3]):
            atoms = tuple(rng.choice(DRAWS[n]) for n in ("x1", "x2", "p"))
        x["ps1"] = {"form": "two-point", "x1": atoms[0], "x2": atoms[1], "p": atoms[2],
                    "a": rng.choice(DRAWS["a2"])}  # fmt: skip
    if forms["ps2"] == "query variance":
        q2 = rng.choice(DRAWS["q2"])
        # well below the threshold 1 / sqrt(2 sigma^2 q^2): sigma^2 u^2 q^2 from 0.02 to 0.4
        us = [u for u in DRAWS["u"] if 0.02 <= sigma2 * u * u * q2 <= 0.4]
        while not us:
            sigma2 = rng.choice(DRAWS["sigma2"])
            us = [u for u in DRAWS["u"] if 0.02 <= sigma2 * u * u * q2 <= 0.4]
        x["ps2"] = {"form": "query variance", "sigma2": sigma2, "q2": q2, "u": rng.choice(us),
                    "z": rng.choice(DRAWS["z"]), "N": rng.choice(DRAWS["N"])}  # fmt: skip
    if forms["ps3"] == "two blocks":
        d1, d2 = rng.choice(DRAWS["blocks"])
        c1, c2 = rng.choice(DRAWS["c_pair"])
        x["ps3"] = {"form": "two blocks", "c1": c1, "c2": c2, "d1": d1, "d2": d2,
                    "tau2": x["ps3"]["tau2"], "gamma2": x["ps3"]["gamma2"], "L": x["ps3"]["L"]}  # fmt: skip
    return x


def _check_variant(variant) -> int | None:
    if variant is not None and (isinstance(variant, bool) or not isinstance(variant, int)):
        raise TypeError(
            f"variant must be an integer seed or None (the default check), got {variant!r} "
            f"({type(variant).__name__})"
        )
    return variant


def inputs(variant: int | None = None) -> dict:
    """The sheet's inputs: :data:`DEFAULT`, or those drawn from ``variant`` (a seed), redrawn until every
    number of the key differs from the default key's (:func:`distinct`) and no two answers of one
    set's question coincide (:func:`coincident`: Gamma tokens with ``lam = 0.5``, ``a = 0.375`` have
    ``T(a)`` equal to its ``a^2`` coefficient, so one answer would give the other away), and no answer
    is the oral bank's answer with the bank's inputs (:func:`repeats_bank`: queries with
    ``sigma^2 q^2 = 1`` have the standard model's threshold ``u^2 = 1/2``, which the key scores 0)."""
    if _check_variant(variant) is None:
        return {q: dict(x) for q, x in DEFAULT.items()}
    sets = set_draws(random.Random(variant))  # the variant's problem set 1: its shape and its law
    rng = random.Random(f"written-check {variant}")  # not the sets' stream: their numbers stay
    default = numbers(key(DEFAULT))
    for _ in range(100):
        drawn = _draw(rng, sets["ps1_shape"], sets["ps1_law"])
        ours = numbers(key(drawn))
        if distinct(ours, default) and not coincident(ours) and not repeats_bank(ours, drawn):
            return drawn
    raise SystemExit(f"written_check: variant {variant}: no draw differs from the default key")


def _alike(x: float, y: float, rel: float) -> bool:
    """Whether ``x`` and ``y`` agree to ``rel``, relative to the larger of the two."""
    return abs(x - y) <= rel * max(abs(x), abs(y), 1e-12)


def bank_answers(x: dict) -> dict[str, list[float]]:
    """The numbers that the oral bank's answers give with the bank's own inputs, by the name of the key's
    answer they would be written for (:func:`numbers`): what a student who learnt the bank by heart
    writes, and the key scores 0. Set 2's threshold: the standard model's ``u = 1/sqrt(2)``, and for
    queries ``N(0, q^2)`` also the tokens' alone, ``u = 1/sqrt(2 sigma^2)``; set 3: ``Sigma = I``'s
    ``b*^2 = sqrt(d)`` and ``d > 4``."""
    two, three = x["ps2"], x["ps3"]
    threshold = [1 / math.sqrt(2)]
    if two["form"] == "query variance":
        threshold.append(1 / math.sqrt(2 * float(two["sigma2"])))
    d = int(three["d"]) if three["form"] == "isotropic" else int(three["d1"]) + int(three["d2"])
    return {"ps2 threshold": threshold, "ps3 b2": [math.sqrt(d)], "ps3 d_min": [5.0]}


def repeats_bank(ours: dict, x: dict, rel: float = 1e-3) -> list[str]:
    """The answers of ``ours`` (the key's, :func:`numbers`, for the inputs ``x``) that agree to ``rel``
    (three significant digits) with :func:`bank_answers`: a sheet must not be answered by the bank."""
    return [
        name
        for name, values in bank_answers(x).items()
        if name in ours and any(_alike(ours[name], v, rel) for v in values)
    ]


def coincident(ours: dict, rel: float = 1e-3) -> list[tuple[str, str]]:
    """The pairs of answers of one set's question (names with the same ``psN`` prefix, from
    :func:`numbers`) that agree to ``rel`` (relative; three significant digits by default), which a
    student would write alike."""
    names = sorted(ours)
    return [
        (p, q)
        for i, p in enumerate(names)
        for q in names[i + 1 :]
        if p.split()[0] == q.split()[0] and _alike(ours[p], ours[q], rel)
    ]


def distinct(ours: dict, theirs: dict, rel: float = 1e-6) -> bool:
    """Whether every number of ``ours`` (the key's, :func:`numbers`) differs from the number of the
    same name in ``theirs`` by more than ``rel`` (relative); a form that one key has and the other not
    shares no name with it."""
    return not any(_alike(ours[k], theirs[k], rel) for k in theirs if k in ours)


# --- the key's numbers ----------------------------------------------------------------------------------


def _gamma_law(k: int, lam: float):
    """The Gamma law of shape ``k`` and rate ``lam`` as a softlin token law (its log-MGF), so that the
    library's tilted mean and covariance (automatic differentiation) give ``T`` and ``T'``."""
    import torch
    from softlin.measures import TokenMeasure

    class GammaLaw(TokenMeasure):
        dim = 1

        def log_mgf(self, a):  # k log(lam / (lam - a)), for a < lam
            return k * (math.log(lam) - torch.log(lam - a[..., 0]))

    return GammaLaw()


def _close(x: float, y: float, what: str, rel: float = 1e-9) -> None:
    if not abs(x - y) <= rel * max(abs(y), 1e-300):
        raise SystemExit(f"written_check: {what}: the library gives {x!r}, the closed form {y!r}")


def key(x: dict) -> dict:
    """The key's numbers for the inputs ``x`` (those of :func:`inputs`), each computed by the library and
    checked against its closed form; each set's by its form (:data:`FORMS`)."""
    makers = {
        "gamma": _key_gamma,
        "two-point": _key_two_point,
        "token variance": _key_token_variance,
        "query variance": _key_query_variance,
        "isotropic": _key_isotropic,
        "two blocks": _key_two_blocks,
    }
    out = {}
    for q in ("ps1", "ps2", "ps3"):
        form = x[q].get("form")
        if form not in FORMS[q]:
            raise ValueError(f"{q}: form must be one of {FORMS[q]}, got {form!r}")
        out[q] = {"form": form, **makers[form](x[q])}
    return out


def _scalar(v):
    import torch

    return torch.tensor([[float(v)]], dtype=torch.float64)


def _key_gamma(p1: dict) -> dict:
    """Set 1, Gamma tokens: the limit at a tilt and its a^2 coefficient."""
    import torch

    f64 = torch.float64
    k, lam, a = p1["k"], float(p1["lam"]), float(p1["a"])
    law = _gamma_law(k, lam)
    T = float(law.tilted_mean(torch.tensor([a], dtype=f64))[0])
    _close(T, k / (lam - a), "set 1: T(a)")
    # T'' (0) / 2 = kappa_3 / 2: the derivative of the tilted variance at 0, halved
    zero = torch.zeros(1, dtype=f64)
    kappa3 = float(torch.func.jacfwd(lambda t: law.tilted_covariance(t)[0, 0])(zero)[0])
    coefficient = kappa3 / 2
    _close(coefficient, k / lam**3, "set 1: the a^2 coefficient", 1e-8)
    return {"k": k, "lam": lam, "a": a, "T": T, "kappa3": kappa3, "coefficient": coefficient}


def _two_point_law(x1: float, x2: float, p: float):
    """The law with P(X = x1) = p, P(X = x2) = 1 - p as a softlin token law (its log-MGF)."""
    import torch
    from softlin.measures import TokenMeasure

    class TwoPoint(TokenMeasure):
        dim = 1

        def log_mgf(self, a):
            logs = torch.stack([math.log(p) + a[..., 0] * x1, math.log(1 - p) + a[..., 0] * x2])
            return torch.logsumexp(logs, 0)

    return TwoPoint()


def _key_two_point(p1: dict) -> dict:
    """Set 1, a two-point law: the limit at a tilt, its limits in a, and its a^2 coefficient."""
    import torch

    f64 = torch.float64
    x1, x2, p, a = float(p1["x1"]), float(p1["x2"]), float(p1["p"]), float(p1["a"])
    law = _two_point_law(x1, x2, p)
    T = float(law.tilted_mean(torch.tensor([a], dtype=f64))[0])
    w1, w2 = p * math.exp(a * x1), (1 - p) * math.exp(a * x2)
    _close(T, (w1 * x1 + w2 * x2) / (w1 + w2), "set 1: T(a), two-point law")
    zero = torch.zeros(1, dtype=f64)
    kappa3 = float(torch.func.jacfwd(lambda t: law.tilted_covariance(t)[0, 0])(zero)[0])
    r = 1 - p  # X = x1 + (x2 - x1) B with B ~ Bernoulli(r)
    _close(kappa3, (x2 - x1) ** 3 * r * (1 - r) * (1 - 2 * r), "set 1: kappa_3, two-point", 1e-8)
    return {"x1": x1, "x2": x2, "p": p, "a": a, "T": T, "kappa3": kappa3,
            "coefficient": kappa3 / 2, "w1": w1, "w2": w2}  # fmt: skip


def _set2_core(sigma2: float, q2: float, u: float, z: float) -> dict:
    """Set 2, tokens N(0, sigma^2) and queries N(0, q^2) (q^2 = 1 for the tokens' form): the
    threshold on u, e^{-s} at the query z and the averaged constant, each the library's, checked
    against its closed form."""
    from softlin import concentration

    threshold = 1 / math.sqrt(2 * sigma2 * q2)

    def averaged_at(scale):
        return concentration.query_averaged_expansion(
            _scalar(scale), _scalar(1), _scalar(sigma2), query_cov=_scalar(q2)
        )[0]

    below, above = averaged_at(threshold * (1 - 1e-6)), averaged_at(threshold * (1 + 1e-6))
    if not (math.isfinite(below) and math.isinf(above)):
        raise SystemExit(
            f"written_check: set 2: the library's averaged constant is {below} below and {above} "
            f"above the threshold u = {threshold} (queries N(0, {q2}))"
        )
    ratio = float(concentration.ess_ratio_expansion(_scalar(z), _scalar(u), _scalar(sigma2))[0][0])
    s = sigma2 * u * u * z * z
    _close(ratio, math.exp(-s), "set 2: e^{-s}")
    averaged = averaged_at(u)
    v2 = sigma2 * u * u * q2
    _close(
        averaged, sigma2 * ((1 - 2 * v2) ** -0.5 + v2 * (1 - 2 * v2) ** -1.5), "set 2: C_1", 1e-8
    )
    return {"threshold": threshold, "s": s, "ratio": ratio, "v2": v2, "averaged": averaged}


def _key_token_variance(p2: dict) -> dict:
    """Set 2, tokens N(0, sigma^2), queries N(0, 1): the threshold, the tokens that count, the
    averaged constant."""
    sigma2, u, z, L = float(p2["sigma2"]), float(p2["u"]), float(p2["z"]), int(p2["L"])
    core = _set2_core(sigma2, 1.0, u, z)
    return {"sigma2": sigma2, "u": u, "z": z, "L": L, "threshold": core["threshold"],
            "s": core["s"], "tokens": L * core["ratio"], "v2": core["v2"],
            "averaged": core["averaged"]}  # fmt: skip


def _key_query_variance(p2: dict) -> dict:
    """Set 2, tokens N(0, sigma^2), queries N(0, q^2): the threshold, the prompt length at which N
    tokens count for one query, the averaged constant."""
    sigma2, q2, u, z, N = (float(p2[n]) for n in ("sigma2", "q2", "u", "z", "N"))
    core = _set2_core(sigma2, q2, u, z)
    length = math.ceil(N / core["ratio"] - 1e-9)  # the shortest prompt with L e^{-s} >= N
    return {"sigma2": sigma2, "q2": q2, "u": u, "z": z, "N": int(N),
            "threshold": core["threshold"], "s": core["s"], "length": length, "v2": core["v2"],
            "averaged": core["averaged"]}  # fmt: skip


def _key_isotropic(p3: dict) -> dict:
    """Set 3, Sigma = c I_d: b*^2, where lesson 5's constant is finite, C_lin and L'."""
    import torch
    from softlin import icl

    f64 = torch.float64
    c, d, tau2, gamma2, L3 = float(p3["c"]), int(p3["d"]), float(p3["tau2"]), p3["gamma2"], p3["L"]
    Sigma = c * torch.eye(d, dtype=f64)
    A_star, b_star = icl.bayes_optimal_parameters(Sigma)
    b2 = float(b_star) ** 2
    _close(b2, math.sqrt(d) / c, "set 3: b*^2")
    finite = math.isfinite(
        icl.risk_fluctuation_constant(A_star, b_star, Sigma, allow_infinite=True)
    )
    border = 4 * c * c
    if finite != (d > border) or d == border:
        raise SystemExit(
            f"written_check: set 3: d = {d} at c = {c}: finite {finite}, border {border}"
        )
    const = icl.large_prompt_constants(Sigma, tau2=tau2, noise_var=float(gamma2))
    _close(const.linear, tau2 * (d + 1) * c * d, "set 3: C_lin", 1e-6)
    soft = round(const.softmax, 2)  # as the question prints it
    return {
        "c": c,
        "d": d,
        "tau2": tau2,
        "gamma2": float(gamma2),
        "L": int(L3),
        "b2": b2,
        "border": border,
        "d_min": math.floor(border) + 1,
        "finite": finite,
        "C_lin": const.linear,
        "C_soft": const.softmax,
        "C_soft_printed": soft,
        "scale": const.scale,
        "matched": L3 * const.linear / soft,
    }


def _key_two_blocks(p3: dict) -> dict:
    """Set 3, Sigma = diag(c1 I_d1, c2 I_d2): b*^2, where lesson 5's constant is finite (the smallest
    d1, the rest fixed), C_lin and L'."""
    import torch
    from softlin import icl

    f64 = torch.float64
    c1, c2, d1, d2 = float(p3["c1"]), float(p3["c2"]), int(p3["d1"]), int(p3["d2"])
    tau2, gamma2, L3 = float(p3["tau2"]), float(p3["gamma2"]), int(p3["L"])
    Sigma = torch.diag(torch.tensor([c1] * d1 + [c2] * d2, dtype=f64))
    A_star, b_star = icl.bayes_optimal_parameters(Sigma)
    b2 = float(b_star) ** 2
    inverse_square = d1 / c1**2 + d2 / c2**2  # tr Sigma^{-2}
    _close(b2, math.sqrt(inverse_square), "set 3: b*^2, two blocks")
    finite = math.isfinite(
        icl.risk_fluctuation_constant(A_star, b_star, Sigma, allow_infinite=True)
    )
    if finite != (inverse_square > 4) or inverse_square == 4:
        raise SystemExit(f"written_check: set 3: tr Sigma^-2 = {inverse_square}: finite {finite}")
    # finite iff d1 / c1^2 > 4 - d2 / c2^2: the smallest such d1 (at least 1)
    d_min = max(1, math.floor(c1 * c1 * (4 - d2 / c2**2)) + 1)
    d, trace = d1 + d2, c1 * d1 + c2 * d2
    const = icl.large_prompt_constants(Sigma, tau2=tau2, noise_var=gamma2)
    _close(const.linear, tau2 * (d + 1) * trace, "set 3: C_lin, two blocks", 1e-6)
    soft = round(const.softmax, 2)  # as the question prints it
    return {"c1": c1, "c2": c2, "d1": d1, "d2": d2, "d": d, "trace": trace, "tau2": tau2,
            "gamma2": gamma2, "L": L3, "b2": b2, "b4": inverse_square, "d_min": d_min,
            "finite": finite, "C_lin": const.linear, "C_soft": const.softmax,
            "C_soft_printed": soft, "scale": const.scale, "matched": L3 * const.linear / soft}  # fmt: skip


def numbers(k: dict) -> dict:
    """The key's answers, one number each (what a student writes), by name: what differs between the
    default and a variant (:func:`distinct`). The names of set 1's and set 2's second forms differ
    where the answer does (``ps1 domain`` is the Gamma law's; ``ps2 length`` the query form's)."""
    one, two, three = k["ps1"], k["ps2"], k["ps3"]
    out = {}
    if one["form"] == "gamma":
        out["ps1 domain"] = one["lam"]
    out["ps1 T"], out["ps1 coefficient"] = one["T"], one["coefficient"]
    out["ps2 threshold"] = two["threshold"]
    if two["form"] == "token variance":
        out["ps2 tokens"] = two["tokens"]
    else:
        out["ps2 length"] = two["length"]
    out["ps2 averaged"] = two["averaged"]
    for name in ("b2", "d_min", "C_lin", "matched"):
        out[f"ps3 {name}"] = three[name]
    return out


# --- the sheet ---------------------------------------------------------------------------------------------


@dataclass
class Part:
    label: str
    points: int
    ask: str
    space: int  # mm of room to write, on the printed sheet
    answer: str
    full: str  # what earns all the points of the part
    partial: str  # what earns half of them (1 of 2, or 1/2 of 1)
    none: str  # what earns nothing


@dataclass
class Question:
    number: int
    title: str
    stem: str
    parts: list[Part]
    bank: str  # which question of the oral bank it follows up


def g(x: float, digits: int = 4) -> str:
    """A number as the sheet prints it, with a minus sign: exactly where six significant digits or fewer
    write it (``4``, ``0.078125``, ``1.5625``), else to ``digits`` (``0.3536``, ``8.485``)."""
    exact = f"{x:.6g}"
    return (exact if float(exact) == x else f"{x:.{digits}g}").replace("-", "−")


def count(x: float) -> str:
    """A number of tokens: a whole number from 10 on, two significant digits below."""
    return f"{x:.0f}" if x >= 10 else g(x, 2)


def _x(n: float) -> str:
    """A factor in a product: negative numbers in brackets."""
    return f"({g(n)})" if n < 0 else g(n)


def questions(k: dict) -> list[Question]:
    """The three questions, with their answers and scoring, for the key's numbers ``k`` (each set's in
    its form)."""
    makers = {
        "gamma": _q_gamma,
        "two-point": _q_two_point,
        "token variance": _q_token_variance,
        "query variance": _q_query_variance,
        "isotropic": _q_isotropic,
        "two blocks": _q_two_blocks,
    }
    return [makers[k[q]["form"]](k[q]) for q in ("ps1", "ps2", "ps3")]


def _q_gamma(one: dict) -> Question:
    kk, lam, a = one["k"], one["lam"], one["a"]
    q1 = Question(
        1,
        "Problem set 1: attention on measures",
        f"Tokens X in one dimension follow the Gamma law of shape k = {kk} and rate λ = {g(lam)}, "
        "of density λ^{k} x^{k−1} e^{−λx}/(k−1)! on x > 0. A query tilts them by a: the infinite-prompt "
        "output T(a) is the mean of the tilted law, whose density is proportional to e^{ax} times that "
        "of X.",
        [
            Part(
                "a",
                2,
                "For which tilts a does T(a) exist? Derive T(a) there.",
                40,
                f"𝔼 e^{{aX}} = ∫₀^{{∞}} λ^{{k}} x^{{k−1}} e^{{−(λ−a)x}}/(k−1)! dx = (λ/(λ − a))^{{k}} for "
                f"a < λ, and +∞ for a ≥ λ (the integrand does not decay): T(a) exists exactly for "
                f"a < λ = {g(lam)}, every negative tilt included. Then Λ(a) = k log λ − k log(λ − a) and "
                f"T(a) = Λ′(a) = k/(λ − a) = {kk}/({g(lam)} − a); equivalently, the tilted law, "
                f"∝ e^{{ax}} x^{{k−1}} e^{{−λx}}, is Gamma(k, λ − a), of mean k/(λ − a).",
                "the domain a < λ with its reason (the generating function is infinite from λ on) "
                "and T(a) = k/(λ − a) derived, by the generating function or by the tilted law",
                "the right T(a) with no domain or no reason for it, or the right route with a slip "
                "(a lost power k, a domain −λ < a < λ)",
                "otherwise, and for the exponential law's answer 1/(λ − a) (problem set 1's public "
                "solution) or T = k/λ at every tilt",
            ),
            Part(
                "b",
                1,
                f"Evaluate T(a) at a = {g(a)}.",
                14,
                f"T({g(a)}) = {kk}/({g(lam)} − {_x(a)}) = {g(one['T'])}.",
                f"the value {g(one['T'])} (an exact fraction counts)",
                "k/(λ − a) evaluated with an arithmetic slip",
                "otherwise",
            ),
            Part(
                "c",
                1,
                "What is the coefficient of a² in the Taylor expansion of T(a) around a = 0? Which "
                "cumulant of X is it, up to a factor?",
                20,
                f"T(a) = Λ′(a) = Σⱼ κ_{{j+1}} aʲ/j!, so the coefficient of a² is κ₃/2!, half the third "
                f"cumulant. Here T(a) = (k/λ) Σⱼ (a/λ)ʲ, so it is k/λ³ = {kk}/{g(lam**3)} = "
                f"{g(one['coefficient'])} (κ₃ = 2k/λ³ = {g(one['kappa3'])}).",
                f"κ₃/2 and its value {g(one['coefficient'])}",
                "one of the two: κ₃/2 with a wrong value, or the value without the cumulant",
                "otherwise (the third moment, or κ₃ without the 1/2!)",
            ),
        ],
        "set 1, question 2 and its follow-up (Gamma tokens of shape k), with numbers; part (c) asks "
        "for a Taylor coefficient, as question 1 does",
    )
    return q1


def _q_token_variance(two: dict) -> Question:
    s2, u, z, L = two["sigma2"], two["u"], two["z"], two["L"]
    tokens = two["tokens"]
    few = (
        ": fewer than one, so the approximation has broken down and a few of the largest tokens "
        "carry the weight"
        if tokens < 1
        else ""
    )
    q2 = Question(
        2,
        "Problem set 2: concentration",
        f"Tokens 𝒩(0, σ²) in one dimension, σ² = {g(s2)}; a query z ~ 𝒩(0, 1) tilts them by a = uz "
        "(lesson 3's scalar model: U = u, V = 1). For one query, a prompt of L tokens acts like about "
        "L e^{−s} tokens of the tilted law, with s = σ²a², and L 𝔼(T_{L} − T)² → "
        "C₁(z) = e^{s}(σ² + σ⁴a²).",
        [
            Part(
                "a",
                2,
                "Above which scale u is the average of C₁(z) over the queries infinite? Derive the "
                f"threshold, and give it for σ² = {g(s2)}.",
                38,
                "𝔼_{z} C₁ = ∫ e^{σ²u²z²}(σ² + σ⁴u²z²) e^{−z²/2} dz/√(2π): the integrand is "
                "e^{(σ²u² − 1/2)z²} times a polynomial, integrable if and only if σ²u² < 1/2. So the "
                f"average is infinite for u ≥ 1/√(2σ²) = 1/√{g(2 * s2)} = {g(two['threshold'])} "
                "(each query's error still tends to 0, more slowly than 1/L). Equivalently, the error at "
                "scale u is σ² times the standard model's at scale σu, whose threshold is (σu)² = 1/2.",
                f"σ²u² < 1/2 from the Gaussian integral, and the value {g(two['threshold'])}",
                "the right threshold with no reason, or the integral with a slip (σu² < 1/2, σ not "
                "squared)",
                "otherwise, and for the bank's answer with its input, the standard model's u² = 1/2",
            ),
            Part(
                "b",
                1,
                f"At u = {g(u)} and L = {L}: how many tokens count for the query z = {g(z)}?",
                14,
                f"s = σ²u²z² = {g(s2)} × {g(u * u)} × {g(z * z)} = {g(two['s'])}, so "
                f"L e^{{−s}} = {L} e^{{−{g(two['s'])}}} ≈ {count(tokens)} tokens{few}.",
                f"s = {g(two['s'])} and L e^{{−s}} ≈ {count(tokens)} (the exact expression counts)",
                "s or L e^{−s} with a slip (a = u, z forgotten; σ not squared)",
                "otherwise",
            ),
            Part(
                "c",
                1,
                "For σ² = 1 the average is C̄(v) = (1 − 2v²)^{−1/2} + v²(1 − 2v²)^{−3/2} at scale v. "
                f"Use it to give the average C̄₁ at σ² = {g(s2)} and u = {g(u)}.",
                20,
                f"Tokens σY with Y ~ 𝒩(0, 1): the error at scale u is σ² times the standard one at "
                f"scale σu, so C̄₁ = σ² C̄(σu) with v² = σ²u² = {g(two['v2'])}: "
                f"{g(s2)} × ({g(1 - 2 * two['v2'])}^{{−1/2}} + {g(two['v2'])} × "
                f"{g(1 - 2 * two['v2'])}^{{−3/2}}) = {g(two['averaged'])}, that is "
                "σ²(1 − v²)(1 − 2v²)^{−3/2}.",
                f"σ² C̄(σu) and its value {g(two['averaged'])} (the exact expression counts)",
                "the scale σu right, the factor σ² missing, or an arithmetic slip",
                "otherwise (C̄(u) or C̄(σ²u))",
            ),
        ],
        "set 2, question 2's follow-up (tokens 𝒩(0, σ²)) and question 1's (how many tokens count), "
        f"here at L = {L} and for one query",
    )
    return q2


def _part_linear(three: dict, d: int, trace: float) -> Part:
    """Set 3's part (c), in both forms: C_lin (its formula given) and the matching prompt length."""
    tau2, gamma2, L3 = three["tau2"], three["gamma2"], three["L"]
    return Part(
        "c",
        1,
        f"Now tasks w ~ 𝒩(0, τ²I), τ² = {g(tau2)}, and label noise of variance "
        f"γ² = {g(gamma2)}. Give C_{{lin}} = τ²(d + 1) tr Σ. With C_{{soft}} = "
        f"{three['C_soft_printed']:.2f} "
        "here (the best scale, found numerically), at which prompt length L′ does the best "
        "linear attention's excess over the Bayes risk equal the best softmax attention's at "
        f"L = {L3} (an excess ≈ C/L)?",
        26,
        f"C_{{lin}} = τ²(d + 1) tr Σ = {g(tau2)} × {d + 1} × {g(trace)} = {g(three['C_lin'])}: "
        "the noise does not enter. C_{lin}/L′ = C_{soft}/L gives "
        f"L′ = {L3} × {g(three['C_lin'])}/{three['C_soft_printed']:.2f} ≈ "
        f"{three['matched']:.0f}.",
        f"C_{{lin}} = {g(three['C_lin'])} and L′ ≈ {three['matched']:.0f}",
        "one of the two, or both with an arithmetic slip",
        "otherwise (C_{lin} grown with the noise; L′ = L C_{soft}/C_{lin})",
    )


def _q_isotropic(three: dict) -> Question:
    c, d = three["c"], three["d"]
    finite = three["finite"]
    q3 = Question(
        3,
        "Problem set 3: in-context regression",
        f"Lessons 5 and 6: inputs x ~ 𝒩(0, Σ) with Σ = c·I_{{d}}, c = {g(c)}, in dimension d = {d}. "
        "The limit (A⋆, b⋆) of the balanced flow predicts exactly, b⋆ΣA⋆ = I, and is balanced, "
        "‖A⋆‖_{F} = b⋆.",
        [
            Part(
                "a",
                2,
                "Derive b⋆² for Σ = c·I_{d}, and evaluate it.",
                40,
                "b⋆ΣA⋆ = I gives A⋆ = Σ^{−1}/b⋆, so ‖A⋆‖_{F}² = tr(Σ^{−2})/b⋆² = b⋆² and "
                f"b⋆⁴ = tr(Σ^{{−2}}) = d/c²: b⋆² = √d/c = √{d}/{g(c)} = {g(three['b2'])}.",
                f"A⋆ = Σ^{{−1}}/b⋆, then b⋆⁴ = d/c², b⋆² = √d/c = {g(three['b2'])}",
                "√d/c stated without the derivation, or the derivation with a slip (b⋆² = √d/c²)",
                "otherwise, and for the bank's answer with its input, Σ = I's b⋆² = √d",
            ),
            Part(
                "b",
                1,
                "Lesson 5's constant C⋆ at (A⋆, b⋆) is finite if and only if Σ^{−1} − 2A⋆ᵀΣA⋆ is "
                f"positive definite. At c = {g(c)}, for which d is it finite? Is it at d = {d}?",
                22,
                "A⋆ᵀΣA⋆ = Σ^{−1}/b⋆², so Σ^{−1} − 2A⋆ᵀΣA⋆ = (1 − 2/b⋆²)Σ^{−1}: positive definite iff "
                f"b⋆² > 2, that is √d > 2c, d > 4c² = {g(three['border'])}: finite for "
                f"d ≥ {three['d_min']}. At d = {d}, b⋆² = {g(three['b2'])} "
                + (
                    "> 2: finite."
                    if finite
                    else "≤ 2: infinite (its average over queries diverges; at the best scale, "
                    f"A = r⋆A⋆ and b = b⋆/r⋆ with r⋆ = {g(three['scale'])}, the constant C_{{soft}} "
                    "is finite)."
                ),
                f"d > 4c² = {g(three['border'])} (d ≥ {three['d_min']}) and "
                f"{'finite' if finite else 'infinite'} at d = {d}",
                "one of the two",
                "otherwise, and for the bank's answer with its input, Σ = I's d > 4",
            ),
            _part_linear(three, d, c * d),
        ],
        "set 3, question 1's follow-up (Σ = I_{d}), here with Σ = c·I_{d}, and question 4's (label "
        "noise), with C_{soft} given",
    )
    return q3


def _q_two_point(one: dict) -> Question:
    x1, x2, p, a = one["x1"], one["x2"], one["p"], one["a"]
    r = 1 - p
    return Question(
        1,
        "Problem set 1: attention on measures",
        f"Tokens X in one dimension take the value x₁ = {g(x1)} with probability p = {g(p)} and "
        f"x₂ = {g(x2)} otherwise. A query tilts them by a: the infinite-prompt output T(a) is the mean "
        "of the tilted law, which gives each value a weight proportional to e^{ax} times its "
        "probability.",
        [
            Part(
                "a",
                2,
                "For which tilts a does T(a) exist? Derive T(a), and its limits as a → +∞ and "
                "a → −∞.",
                40,
                f"𝔼 e^{{aX}} = p e^{{a x₁}} + (1 − p) e^{{a x₂}} is finite for every a, so T(a) exists "
                "for every tilt. The tilted law puts the weights w₁ = p e^{ax₁} and "
                "w₂ = (1 − p) e^{ax₂} (normalised) on x₁ and x₂: "
                "T(a) = (x₁w₁ + x₂w₂)/(w₁ + w₂) = Λ′(a), Λ(a) = log 𝔼 e^{aX}. It runs between the two "
                f"values: T(a) → x₂ = {g(x2)} as a → +∞ and x₁ = {g(x1)} as a → −∞ (the largest, or "
                "smallest, token takes all the weight: a lookup).",
                "every a, with its reason (a bounded law), T(a) derived as the tilted mean, and both "
                "limits",
                "T(a) right with no domain or no limits, or the right route with a slip",
                "otherwise, and for the Gaussian's affine limit",
            ),
            Part(
                "b",
                1,
                f"Evaluate T(a) at a = {g(a)}.",
                14,
                f"w₁ = {g(p)} e^{{{g(a * x1)}}} = {g(one['w1'])}, w₂ = {g(1 - p)} e^{{{g(a * x2)}}} = "
                f"{g(one['w2'])}: T({g(a)}) = ({_x(x1)} × {g(one['w1'])} + {_x(x2)} × "
                f"{g(one['w2'])})/({g(one['w1'])} + {g(one['w2'])}) = {g(one['T'])}.",
                f"the value {g(one['T'])} (the exact expression counts)",
                "the right expression evaluated with a slip",
                "otherwise",
            ),
            Part(
                "c",
                1,
                "What is the coefficient of a² in the Taylor expansion of T(a) around a = 0? Which "
                "cumulant of X is it, up to a factor?",
                20,
                "T(a) = Λ′(a) = Σⱼ κ_{j+1} aʲ/j!, so the coefficient of a² is κ₃/2!, half the third "
                "cumulant. With X = x₁ + (x₂ − x₁)B, B ~ Bernoulli(r), r = 1 − p: "
                f"κ₃ = (x₂ − x₁)³ r(1 − r)(1 − 2r) = {g((x2 - x1) ** 3)} × {g(r * (1 - r))} × "
                f"{_x(1 - 2 * r)} = {g(one['kappa3'])}, so the coefficient is {g(one['coefficient'])}.",
                f"κ₃/2 and its value {g(one['coefficient'])}",
                "one of the two: κ₃/2 with a wrong value, or the value without the cumulant",
                "otherwise (the third moment about 0, or κ₃ without the 1/2!)",
            ),
        ],
        "set 1, question 3's follow-up (a two-point law) with other values and weights; part (c) "
        "asks for a Taylor coefficient, as question 1 does",
    )


def _q_query_variance(two: dict) -> Question:
    s2, q2, u, z, N = two["sigma2"], two["q2"], two["u"], two["z"], two["N"]
    return Question(
        2,
        "Problem set 2: concentration",
        f"Tokens 𝒩(0, σ²) in one dimension, σ² = {g(s2)}; a query z ~ 𝒩(0, q²), q² = {g(q2)}, tilts "
        "them by a = uz (lesson 3's scalar model, U = u, V = 1, with wider or narrower queries). For "
        "one query, a prompt of L tokens acts like about L e^{−s} tokens of the tilted law, with "
        "s = σ²a², and L 𝔼(T_{L} − T)² → C₁(z) = e^{s}(σ² + σ⁴a²).",
        [
            Part(
                "a",
                2,
                "Above which scale u is the average of C₁(z) over the queries infinite? Derive the "
                f"threshold, and give it for σ² = {g(s2)} and q² = {g(q2)}.",
                38,
                "𝔼_{z} C₁ = ∫ e^{σ²u²z²}(σ² + σ⁴u²z²) e^{−z²/(2q²)} dz/√(2πq²): the integrand is "
                "e^{(σ²u² − 1/(2q²))z²} times a polynomial, integrable if and only if σ²u²q² < 1/2. "
                f"So the average is infinite for u ≥ 1/√(2σ²q²) = 1/√{g(2 * s2 * q2)} = "
                f"{g(two['threshold'])}. Equivalently, z = qY with Y ~ 𝒩(0, 1) turns the scale u "
                "into qu, and the tokens' scale into σ: the threshold (σqu)² = 1/2.",
                f"σ²u²q² < 1/2 from the Gaussian integral, and the value {g(two['threshold'])}",
                "the right threshold with no reason, or the integral with a slip (q or σ not squared, "
                "q forgotten)",
                "otherwise, and for the bank's answer with its inputs, u² = 1/2 or σ²u² = 1/2",
            ),
            Part(
                "b",
                1,
                f"At u = {g(u)}, how long must a prompt be for about N = {N} tokens to count for the "
                f"query z = {g(z)}?",
                14,
                f"s = σ²u²z² = {g(s2)} × {g(u * u)} × {g(z * z)} = {g(two['s'])}, and L e^{{−s}} ≥ N "
                f"gives L ≥ N e^{{s}} = {N} e^{{{g(two['s'])}}} = {N * math.exp(two['s']):.2f}, so "
                f"L = {two['length']} tokens (the next whole number).",
                f"s = {g(two['s'])} and L ≈ {two['length']} (N e^{{s}}, the exact expression, counts)",
                "s or N e^{s} with a slip (z or σ not squared; L = N e^{−s})",
                "otherwise",
            ),
            Part(
                "c",
                1,
                "For σ² = q² = 1 the average is C̄(v) = (1 − 2v²)^{−1/2} + v²(1 − 2v²)^{−3/2} at scale "
                f"v. Use it to give the average C̄₁ at σ² = {g(s2)}, q² = {g(q2)} and u = {g(u)}.",
                20,
                "Tokens σY′ and queries qY: the error at scale u is σ² times the standard one at scale "
                f"σqu, so C̄₁ = σ² C̄(σqu) with v² = σ²q²u² = {g(two['v2'])}: {g(s2)} × "
                f"({g(1 - 2 * two['v2'])}^{{−1/2}} + {g(two['v2'])} × {g(1 - 2 * two['v2'])}^{{−3/2}}) "
                f"= {g(two['averaged'])}.",
                f"σ² C̄(σqu) and its value {g(two['averaged'])} (the exact expression counts)",
                "the scale σqu right, the factor σ² missing, or an arithmetic slip",
                "otherwise (C̄(σu), q forgotten)",
            ),
        ],
        "set 2, question 2's follow-up (tokens 𝒩(0, σ²)) with the queries' variance changed too, and "
        "question 1's (how many tokens count) turned round: the prompt length for N of them",
    )


def _q_two_blocks(three: dict) -> Question:
    c1, c2, d1, d2 = three["c1"], three["c2"], three["d1"], three["d2"]
    d = three["d"]
    finite = three["finite"]
    return Question(
        3,
        "Problem set 3: in-context regression",
        f"Lessons 5 and 6: inputs x ~ 𝒩(0, Σ) in dimension d = d₁ + d₂ = {d}, with Σ diagonal: "
        f"c₁ = {g(c1)} on its first d₁ = {d1} coordinates and c₂ = {g(c2)} on the other d₂ = {d2}. "
        "The limit (A⋆, b⋆) of the balanced flow predicts exactly, b⋆ΣA⋆ = I, and is balanced, "
        "‖A⋆‖_{F} = b⋆.",
        [
            Part(
                "a",
                2,
                "Derive b⋆² for this Σ, and evaluate it.",
                40,
                "b⋆ΣA⋆ = I gives A⋆ = Σ^{−1}/b⋆, so ‖A⋆‖_{F}² = tr(Σ^{−2})/b⋆² = b⋆² and "
                f"b⋆⁴ = tr(Σ^{{−2}}) = d₁/c₁² + d₂/c₂² = {g(three['b4'])}: "
                f"b⋆² = {g(three['b2'])}.",
                f"A⋆ = Σ^{{−1}}/b⋆, then b⋆⁴ = d₁/c₁² + d₂/c₂², b⋆² = {g(three['b2'])}",
                "the formula stated without the derivation, or the derivation with a slip (c not "
                "squared, tr Σ^{−1})",
                "otherwise, and for the bank's answer with its input, Σ = I's b⋆² = √d",
            ),
            Part(
                "b",
                1,
                "Lesson 5's constant C⋆ at (A⋆, b⋆) is finite if and only if Σ^{−1} − 2A⋆ᵀΣA⋆ is "
                "positive definite. Is it finite here? With c₁, c₂ and d₂ fixed, from which d₁ on is "
                "it finite?",
                22,
                "A⋆ᵀΣA⋆ = Σ^{−1}/b⋆², so Σ^{−1} − 2A⋆ᵀΣA⋆ = (1 − 2/b⋆²)Σ^{−1}: positive definite iff "
                f"b⋆² > 2, that is d₁/c₁² + d₂/c₂² > 4. Here b⋆² = {g(three['b2'])}: "
                + ("finite. " if finite else "infinite. ")
                + f"It is finite for d₁ > c₁²(4 − d₂/c₂²) = {g(c1 * c1 * (4 - d2 / c2**2))}, that is "
                f"from d₁ = {three['d_min']} on.",
                f"{'finite' if finite else 'infinite'} here, and d₁ ≥ {three['d_min']}",
                "one of the two",
                "otherwise, and for the bank's answer with its input, Σ = I's d > 4",
            ),
            _part_linear(three, d, three["trace"]),
        ],
        "set 3, question 1's follow-up (Σ = I_{d}), here with Σ in two blocks, and question 4's "
        "(label noise), with C_{soft} given",
    )


TITLE = "Softmax attention: written check"
INSTRUCTIONS = (
    "**30 minutes, closed book, pen and paper.** Three questions, one per problem set, 4 points each "
    "(12 in all); the points of each part are in brackets. Answer in the space below each part and "
    "show how you get each result. No calculator is needed: an exact expression, such as "
    "1000 e^{−1/2} or 3√2, is a full answer."
)


def _inline_md(text: str) -> str:
    """The sheet's markup for Markdown: ``^{x}`` as ``^(x)`` (``^x`` for one character), ``_{x}`` as
    ``_x`` (letters and digits) or ``_(x)``; ``**bold**`` kept."""
    text = re.sub(r"\^\{([^{}])\}", r"^\1", text)
    text = re.sub(r"\^\{([^{}]*)\}", r"^(\1)", text)
    return re.sub(r"_\{([^{}]+)\}", lambda m: "_" + (m[1] if m[1].isalnum() else f"({m[1]})"), text)


def _cell_md(text: str) -> str:
    """:func:`_inline_md` in a Markdown table's cell (a ``|`` escaped)."""
    return _inline_md(text).replace("|", "\\|")


def _inline_html(text: str) -> str:
    text = html.escape(text, quote=False)
    text = re.sub(r"\^\{([^{}]*)\}", r"<sup>\1</sup>", text)
    text = re.sub(r"_\{([^{}]*)\}", r"<sub>\1</sub>", text)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)


def _title(variant: int | None, key_page: bool, problem_set: int | None = None) -> str:
    suffix = ", the answer key" if key_page else ""
    head = TITLE if problem_set is None else f"{TITLE} on problem set {problem_set}"
    # the default build's key is public (anyone can rebuild it): its title says so
    return head + suffix + (" (specimen, not for grading)" if variant is None else " (variant)")


def instructions(problem_set: int | None = None) -> str:
    """The sheet's instructions: the whole check's (:data:`INSTRUCTIONS`) or one set's, ten minutes."""
    if problem_set is None:
        return INSTRUCTIONS
    return INSTRUCTIONS.replace(
        "**30 minutes, closed book, pen and paper.** Three questions, one per problem set, 4 points each "
        "(12 in all)",
        f"**10 minutes, closed book, pen and paper.** One question, on problem set {problem_set}, "
        "4 points",
        1,
    )


def scoring(problem_set: int | None = None) -> str:
    """The key's scoring guide (:data:`SCORING`): 12 points in all, or 4 for one set's question."""
    if problem_set is None:
        return SCORING
    return SCORING.replace("0 to 4 per question, 12 in all", "0 to 4", 1)


def sheet_md(qs: list[Question], variant: int | None, problem_set: int | None = None) -> str:
    lines = [
        f"# {_title(variant, False, problem_set)}",
        "",
        "Name: ______________________________  Student number: ________________",
        "",
        _inline_md(instructions(problem_set)),
        "",
    ]
    for q in qs:
        lines += [f"## Question {q.number} (4 points). {q.title}", "", _inline_md(q.stem), ""]
        for p in q.parts:
            lines += [f"**({p.label})** [{p.points}] {_inline_md(p.ask)}", "", "&nbsp;", ""]
    return "\n".join(lines)


def key_md(qs: list[Question], variant: int | None, problem_set: int | None = None) -> str:
    lines = [
        f"# {_title(variant, True, problem_set)}",
        "",
        "For graders only: keep it, like the sets' rubrics and the oral bank, from students.",
        "",
        *([SPECIMEN, ""] if variant is None else []),
        scoring(problem_set),
        "",
    ]
    for q in qs:
        lines += [
            f"## Question {q.number} (4 points). {q.title}",
            "",
            f"*From the oral bank: {_inline_md(q.bank)}.*",
            "",
            _inline_md(q.stem),
            "",
        ]
        for p in q.parts:
            lines += [
                f"**({p.label}) [{p.points}]** {_inline_md(p.ask)}",
                "",
                f"**Answer.** {_inline_md(p.answer)}",
                "",
                "| points | when |",
                "|---|---|",
                f"| {p.points} | {_cell_md(p.full)} |",
                f"| {_half(p.points)} | {_cell_md(p.partial)} |",
                f"| 0 | {_cell_md(p.none)} |",
                "",
            ]
    lines += [NUMBERS, ""]
    return "\n".join(lines)


SPECIMEN = (
    "Specimen: anyone can rebuild this key. For a grade, run `python written_check.py --seed SEED` "
    "with a private seed."
)
SCORING = (
    "**Scoring, 0 to 4 per question, 12 in all** (the oral bank's scale): part (a) is the bank "
    "question's derivation, scored 0 to 2 (2: the full answer below; 1: the right idea with a slip or "
    "without the computation; 0: otherwise); parts (b) and (c) are the follow-up, with the changed "
    "input, scored 0 to 2 together: each 1 for its full answer, 1/2 for the right idea with a slip, 0 "
    "otherwise. Score what is written: a bank answer restated with the bank's input earns nothing. An "
    "exact expression in place of a decimal is a full answer."
)
NUMBERS = (
    "The numbers of this key are computed by written_check.py (in the kit's problem-sets/ folder) "
    "from the "
    "softlin library (the token law's tilted mean and covariance by automatic differentiation of its "
    "log-MGF; concentration.ess_ratio_expansion and query_averaged_expansion; "
    "icl.bayes_optimal_parameters, risk_fluctuation_constant and large_prompt_constants), each checked "
    "against its closed form."
)


def _half(points: int) -> str:
    return "1/2" if points == 1 else f"{points / 2:g}"


CSS = """
@page { size: A4; margin: 13mm 15mm 13mm 15mm; }
html { font-family: "DejaVu Serif", "Liberation Serif", "Times New Roman", serif; font-size: 10pt;
  line-height: 1.3; color: #000; }
body { margin: 0 auto; max-width: 180mm; }
h1 { font-size: 15pt; margin: 0 0 3mm; }
h2 { font-size: 12pt; margin: 5mm 0 1.5mm; break-after: avoid; }
p { margin: 0 0 2mm; }
.who { display: flex; gap: 8mm; margin: 0 0 3mm; }
.who span { flex: 1; border-bottom: 1px solid #000; padding-top: 4mm; }
.instructions { border: 1px solid #000; padding: 2mm 3mm; margin-bottom: 2mm; }
.stem { break-after: avoid; }
.part, .lead { break-inside: avoid; }
.part { margin: 0 0 2mm; }
.space { border: 1px solid #888; border-radius: 1.5mm; margin-top: 1mm; }
.key-part { break-inside: avoid; margin: 0 0 3mm; }
.key-question { break-before: page; }  /* the key: a page per question */
.bank { font-style: italic; color: #333; }
table { border-collapse: collapse; width: 100%; margin: 1mm 0 2mm; font-size: 9.5pt; }
td, th { border: 1px solid #999; padding: 1mm 2mm; vertical-align: top; text-align: left; }
td:first-child, th:first-child { width: 12mm; text-align: center; }
.note { font-size: 9pt; color: #333; }
@media screen { body { padding: 10mm; } }
"""


def _page(title: str, body: list[str]) -> str:
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f"<title>{html.escape(title)}</title>",
            f"<style>{CSS}</style>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


#: A one-set sheet (``--set N``) has a page for one question: each part's room to write grows by this
#: factor (the sheet still prints on one page, every form; tests/test_kit_written_check.py).
ONE_SET_ROOM = 1.6


def sheet_html(qs: list[Question], variant: int | None, problem_set: int | None = None) -> str:
    title = _title(variant, False, problem_set)
    room = 1.0 if problem_set is None else ONE_SET_ROOM
    body = [
        f"<h1>{html.escape(title)}</h1>",
        '<div class="who"><span>Name:</span><span>Student number:</span></div>',
        f'<p class="instructions">{_inline_html(instructions(problem_set))}</p>',
    ]
    for q in qs:
        body += [
            '<section class="question">',
            '<div class="lead">',  # the heading and the stem stay with part (a)
            f"<h2>Question {q.number} (4 points). {html.escape(q.title)}</h2>",
            f'<p class="stem">{_inline_html(q.stem)}</p>',
        ]
        for n, p in enumerate(q.parts):
            body += [
                '<div class="part">',
                f"<p><strong>({p.label})</strong> [{points_text(p.points)}] {_inline_html(p.ask)}</p>",
                f'<div class="space" style="height: {round(p.space * room)}mm"></div>',
                "</div>",
                *(["</div>"] if n == 0 else []),
            ]
        body.append("</section>")
    return _page(title, body)


def points_text(points: int) -> str:
    return f"{points} point" + ("" if points == 1 else "s")


def key_html(qs: list[Question], variant: int | None, problem_set: int | None = None) -> str:
    title = _title(variant, True, problem_set)
    body = [
        f"<h1>{html.escape(title)}</h1>",
        "<p><strong>For graders only</strong>: keep it, like the sets' rubrics and the oral bank, "
        "from students." + (" " + _inline_html(SPECIMEN) if variant is None else "") + "</p>",
        f'<p class="instructions">{_inline_html(scoring(problem_set))}</p>',
    ]
    for q in qs:
        body += [
            f'<section class="{"key-question" if q.number > 1 else "question"}">',
            '<div class="lead">',  # the heading, the bank's line and the stem stay with part (a)
            f"<h2>Question {q.number} (4 points). {html.escape(q.title)}</h2>",
            f'<p class="bank">From the oral bank: {_inline_html(q.bank)}.</p>',
            f'<p class="stem">{_inline_html(q.stem)}</p>',
        ]
        for n, p in enumerate(q.parts):
            body += [
                *(["</div>"] if n == 1 else []),
                '<div class="key-part">',
                f"<p><strong>({p.label}) [{points_text(p.points)}]</strong> {_inline_html(p.ask)}</p>",
                f"<p><strong>Answer.</strong> {_inline_html(p.answer)}</p>",
                "<table><tr><th>points</th><th>when</th></tr>",
                f"<tr><td>{p.points}</td><td>{_inline_html(p.full)}</td></tr>",
                f"<tr><td>{_half(p.points)}</td><td>{_inline_html(p.partial)}</td></tr>",
                f"<tr><td>0</td><td>{_inline_html(p.none)}</td></tr>",
                "</table>",
                "</div>",
            ]
        body.append("</section>")
    body.append(f'<p class="note">{_inline_html(NUMBERS)}</p>')
    return _page(title, body)


# --- printing --------------------------------------------------------------------------------------------


def chromium() -> str | None:
    """A headless Chromium on the PATH, or None (the PDFs are then left out)."""
    return next(
        (
            shutil.which(n)
            for n in ("chromium", "chromium-browser", "google-chrome")
            if shutil.which(n)
        ),
        None,
    )


def print_pdf(page: Path, pdf: Path, browser: str, timeout: float = 120) -> bool:
    """Print ``page`` (HTML) to ``pdf`` with headless Chromium and the page's own print style (A4);
    whether it worked (a failure is reported on stderr, not raised: the PDF is optional)."""
    with tempfile.TemporaryDirectory() as profile:
        try:
            done = subprocess.run(
                [
                    browser,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-pdf-header-footer",
                    f"--user-data-dir={profile}",
                    f"--print-to-pdf={pdf}",
                    page.resolve().as_uri(),
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            print(f"written_check: {browser} did not print {page.name}: {err}", file=sys.stderr)
            return False
    if done.returncode != 0 or not pdf.exists():
        print(
            f"written_check: {browser} did not print {page.name} (exit {done.returncode}): "
            f"{done.stderr[-500:]}",
            file=sys.stderr,
        )
        return False
    return True


def pdf_pages(pdf: Path) -> int | None:
    """The page count of ``pdf`` by ``pdfinfo`` (poppler-utils), or None without it."""
    if not shutil.which("pdfinfo"):
        return None
    done = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=False)
    m = re.search(r"^Pages:\s+(\d+)", done.stdout, re.M)
    return int(m[1]) if m else None


#: The most printed pages the students' sheet may take.
MAX_PAGES = 2


def build(
    out: Path = OUT, variant: int | None = None, pdf: bool = True, problem_set: int | None = None
) -> list[Path]:
    """Write the sheet and its key into ``out`` (Markdown and HTML; PDF too when ``pdf`` and Chromium is
    installed); return the files written. With ``problem_set`` (1, 2 or 3), the ten-minute check on that
    set alone: its question of the whole check for the same ``variant``, as question 1 of a sheet of its
    own (:func:`files` names them)."""
    if not isinstance(out, Path):
        raise TypeError(f"out must be a pathlib.Path, got {out!r} ({type(out).__name__})")
    if problem_set is not None and (isinstance(problem_set, bool) or problem_set not in SETS):
        raise ValueError(f"problem_set must be one of {SETS} or None, got {problem_set!r}")
    qs = questions(key(inputs(variant)))
    if problem_set is not None:
        qs = [dataclasses.replace(qs[problem_set - 1], number=1)]
    names, pdfs = files(problem_set)
    out.mkdir(parents=True, exist_ok=True)
    texts = (
        sheet_md(qs, variant, problem_set),
        sheet_html(qs, variant, problem_set),
        key_md(qs, variant, problem_set),
        key_html(qs, variant, problem_set),
    )
    written = []
    for name, text in zip(names, texts):
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    for name in pdfs:
        (out / name).unlink(missing_ok=True)  # no stale PDF of other inputs
    browser = chromium() if pdf else None
    if browser:
        for page, name in zip((names[1], names[3]), pdfs):
            if print_pdf(out / page, out / name, browser):
                written.append(out / name)
        pages = pdf_pages(out / pdfs[0]) if (out / pdfs[0]).exists() else None
        most = MAX_PAGES if problem_set is None else 1
        if pages is not None and pages > most:
            print(
                f"written_check: the sheet prints on {pages} pages, more than {most}",
                file=sys.stderr,
            )
    return written


def variant_out(variant: int | None) -> Path:
    """The problem sets' build folder in the repository, where ``make problem-sets [VARIANT=SEED]`` puts
    the written check: ``_build/problem-sets/`` or ``_build/problem-sets-variant-SEED/``
    (``tools/problem_sets.py`` builds there too)."""
    return OUT if variant is None else OUT.with_name(f"problem-sets-variant-{variant}")


def default_out(variant: int | None) -> Path:
    """Where :func:`main` writes without ``--out``: in the repository, the problem sets' build folder
    (:func:`variant_out`); for the copy in a built folder, ``written-check-SEED/`` beside it."""
    if IN_REPOSITORY:
        return variant_out(variant)
    return HERE / f"written-check-{variant}"


#: Seeds below this (fewer than eight digits) are easy to guess: :func:`main` says so.
PRIVATE_SEED = 10_000_000


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"got {text!r}, expected an integer (a seed of your own, eight digits or so)"
        ) from None


#: What ``--help`` says: the usage, not the whole docstring (which speaks of the repository too).
HELP = """Write a written check of the problem sets' derivations and its answer key (Markdown, HTML,
and PDF where headless Chromium is found), for a seed of your own; never hand out the default's.

    python written_check.py --seed SEED            # the whole check: written-check-SEED/
    python written_check.py --seed SEED --set 1    # the ten-minute check on set 1 alone
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=HELP,
        epilog="The top of this file says what each question asks and how its key is computed.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--seed",
        "--variant",
        dest="seed",
        type=_seed,
        default=None,
        metavar="SEED",
        help="draw the inputs from the integer SEED (keep it private: eight digits or so); the same "
        "files as `make problem-sets VARIANT=SEED` writes for the written check. Required in a built "
        "folder, whose written-check.* are the default check's",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="where to write (default: in the repository, the problem sets' build folder; in a "
        "built folder, written-check-SEED/ beside this file)",
    )
    ap.add_argument(
        "--set",
        dest="problem_set",
        type=int,
        choices=SETS,
        default=None,
        metavar="N",
        help="the ten-minute check on problem set N (1, 2 or 3) alone, for the start of a session: "
        "written-check-setN.* and its key, the whole check's question N for the same seed",
    )
    ap.add_argument("--no-pdf", action="store_true", help="leave the PDFs out")
    args = ap.parse_args(argv)
    if args.seed is None and not IN_REPOSITORY:
        ap.error(
            "argument --seed: got none, expected an integer seed of your own (eight digits or so); "
            "the written-check.* beside this file are those of the build (the default check's, which "
            "anyone rebuilds with its key from the public sources, unless the build was a variant)"
        )
    if args.seed is not None and abs(args.seed) < PRIVATE_SEED:
        print(
            f"written_check: note: the seed {args.seed} has fewer than eight digits; for a graded "
            "check pick one nobody can guess",
            file=sys.stderr,
        )
    out = args.out or default_out(args.seed)
    for path in build(out, args.seed, pdf=not args.no_pdf, problem_set=args.problem_set):
        print(f"written_check: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
