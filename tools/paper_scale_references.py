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
2. **Minimum or saddle?** (``--curvature``) For trained softmax models of the committed results file,
   the Hessian of the error in the effective parameters (``U[:, :d]`` and the read-out ``v``: the 36
   numbers the prediction depends on) at the end of training, pooled over ``HESSIAN_PROMPTS`` prompts
   (in ``BATCHES`` batches, whose spread gives the standard error of the curvature along a direction),
   and a paired descent test on as many fresh prompts along the flattest direction ``u`` (the
   eigenvector of the smallest eigenvalue): the per-prompt errors at ``theta``, ``theta + t u`` and
   ``theta - t u`` for steps ``t`` in ``STEPS`` (fractions of ``|theta|``); their symmetric second
   difference estimates the curvature along ``u`` on prompts that did not choose ``u``. For the starts
   outside the reduced basin and one start inside it, at ``CURVATURE_LENGTHS``.

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

import numpy as np
import torch
from torch.func import hessian

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import paper_experiment as pe  # noqa: E402 (after the path it lives on)
from checkout import results_header  # noqa: E402
from softlin import experiment, icl  # noqa: E402

TARGET = ROOT / "book" / "data" / "paper_scale_references.json"
F64 = torch.float64
D_IN, TAU2, NOISE = 5, 0.2, 0.1
HESSIAN_PROMPTS, BATCHES = 80_000, 8
STEPS = (0.05, 0.1, 0.2)  # descent-test steps, fractions of |theta|; the verdict reads 0.1
CURVATURE_LENGTHS = (20, 50, 100, 200, 500, 1000)
#: the lengths of each setting run at paper scale (tools/paper_experiment.py)
LENGTHS = {"intended": experiment.PAPER_LENGTHS, "released": (10, 100, 1000)}


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


def _prediction(theta, tokens, zq):
    """The softmax model's predictions from its 36 effective parameters ``theta`` = (U[:, :d], v)."""
    D = D_IN + 1
    Ux = theta[: D * D_IN].reshape(D, D_IN)
    a = zq[:, :D_IN] @ Ux.T  # (n, D): U z_q (the query's label slot is 0)
    weights = torch.softmax((tokens @ a.unsqueeze(-1)).squeeze(-1), -1)  # (n, L)
    return (weights.unsqueeze(-1) * tokens).sum(1) @ theta[D * D_IN :]


