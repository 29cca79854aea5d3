#!/usr/bin/env python
"""Reference values for the Monte Carlo checks of chapters 3 and 5, computed once and committed.

    .venv/bin/python tools/reference_values.py            # -> book/data/reference_values.json

Each page compares its own estimate with an independent, longer run of the same estimator; this script
is that run, and the file it writes (values, standard errors, provenance) is what the pages read.

1. **Chapter 3, query-averaged rate slopes** (``rate_slopes``): for the scales u = 0.3, 0.6, 1.0, 1.5
   of the scalar model, the log-log slope of the query-averaged output error over
   L = 16, 32, ..., 4096, by ``softlin.concentration.query_averaged_rates``, the function the
   pages call (lesson 3 over many scales, its lab at these four), with the default mode's
   Gauss-Hermite rule (24 nodes) and 200 times its lab's prompts, as ``RATE_BATCHES`` independent
   batches of the default mode's size (400 prompts per scale and length; larger batches are slower
   per token, since ``sample_errors`` then streams the tokens in shorter chunks). ``quadrature`` is
   the change of the slope with the rule of half as many nodes on the same prompts, as in the lab.

   ``slope_se`` is the standard error of the weighted fit on all the prompts, the pages' fit,
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
page's estimate and this one are independent. Sizes: the constants below. The committed run's
time is recorded in its file (``cpu_seconds`` on one thread, ``seconds`` of wall time) with the
processor (``cpu``). Its standard errors are about sqrt(200) = 14 times smaller than those of a
default-mode lab for the slopes (``batch_sd``, the spread of one default-size run, against
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
from softlin import concentration as cc
from softlin import icl
from softlin.montecarlo import fit_power_law, mean_and_stderr

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "book" / "data" / "reference_values.json"

#: chapter 3: the lab's scales and grid, its default-mode rule, and the prompts per batch
RATE_U, RATE_L, RATE_NODES = [0.3, 0.6, 1.0, 1.5], [16 * 2**k for k in range(9)], 24
RATE_PROMPTS, RATE_BATCHES = 400, 200
RATE_SEED = 30_000_000  # batch k draws from seed RATE_SEED + k
#: chapter 5: the page's prompt lengths, and the prompts per batch
RISK_L, RISK_PROMPTS, RISK_BATCHES = [10, 30, 100, 300, 1000], 250_000, 16
RISK_SEED = 50_000_000


def fits_of(errors):
    """The fits ``query_averaged_rates`` returns, for per-prompt errors pooled over batches:
    ``fit_power_law`` of the mean over the prompts, weighted by its standard error, for each u."""
    est = mean_and_stderr(errors, dim=1)  # (n_L, n_u) each
    return [fit_power_law(RATE_L, m, s) for m, s in zip(est.mean.T, est.stderr.T)]


def rate_slopes(scale):
    n = max(2, round(RATE_PROMPTS * scale))
    batches, each = [], []  # per-prompt errors (2 rules, n_L, n, n_u) and fits of every batch
    for k in range(RATE_BATCHES):
        gen = torch.Generator().manual_seed(RATE_SEED + k)
        errors, fits = cc.query_averaged_rates(
            RATE_U, RATE_L, n, nodes=(RATE_NODES, RATE_NODES // 2), generator=gen
        )
        batches.append(errors)
        each.append([f.slope for f in fits])
        if (k + 1) % 20 == 0:
            print(f"  rate sweep: {k + 1} of {RATE_BATCHES} batches done", flush=True)
    pooled = torch.cat(batches, dim=2)  # (2, n_L, n * RATE_BATCHES, n_u)
    fits, coarse = fits_of(pooled[0]), fits_of(pooled[1])
    halves = [fits_of(torch.cat(batches[h::2], dim=2)[0]) for h in (0, 1)]
    each = np.array(each)  # (RATE_BATCHES, n_u)
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
        "page": "book/labs/03_concentration.md",
        "code": "softlin.concentration.query_averaged_rates(RATE_U, RATE_L, prompts per batch, "
        "nodes=(24, 12)), one call per batch, pooled over the batches",
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
