#!/usr/bin/env python
"""Reference values for the Monte Carlo checks of chapters 3 and 5, computed once and committed.

    .venv/bin/python tools/reference_values.py            # -> book/data/reference_values.json

Each page compares its own estimate with an independent, longer run of the same estimator; this script
is that run, and the file it writes (values, standard errors, provenance) is what the pages read.

1. **Chapter 3, query-averaged rate slopes** (``rate_slopes``): for the scales u = 0.3, 0.6, 1.0, 1.5
   of the scalar model, the log-log slope of the query-averaged output error over
   L = 16, 32, ..., 4096. The sweep is the page's own code: the cell of ``book/03_concentration.md``
   that defines ``rate_sweep`` and ``summarise`` is executed here (nothing is re-typed), with the
   default mode's Gauss-Hermite rule (24 nodes) and 200 times its prompts, as ``RATE_BATCHES``
   independent batches of the default mode's size (400 prompts; larger batches are slower per
   token, since ``sample_errors`` then streams the tokens in shorter chunks). ``quadrature`` is the
   change of the slope with the rule of half as many nodes, as on the page.

   ``slope_se`` is the standard error of the weighted fit on all the prompts, the page's fit,
   without the factor sqrt(chi2/dof) that ``fit_power_law`` applies when the points scatter more
   than their errors about a power law (that widened error is kept as ``slope_se_fit``). At this
   precision the curvature of the error curve is resolved, and that factor grows with the number
   of prompts: it measures how far the curve is from a power law, not how far this estimate is from
   what the page's fit estimates (the weighted least-squares slope over the same grid, whose
   weights have ratios across L that do not depend on the number of prompts). Two direct estimates
   check it: ``batches_se``, the standard deviation of the batch slopes (``batch_sd``, the spread
   of one default-mode run) over sqrt(RATE_BATCHES), and ``halves_se``, half the difference of the
   slopes of two independent halves (one degree of freedom: rough).
2. **Chapter 5, R_L(A*, b*)** (``risk_star``): the finite-prompt risk of the reduced softmax model at
   the infinite-prompt optimum, by ``icl.finite_prompt_risk`` with the page's arguments (KMS
   covariance d = 5, rho = 1/2; float32 draws), at 133 times the default mode's prompts, in
   ``RISK_BATCHES`` independent batches: the mean, its standard error, and the same two checks of it.

The seeds (``seeds`` in the file) are not those a reader sets on a page (small integers), so a
page's estimate and this one are independent. Sizes: the constants below. The committed run took
610 s of CPU on one thread (403 s for the slopes, 207 s for the risks; 36 minutes of wall time, the
machine's two AMD EPYC cores being shared with two training jobs), as its file records
(``cpu_seconds``, ``seconds``). Its standard errors are 13 to 14 times smaller than those of a
default-mode page for the slopes (``batch_sd``, the spread of one default-size run, against
``slope_se``) and sqrt(133) = 11.5 times for the risks.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import re
import time
from pathlib import Path

import numpy as np
import torch
from checkout import results_header
from softlin import GaussianMeasure, gauss_hermite_rule, icl
from softlin import concentration as cc
from softlin.montecarlo import fit_power_law, mean_and_stderr

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "book" / "data" / "reference_values.json"
CH3 = ROOT / "book" / "03_concentration.md"
F64 = dict(dtype=torch.float64)

#: chapter 3: the page's headline scales and grid, its default-mode rule, and the prompts per batch
RATE_U, RATE_L, RATE_NODES = [0.3, 0.6, 1.0, 1.5], [16 * 2**k for k in range(9)], 24
RATE_PROMPTS, RATE_BATCHES = 400, 200
RATE_SEED = 30_000_000  # batch k draws from seed RATE_SEED + k
#: chapter 5: the page's prompt lengths, and the prompts per batch
RISK_L, RISK_PROMPTS, RISK_BATCHES = [10, 30, 100, 300, 1000], 250_000, 16
RISK_SEED = 50_000_000


def page_driver():
    """The names defined by chapter 3's driver cell (the one that defines ``rate_sweep``), run in
    the setup that the page's earlier cells give it."""
    cells = re.findall(r"```\{code-cell\} ipython3\n(.*?)```", CH3.read_text(), flags=re.S)
    (cell,) = [c for c in cells if "def rate_sweep(" in c]
    cell = re.sub(r"\A:tags:.*\n", "", cell)  # the cell's tag line is MyST, not Python
    one = torch.ones(1, 1, **F64)
    names = {
        "torch": torch,
        "cc": cc,
        "gauss_hermite_rule": gauss_hermite_rule,
        "mean_and_stderr": mean_and_stderr,
        "fit_power_law": fit_power_law,
        "F64": F64,
        "one": one,
        "N01": GaussianMeasure(torch.zeros(1, **F64), one),
        "Lr": np.array(RATE_L, dtype=float),  # read by summarise, as on the page
    }
    exec(compile(cell, str(CH3), "exec"), names)
    return names