def _chunks(L, n, generator):
    """``n`` fresh test-distribution prompts of length L, float64, in chunks of at most 2e5 tokens."""
    Sigma = icl.kms_covariance(D_IN, 0.5)
    size = max(50, 200_000 // L)
    for start in range(0, n, size):
        yield icl.sample_prompts(
            Sigma, L, min(size, n - start), tau2=TAU2, noise_var=NOISE, generator=generator
        )


def error_hessian(theta, tokens, zq, targets):
    """The summed Hessian over a chunk of prompts of the squared error in ``theta`` = (U[:, :d], v),
    in closed form (``torch.func.hessian`` gives the same, ~50 times slower; checked at every run).

    With the tilt ``a = U z_q``, the tilted mean ``m``, covariance ``C`` and the third central moment
    contracted with ``v``, ``T = sum_i p_i (z_i - m)(z_i - m)^T ((z_i - m)^T v)``, and the residual
    ``r = v^T m - y``: the prediction's gradient is ``m`` in ``v`` and ``C v`` in ``a``; its second
    derivatives are ``C`` (``v``, ``a``) and ``T`` (``a``, ``a``); the error's Hessian is
    ``2 (grad grad^T + r * second)``, and ``a`` is linear in ``U[:, :d]`` (``da_j / dU_jk = x_q,k``).
    """
    D = D_IN + 1
    Ux, v = theta[: D * D_IN].reshape(D, D_IN), theta[D * D_IN :]
    xq = zq[:, :D_IN]  # (n, d)
    a = xq @ Ux.T  # (n, D)
    p = torch.softmax((tokens @ a.unsqueeze(-1)).squeeze(-1), -1)  # (n, L)
    m = torch.einsum("nl,nlk->nk", p, tokens)
    c = tokens - m[:, None]  # centred tokens (n, L, D)
    C = torch.einsum("nl,nlj,nlk->njk", p, c, c)
    T = torch.einsum("nl,nlj,nlk,nl->njk", p, c, c, c @ v)
    r = m @ v - targets  # (n,)
    Cv = C @ v  # (n, D)
    H_vv = 2 * torch.einsum("nj,nk->jk", m, m)
    H_av = 2 * (torch.einsum("nj,nk->njk", Cv, m) + r[:, None, None] * C)  # (n, D_a, D_v)
    H_aa = 2 * (torch.einsum("nj,nk->njk", Cv, Cv) + r[:, None, None] * T)
    H_UU = torch.einsum("njJ,nk,nK->jkJK", H_aa, xq, xq).reshape(D * D_IN, D * D_IN)
    H_Uv = torch.einsum("nji,nk->jki", H_av, xq).reshape(D * D_IN, D)
    return torch.cat([torch.cat([H_UU, H_Uv], 1), torch.cat([H_Uv.T, H_vv], 1)], 0)


def curvature_point(U, v, L, generator):
    """Hessian of the error at ``theta = (U[:, :d], v)``, pooled, and the descent test (module doc)."""
    theta = torch.cat([U[:, :D_IN].reshape(-1), v])

    def error(th, tokens, zq, t):  # the summed squared error of a chunk
        return ((_prediction(th, tokens, zq) - t) ** 2).sum()

    check = next(_chunks(L, 20, generator))
    args = (check.tokens, check.queries[:, 0], check.targets)
    exact, closed = hessian(error)(theta, *args), error_hessian(theta, *args)
    assert torch.allclose(closed, exact, rtol=1e-8, atol=1e-8 * float(exact.abs().max())), (
        f"closed-form Hessian off by {float((closed - exact).abs().max())}"
    )
    per_batch = HESSIAN_PROMPTS // BATCHES
    H_b, grad = [], torch.zeros_like(theta)
    for _ in range(BATCHES):
        H = torch.zeros(theta.numel(), theta.numel(), dtype=F64)
        for p in _chunks(L, per_batch, generator):
            args = (p.tokens, p.queries[:, 0], p.targets)
            H += error_hessian(theta, *args)
            grad += torch.func.grad(error)(theta, *args)
        H_b.append(0.5 * (H + H.T) / per_batch)
    H_b = torch.stack(H_b)  # (BATCHES, 36, 36)
    ev, vec = torch.linalg.eigh(H_b.mean(0))
    u = vec[:, 0]  # the flattest direction
    along = torch.einsum("i,bij,j->b", u, H_b, u)  # u^T H u per batch
    steps = [f * float(theta.norm()) for f in STEPS]
    errs = {0.0: []} | {s: [] for t in steps for s in (t, -t)}
    for p in _chunks(L, HESSIAN_PROMPTS, generator):  # fresh prompts
        args = (p.tokens, p.queries[:, 0])
        with torch.no_grad():
            for s in errs:
                errs[s].append((_prediction(theta + s * u, *args) - p.targets) ** 2)
    errs = {s: torch.cat(e) for s, e in errs.items()}
    n = HESSIAN_PROMPTS

    def mean_se(x):
        return round(float(x.mean()), 7), round(float(x.std() / math.sqrt(n)), 7)

    descent = []
    for t in steps:
        second = 0.5 * (errs[t] + errs[-t]) - errs[0.0]  # = 1/2 t^2 u^T H u + O(t^4), per prompt
        plus, minus = errs[t] - errs[0.0], errs[-t] - errs[0.0]
        descent.append(
            {
                "step": round(t, 5),
                "predicted": round(0.5 * t * t * float(ev[0]), 7),
                "second_difference": mean_se(second),
                "plus": mean_se(plus),
                "minus": mean_se(minus),
            }
        )
    return {
        "eigenvalues": [round(float(x), 6) for x in ev[:3]],
        # u^T H u (= the smallest eigenvalue) and its standard error from the batches' spread
        "curvature_along_u": [
            round(float(along.mean()), 6),
            round(float(along.std()) / BATCHES**0.5, 6),
        ],
        "gradient_norm": round(float(grad.norm()) / HESSIAN_PROMPTS, 7),
        "theta_norm": round(float(theta.norm()), 5),
        "error": mean_se(errs[0.0]),
        "descent": descent,
    }


def curvature_points(generator, lengths=CURVATURE_LENGTHS):
    """Every start outside the reduced basin, and the first one inside it, at each length: yields the
    list of the points done so far after each point (the caller writes it: nothing is lost to an
    interruption)."""
    runs = experiment.load_results(json.loads(pe.RESULTS.read_text()))["intended"]
    points = []
    for L in lengths:
        run = runs[L]
        U = run.key_query.softmax / math.sqrt(D_IN + 1)
        v = run.readout.softmax
        label_row, readout = run.block_ratios("softmax")
        reduced = run.reduced()
        inside = [int(s) for s in np.flatnonzero(reduced)][:1]
        for s in [int(s) for s in np.flatnonzero(~reduced)] + inside:
            t0 = time.perf_counter()
            point = curvature_point(U[s], v[s], L, generator)
            points.append(
                {
                    "L": L,
                    "start": s,
                    "reduced": bool(reduced[s]),
                    "label_row": round(float(label_row[s]), 4),
                    "readout": round(float(readout[s]), 4),
                    **point,
                    "seconds": round(time.perf_counter() - t0),
                }
            )
            d = point["descent"][1]
            print(
                f"L={L} start {s} (reduced: {bool(reduced[s])}): eigenvalues {point['eigenvalues']}, "
                f"second difference {d['second_difference']} ({points[-1]['seconds']} s)",
                flush=True,
            )
            yield points


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
    ap.add_argument(
        "--curvature",
        action="store_true",
        help="only update the curvature entry (minutes per point)",
    )
    args = ap.parse_args(argv)
    if args.curvature:
        torch.set_num_threads(1)
        t0 = time.perf_counter()
        for points in curvature_points(torch.Generator().manual_seed(2027)):
            doc = json.loads(TARGET.read_text())
            doc["curvature"] = {
                **results_header("tools/paper_scale_references.py", __doc__),
                "seconds": round(time.perf_counter() - t0),
                "prompts": HESSIAN_PROMPTS,
                "batches": BATCHES,
                "steps": list(STEPS),
                "complete": False,  # until the last point
                "points": points,
            }
            TARGET.write_text(json.dumps(doc, indent=1))
        doc["curvature"]["complete"] = True
        TARGET.write_text(json.dumps(doc, indent=1))
        print(f"updated the curvature entry of {TARGET}")
        return
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
    doc = {
        **results_header("tools/paper_scale_references.py", __doc__),
        "seconds": round(time.perf_counter() - t0),
        "reduced_softmax_floor": floors,
    }
    if TARGET.exists():  # the entries with their own options are kept
        old = json.loads(TARGET.read_text())
        doc |= {k: old[k] for k in ("longer_run", "curvature") if k in old}
    TARGET.write_text(json.dumps(doc, indent=1))
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
