#!/usr/bin/env python
"""Reference values for chapter 5's paper-scale section, computed once and committed with provenance.

    .venv/bin/python tools/paper_scale_references.py            # -> book/data/paper_scale_references.json

1. **The reduced softmax model's best finite-prompt error** at each paper length and setting: the
   parameters ``(A, b)`` of ``y_hat = b sum_i softmax_i(x_i^T A x_q) y_i`` that minimise the error on a
   fixed sample of prompts (``icl.conditional_risk``: task and noise integrated exactly), by L-BFGS from
   the infinite-prompt optimum ``(A*, b*)``, then that error on fresh prompts (an unbiased estimate of
   the risk of the parameters found, with its standard error). The full softmax model contains the
   reduced one, so this is an upper estimate of the full model's best error (up to optimisation: a
   local minimum would make it higher).
2. **Minimum or saddle?** For the trained softmax models of the committed results file, the Hessian of
   the error in the effective parameters (``U[:, :d]``, ``c``: the 36 numbers the prediction depends
   on) at the end of training, on ``REPLICATES`` independent samples of prompts: its two smallest
   eigenvalues, per start, for the starts outside the reduced basin and for one start inside it.

3. **A longer run** (``--longer-run PATH``): a length of the committed results trained past the paper's
   300 000 steps (``tools/paper_experiment.py --L 100 --steps 900000 --out DIR``, resumed from a copy of
   its committed checkpoint with the step count raised): every start's test error every 100 000 steps,
   and the zero-block sizes at the end. This updates the ``longer_run`` entry of the target file alone.

Errors are plain mean squared errors (the experiment's loss), target noise included.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
from torch.func import hessian

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import paper_experiment as pe  # noqa: E402 (after the path it lives on)
from checkout import results_header  # noqa: E402
from softlin import icl  # noqa: E402
from softlin.book import experiment  # noqa: E402

TARGET = ROOT / "book" / "data" / "paper_scale_references.json"
F64 = torch.float64
D_IN, TAU2, NOISE = 5, 0.2, 0.1
REPLICATES, HESSIAN_PROMPTS = 4, 10_000
#: the lengths of each setting run at paper scale (tools/paper_experiment.py)
LENGTHS = {"intended": pe.PAPER_LENGTHS, "released": (10, 100, 1000)}


def reduced_softmax_floor(L, released, generator):
    """(error, standard error, b, ||A||_F) of the best reduced softmax model found at length L."""
    Sigma = icl.kms_covariance(D_IN, 0.5)
    n = max(2_000, min(20_000, 2_000_000 // L))  # prompts: memory n L d doubles

    def sample():
        p = icl.sample_prompts(
            Sigma, L, n, tau2=TAU2, noise_var=NOISE, generator=generator, released=released
        )
        return p.x.clone(), p.x_query.clone()

    x, xq = sample()
    A_star, b_star = icl.bayes_optimal_parameters(Sigma)
    theta = torch.cat([A_star.reshape(-1), b_star.reshape(1)]).requires_grad_(True)

    def error(th, x, xq):  # plain MSE per prompt: twice the half risk
        return 2 * icl.conditional_risk(
            th[:-1].reshape(D_IN, D_IN), th[-1], x, xq, tau2=TAU2, noise_var=NOISE
        )

    opt = torch.optim.LBFGS(
        [theta],
        max_iter=200,
        tolerance_grad=1e-9,
        tolerance_change=1e-12,
        line_search_fn="strong_wolfe",
    )

    def closure():
        opt.zero_grad()
        loss = error(theta, x, xq).mean()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        fresh = error(theta, *sample())
    theta = theta.detach()
    return (
        float(fresh.mean()),
        float(fresh.std()) / math.sqrt(n),
        float(theta[-1]),
        float(theta[:-1].norm()),
    )


def smallest_eigenvalues(U, c, L, generator):
    """The two smallest eigenvalues of the Hessian of the error in (U[:, :d], c), on REPLICATES
    independent samples of HESSIAN_PROMPTS prompts: a list of pairs."""
    Sigma = icl.kms_covariance(D_IN, 0.5)
    D = D_IN + 1
    theta = torch.cat([U[:, :D_IN].reshape(-1), c])

    def error(th, tokens, zq, t):
        Ux = th[: D * D_IN].reshape(D, D_IN)
        a = zq[:, :D_IN] @ Ux.T  # (n, D): U z_q (the query's label slot is 0)
        weights = torch.softmax((tokens @ a.unsqueeze(-1)).squeeze(-1), -1)  # (n, L)
        pred = (weights.unsqueeze(-1) * tokens).sum(1) @ th[D * D_IN :]
        return ((pred - t) ** 2).mean()

    out = []
    for _ in range(REPLICATES):
        p = icl.sample_prompts(
            Sigma, L, HESSIAN_PROMPTS, tau2=TAU2, noise_var=NOISE, generator=generator
        )
        H = hessian(error)(theta, p.tokens, p.queries[:, 0], p.targets)
        ev = torch.linalg.eigvalsh(0.5 * (H + H.T))
        out.append([float(ev[0]), float(ev[1])])
    return out


def longer_run_summary(path):
    """The ``longer_run`` entry from a run's result file (``tools/paper_experiment.py`` format)."""
    res = json.loads(Path(path).read_text())
    h = res["history"]
    rows = [i for i, s in enumerate(h["steps"]) if s % 100_000 == 0]
    out = {
        "L": res["L"],
        "complete": res["complete"],
        "steps": [h["steps"][i] for i in rows],
        "test_mse": {k: [v[i] for i in rows] for k, v in h["test_mse"].items()},
        "provenance": {k: res["provenance"][k] for k in ("segments", "wall_seconds", "device")},
    }
    if res["complete"]:
        out["zero_block_size"] = {}
        for k in ("softmax", "linear"):
            KQ = torch.tensor(res["final"]["key_query"][k], dtype=F64) / math.sqrt(D_IN + 1)
            c = torch.tensor(res["final"]["output_value"][k], dtype=F64)
            out["zero_block_size"][k] = [
                round(float(x), 4) for x in experiment.zero_block_size(KQ, c)
            ]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--longer-run", type=Path, help="only update the longer_run entry from this file"
    )
    args = ap.parse_args(argv)
    if args.longer_run:
        doc = json.loads(TARGET.read_text())
        doc["longer_run"] = longer_run_summary(args.longer_run)
        TARGET.write_text(json.dumps(doc, indent=1))
        print(f"updated the longer_run entry of {TARGET}")
        return
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(2026)
    floors = {}
    for released in (False, True):
        setting = "released" if released else "intended"
        floors[setting] = {}
        for L in LENGTHS[setting]:
            err, se, b, normA = reduced_softmax_floor(L, released, gen)
            floors[setting][str(L)] = {
                "mse": round(err, 6),
                "se": round(se, 6),
                "b": round(b, 5),
                "norm_A": round(normA, 5),
            }
            print(f"{setting} L={L}: reduced softmax floor {err:.4f} +- {se:.4f}", flush=True)
    results = json.loads(pe.RESULTS.read_text())
    curvature = []
    for r in results["lengths"]:
        if r["settings"]["released"] or r["L"] > 100:
            continue  # the Hessian at long prompts costs more than this script should
        KQ = torch.tensor(r["final"]["key_query"]["softmax"], dtype=F64) / math.sqrt(D_IN + 1)
        c = torch.tensor(r["final"]["output_value"]["softmax"], dtype=F64)
        size = experiment.zero_block_size(KQ, c)
        outside = [int(s) for s in torch.nonzero(size >= experiment.REDUCED_BASIN).flatten()]
        inside = [int(s) for s in torch.nonzero(size < experiment.REDUCED_BASIN).flatten()][:1]
        for s in outside + inside:
            ev = smallest_eigenvalues(KQ[s], c[s], r["L"], gen)
            curvature.append(
                {
                    "L": r["L"],
                    "start": s,
                    "reduced": s in inside,
                    "zero_block_size": round(float(size[s]), 4),
                    "eigenvalues": ev,
                }
            )
            print(f"L={r['L']} start {s} (reduced: {s in inside}): {ev}", flush=True)
    doc = {
        **results_header("tools/paper_scale_references.py", __doc__),
        "seconds": round(time.perf_counter() - t0),
        "reduced_softmax_floor": floors,
        "curvature": {"replicates": REPLICATES, "prompts": HESSIAN_PROMPTS, "points": curvature},
    }
    if TARGET.exists():  # a longer run's entry is kept (it has its own option)
        old = json.loads(TARGET.read_text())
        doc |= {k: old[k] for k in ("longer_run",) if k in old}
    TARGET.write_text(json.dumps(doc, indent=1))
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