def pooled(batches):
    """Concatenate the per-prompt errors of several ``rate_sweep`` runs, L by L and rule by rule."""
    return [[torch.cat(rule) for rule in zip(*at_L)] for at_L in zip(*batches)]


def rate_slopes(scale):
    page = page_driver()
    n = max(2, round(RATE_PROMPTS * scale))
    batches = []
    for k in range(RATE_BATCHES):
        gen = torch.Generator().manual_seed(RATE_SEED + k)
        batches.append(page["rate_sweep"](RATE_U, RATE_L, n, RATE_NODES, gen))
        if (k + 1) % 20 == 0:
            print(f"  rate sweep: {k + 1} of {RATE_BATCHES} batches done", flush=True)
    _, _, fits = page["summarise"](pooled(batches))
    _, _, coarse = page["summarise"](pooled(batches), r=1)
    halves = [page["summarise"](pooled(h))[2] for h in (batches[::2], batches[1::2])]
    each = np.array([[f.slope for f in page["summarise"](b)[2]] for b in batches])  # (K, n_u)
    out = {}
    for i, u in enumerate(RATE_U):
        h = [halves[0][i].slope, halves[1][i].slope]
        f = fits[i]
        out[str(u)] = {
            "slope": round(f.slope, 5),
            "slope_se": round(f.slope_stderr / math.sqrt(max(1.0, f.chi2_dof)), 5),
            "slope_se_fit": round(f.slope_stderr, 5),
            "chi2_dof": round(fits[i].chi2_dof, 3),
            "quadrature": round(abs(f.slope - coarse[i].slope), 5),
            "halves": [round(s, 5) for s in h],
            "halves_se": round(abs(h[0] - h[1]) / 2, 5),
            "batch_sd": round(float(each[:, i].std(ddof=1)), 5),
            "batches_se": round(float(each[:, i].std(ddof=1)) / math.sqrt(RATE_BATCHES), 5),
        }
        print(f"  u = {u}: slope {f.slope:+.4f} +- {out[str(u)]['slope_se']:.4f}", flush=True)
    return {
        "page": "book/03_concentration.md",
        "code": "the page's cell that defines rate_sweep and summarise, executed by this script",
        "L": RATE_L,
        "nodes": RATE_NODES,
        "prompts": n * RATE_BATCHES,
        "batches": RATE_BATCHES,
        "seeds": [RATE_SEED, RATE_SEED + RATE_BATCHES - 1],
        "u": out,
    }


def risk_star(scale):
    Sigma = icl.kms_covariance(5, 0.5)
    A_star, b_star = icl.bayes_optimal_parameters(Sigma)
    n = max(2, round(RISK_PROMPTS * scale))
    out = {}
    for L in RISK_L:
        est = []
        for k in range(RISK_BATCHES):
            gen = torch.Generator().manual_seed(RISK_SEED + k)
            est.append(
                icl.finite_prompt_risk(
                    A_star, b_star, Sigma, L, n_prompts=n, generator=gen, dtype=torch.float32
                )
            )
        means, ses = np.array(est).T
        value, se = float(means.mean()), float(np.sqrt((ses**2).sum())) / RISK_BATCHES
        h = [float(means[::2].mean()), float(means[1::2].mean())]
        out[str(L)] = {
            "risk": round(value, 6),
            "se": round(se, 6),
            "halves": [round(x, 6) for x in h],
            "halves_se": round(abs(h[0] - h[1]) / 2, 6),
            "batches_se": round(float(means.std(ddof=1)) / math.sqrt(RISK_BATCHES), 6),
        }
        print(f"  L = {L}: R_L(A*, b*) = {value:.5f} +- {se:.5f}", flush=True)
    return {
        "page": "book/05_icl_linear_regression.md",
        "code": "icl.finite_prompt_risk(A*, b*, kms_covariance(5, 0.5), L, dtype=float32)",
        "prompts": n * RISK_BATCHES,
        "batches": RISK_BATCHES,
        "seeds": [RISK_SEED, RISK_SEED + RISK_BATCHES - 1],
        "L": out,
    }


def cpu_name():
    try:
        text = Path("/proc/cpuinfo").read_text()
        return re.search(r"model name\s*:\s*(.*)", text).group(1).strip()
    except (OSError, AttributeError):
        return platform.processor() or platform.machine()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the sizes (trials)")
    parser.add_argument("--out", type=Path, default=TARGET)
    args = parser.parse_args()
    torch.set_num_threads(1)
    parts, seconds, cpu = {}, {}, {}
    for name, fn in (("rate_slopes", rate_slopes), ("risk_star", risk_star)):
        print(f"{name}:", flush=True)
        t0, c0 = time.perf_counter(), time.process_time()
        parts[name] = fn(args.scale)
        seconds[name] = round(time.perf_counter() - t0)
        cpu[name] = round(time.process_time() - c0)
    doc = {
        **results_header("tools/reference_values.py", __doc__),
        "cpu": cpu_name(),
        "threads": torch.get_num_threads(),
        "seconds": seconds,
        "cpu_seconds": cpu,
        **parts,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out} ({sum(cpu.values())} s of CPU)")


if __name__ == "__main__":
    main()
