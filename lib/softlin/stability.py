"""Stability of training along the trajectory (paper Section 4 and Appendix D), on the reduced
in-context regression model of Section 5.

The general statement compares two gradient flows started at the same point: ``theta_L(t)`` on the
finite-prompt risk ``R_L`` and ``theta_inf(t)`` on the infinite-prompt risk ``R_inf``. Its three
ingredients are made measurable here for the model ``theta = (A, b)`` of :mod:`softlin.icl`
(``U = diag(A, 0)``, ``V = b e_D e_D^T``, noiseless labels, task prior ``N(0, I)``):

* the **risk gap** ``R_L(theta) - R_inf(theta)`` (Corollary D.3 bounds its supremum over a ball):
  :func:`gap_coefficients`, :func:`risk_gap`, :func:`uniform_risk_gap`;
* the **finite-prompt flow** on a fixed sample of prompts (:class:`EmpiricalRisk`,
  :func:`finite_prompt_flow`) and its distance to the infinite-prompt flow
  (:func:`trajectory_distance`; Lemma D.1);
* the **Grönwall bounds** of Lemma D.1 and the Lipschitz constants they use
  (:func:`infinite_risk_hessian`, :func:`hessian_extremes`, :func:`max_hessian_norm_on_ball`,
  :func:`segment_constants`, :func:`lemma_d1_bound`, :func:`gronwall_envelope`);

plus the bookkeeping and the picture of the proof of Theorem 4.3 (:func:`first_time_below`,
:func:`plot_transfer_proof`) and the chapter's explorer (:func:`plot_transfer_budget`).

Control variate. With ``m = sum_i p_i x_i`` the softmax-weighted mean of the prompt inputs and
``a = A x_q``, the per-prompt risks with the task integrated out are (``tau2 = 1``, no noise)

    c_L = 1/2 ||b m - x_q||^2,        c_inf = 1/2 ||b Sigma a - x_q||^2,

and ``E c_L = R_L``, ``E c_inf = R_inf`` (``Sigma a`` is the tilted mean of Lemma 2.1). On the same query
the difference ``c_L - c_inf = b^2 u - b v`` with

    u = 1/2 (||m||^2 - ||Sigma a||^2),     v = (m - Sigma a) . x_q

is much less variable than ``c_L`` alone: the query's own fluctuation cancels. So ``R_L - R_inf`` is
estimated by averaging ``b^2 u - b v`` (quadratic in ``b``, which makes the supremum over ``b`` explicit),
and ``R_L`` by adding the exact ``R_inf``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

from . import icl
from ._checks import as_tensor_arg, check_generator, check_matrix, check_positive_int, check_psd

__all__ = [
    "conditional_risk_gap",
    "GapCoefficients",
    "gap_coefficients",
    "risk_gap",
    "UniformGap",
    "uniform_risk_gap",
    "EmpiricalRisk",
    "finite_prompt_flow",
    "trajectory_distance",
    "infinite_risk_hessian",
    "hessian_extremes",
    "max_hessian_norm_on_ball",
    "segment_constants",
    "lemma_d1_bound",
    "gronwall_envelope",
    "first_time_below",
    "plot_transfer_proof",
    "plot_transfer_budget",
]

KINDS = ("softmax", "linear")

#: Target number of (prompt, token, parameter) score entries per chunk when many parameters share prompts.
CHUNK_ELEMENTS = 2**22


# --------------------------------------------------------------------------------------------------
# validation (module-private)


def _check_kind(kind):
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def _check_real(name, value, *, positive=False, nonneg=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite real number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    if nonneg and value < 0:
        raise ValueError(f"{name} must be non-negative, got {value!r}")
    return float(value)


def _check_sigma(Sigma):
    Sigma = as_tensor_arg("Sigma", Sigma)
    if Sigma.dim() != 2 or Sigma.shape[0] != Sigma.shape[1] or Sigma.shape[0] == 0:
        raise ValueError(f"Sigma must be a non-empty square matrix (d, d), got shape {tuple(Sigma.shape)}")
    check_psd("Sigma", Sigma)
    lam_min = float(torch.linalg.eigvalsh(Sigma).min())
    if lam_min <= 0:
        raise ValueError(f"Sigma must be positive definite, got smallest eigenvalue {lam_min:.3g}")
    return Sigma


def _check_params(A, b, d, *, batched_ok=True):
    """Return (As (K, d, d), bs (K,), batched) from a single (A (d, d), b scalar) or a batch."""
    A = as_tensor_arg("A", A)
    b = as_tensor_arg("b", b)
    if A.dim() == 3 and batched_ok:
        if A.shape[1:] != (d, d) or tuple(b.shape) != (A.shape[0],) or A.shape[0] == 0:
            raise ValueError(f"batched A must have shape (K, {d}, {d}) with K >= 1 and b shape (K,), got "
                             f"{tuple(A.shape)} and {tuple(b.shape)}")
        return A, b, True
    check_matrix("A", A, d, d)
    if b.dim() != 0:
        raise ValueError(f"b must be a scalar (0-dimensional) tensor for A of shape (d, d), "
                         f"got shape {tuple(b.shape)}")
    return A[None], b[None], False


def _check_prompt_count(n_prompts):
    check_positive_int("n_prompts", n_prompts)
    if n_prompts < 2:
        raise ValueError(f"n_prompts must be at least 2 to estimate a standard error, got {n_prompts}")


def _theta(A, b):
    """Flatten (A (..., d, d), b (...)) into theta (..., d^2 + 1)."""
    return torch.cat([A.reshape(*A.shape[:-2], -1), b[..., None]], dim=-1)


def _unflatten(theta, d):
    return theta[..., : d * d].reshape(*theta.shape[:-1], d, d), theta[..., d * d]


# --------------------------------------------------------------------------------------------------
# per-prompt quantities


def _weighted_means(As, x, x_query, kind):
    """Attention-weighted input means for K parameter matrices on shared prompts.

    As (K, d, d); x (n, L, d); x_query (n, d). Returns (m (n, K, d), a (n, K, d)) with ``a = A x_q`` and
    ``m = sum_i p_i x_i``, ``p = softmax_i(x_i^T a)`` (or ``x_i^T a / L`` for linear attention).
    """
    a = torch.einsum("kij,nj->nki", As, x_query)  # (n, K, d): A_k x_q
    scores = torch.bmm(x, a.transpose(1, 2))  # (n, L, K): x_i^T A_k x_q
    p = torch.softmax(scores, dim=1) if kind == "softmax" else scores / x.shape[1]
    m = torch.bmm(p.transpose(1, 2), x)  # (n, K, d)
    return m, a


def conditional_risk_gap(A, b, x, x_query, Sigma, *, kind="softmax"):
    """Per-prompt risk difference ``c_L - c_inf`` on the same query (the control-variate estimator).

    ``c_L = 1/2 ||b m - x_q||^2`` is :func:`softlin.icl.conditional_risk` (task integrated out, ``tau2 = 1``,
    no noise) and ``c_inf = 1/2 ||b Sigma A x_q - x_q||^2`` is the same for the infinite-prompt
    prediction ``b w^T Sigma A x_q``. Their means are ``R_L(A, b)`` and ``R_inf(A, b)``; the mean of the
    difference is the risk gap of Corollary D.3. Differentiable in ``A`` and ``b``.

    Parameters
    ----------
    A : Tensor (d, d); b : scalar Tensor; x : Tensor (n, L, d) prompt inputs; x_query : Tensor (n, d);
    Sigma : Tensor (d, d) positive definite (the input covariance, which sets the limit).
    kind : "softmax" or "linear".

    Returns
    -------
    Tensor, shape (n,).

    Raises
    ------
    ValueError / TypeError on mismatched shapes, dtypes or devices, or a bad ``Sigma`` or ``kind``.
    """
    _check_kind(kind)
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    x = as_tensor_arg("x", x)
    x_query = as_tensor_arg("x_query", x_query)
    if x.dim() != 3 or x.shape[1] == 0 or x.shape[2] != d:
        raise ValueError(f"x must have shape (n, L, {d}) with L >= 1, got {tuple(x.shape)}")
    check_matrix("x_query", x_query, x.shape[0], d)
    As, bs, _ = _check_params(A, b, d, batched_ok=False)
    for name, t in (("x_query", x_query), ("A", As), ("b", bs), ("Sigma", Sigma)):
        if t.dtype != x.dtype or t.device != x.device:
            raise ValueError(f"{name} must have the dtype and device of x ({x.dtype}, {x.device}), "
                             f"got {t.dtype} on {t.device}")
    m, a = _weighted_means(As, x, x_query, kind)
    m, a, b0 = m[:, 0], a[:, 0], bs[0]
    lim = a @ Sigma  # (n, d): Sigma A x_q (Sigma symmetric)
    return 0.5 * (((b0 * m - x_query) ** 2).sum(-1) - ((b0 * lim - x_query) ** 2).sum(-1))


# --------------------------------------------------------------------------------------------------
# risk gap and its supremum over a ball


@dataclass
class GapCoefficients:
    """Monte Carlo coefficients of the risk gap ``R_L(A, b) - R_inf(A, b) = b^2 quad - b lin``.

    For each of K matrices ``A_k`` (all evaluated on the same prompts), ``quad = E u`` and ``lin = E v``
    with ``u = 1/2 (||m||^2 - ||Sigma a||^2)`` and ``v = (m - Sigma a) . x_q`` (module docstring); the
    per-prompt covariance of ``(u, v)`` gives standard errors for any ``b``.

    Attributes
    ----------
    A : Tensor (K, d, d)        the matrices (float64, CPU)
    quad, lin : Tensor (K,)     float64
    cov : Tensor (K, 2, 2)      per-prompt covariance of (u, v), float64
    n_prompts, L : int
    """

    A: torch.Tensor
    quad: torch.Tensor
    lin: torch.Tensor
    cov: torch.Tensor
    n_prompts: int
    L: int

    def gap(self, b):
        """``(estimate, standard_error)`` of ``R_L - R_inf`` at ``(A_k, b_k)``: two float64 tensors (K,).

        ``b`` is a tensor of shape (K,) (or a float, used for every k).
        """
        b = torch.as_tensor(b, dtype=torch.float64)
        if b.dim() == 0:
            b = b.expand(self.quad.shape[0])
        if tuple(b.shape) != tuple(self.quad.shape):
            raise ValueError(f"b must be a float or have shape {tuple(self.quad.shape)}, "
                             f"got {tuple(b.shape)}")
        est = b * b * self.quad - b * self.lin
        var = b**4 * self.cov[:, 0, 0] - 2 * b**3 * self.cov[:, 0, 1] + b**2 * self.cov[:, 1, 1]
        return est, torch.sqrt(var.clamp(min=0.0) / self.n_prompts)

    def sup_over_b(self, b_max):
        """Maximise ``|R_L - R_inf|`` over ``|b| <= b_max[k]`` for each ``A_k`` (closed form).

        ``b -> b^2 quad - b lin`` is a parabola through 0, so the maximum of its absolute value on an
        interval is at an end point or at the vertex ``lin / (2 quad)``.

        Returns
        -------
        (abs_gap (K,), b_arg (K,), standard_error (K,)) float64 tensors.
        """
        b_max = torch.as_tensor(b_max, dtype=torch.float64).expand(self.quad.shape[0])
        if bool((b_max < 0).any()):
            raise ValueError("b_max must be non-negative")
        q, l = self.quad, self.lin
        safe_q = torch.where(q != 0, q, torch.ones_like(q))
        vertex = torch.where(q != 0, torch.clamp(l / (2 * safe_q), min=-b_max, max=b_max), b_max)
        cands = torch.stack([b_max, -b_max, vertex], dim=1)  # (K, 3)
        vals = (cands**2 * q[:, None] - cands * l[:, None]).abs()
        best = vals.argmax(dim=1)
        b_arg = cands.gather(1, best[:, None])[:, 0]
        est, se = self.gap(b_arg)
        return est.abs(), b_arg, se


def _sample_inputs(C, L, n, generator, dtype):
    """n prompts' inputs: x (n, L, d) and x_query (n, d), rows N(0, Sigma) with Sigma = C C^T."""
    g = torch.randn(n, L + 1, C.shape[0], generator=generator, dtype=dtype, device=C.device)
    xs = g @ C.T
    return xs[:, :L], xs[:, L]


def gap_coefficients(A, Sigma, L, *, n_prompts, generator=None, kind="softmax", dtype=None):
    """Estimate the risk-gap coefficients of :class:`GapCoefficients` for one or many matrices ``A``.

    All matrices share the same ``n_prompts`` prompts (common random numbers), drawn in chunks of about
    ``CHUNK_ELEMENTS`` scores. ``b`` does not enter: the gap is ``b^2 quad - b lin`` for every ``b``.

    Parameters
    ----------
    A : Tensor (d, d) or (K, d, d).
    Sigma : Tensor (d, d) positive definite, the input covariance (sets dtype and device).
    L : int, prompt length; n_prompts : int >= 2.
    generator : torch.Generator (on the device of Sigma) or None.
    kind : "softmax" (the paper's model) or "linear" (exact check: see the tests).
    dtype : simulation dtype (default that of Sigma); float32 halves the cost.

    Returns
    -------
    GapCoefficients (float64, CPU).

    Raises
    ------
    ValueError / TypeError on bad shapes or arguments.
    """
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    A = as_tensor_arg("A", A)
    if A.dim() == 2:
        check_matrix("A", A, d, d)
        As = A[None]
    elif A.dim() == 3 and A.shape[1:] == (d, d) and A.shape[0] > 0:
        As = A
    else:
        raise ValueError(f"A must have shape ({d}, {d}) or (K, {d}, {d}), got {tuple(A.shape)}")
    check_positive_int("L", L)
    _check_prompt_count(n_prompts)
    check_generator(generator)
    _check_kind(kind)
    dtype = Sigma.dtype if dtype is None else dtype
    Sig = Sigma.to(dtype)
    C = torch.linalg.cholesky(Sig)
    As_ = As.detach().to(dtype=dtype, device=Sigma.device)
    K = As_.shape[0]
    chunk = max(1, min(n_prompts, CHUNK_ELEMENTS // (L * K)))
    sums = torch.zeros(K, 5, dtype=torch.float64)  # u, v, u^2, v^2, u v
    done = 0
    with torch.no_grad():
        while done < n_prompts:
            n = min(chunk, n_prompts - done)
            x, xq = _sample_inputs(C, L, n, generator, dtype)
            m, a = _weighted_means(As_, x, xq, kind)  # (n, K, d)
            lim = a @ Sig  # (n, K, d): Sigma A x_q
            u = 0.5 * ((m * m).sum(-1) - (lim * lim).sum(-1))  # (n, K)
            v = ((m - lim) * xq[:, None, :]).sum(-1)
            u, v = u.double().cpu(), v.double().cpu()
            sums += torch.stack([u.sum(0), v.sum(0), (u * u).sum(0), (v * v).sum(0), (u * v).sum(0)], dim=1)
            done += n
    mean_u, mean_v = sums[:, 0] / n_prompts, sums[:, 1] / n_prompts
    scale = n_prompts / (n_prompts - 1)
    cov = torch.empty(K, 2, 2, dtype=torch.float64)
    cov[:, 0, 0] = (sums[:, 2] / n_prompts - mean_u**2) * scale
    cov[:, 1, 1] = (sums[:, 3] / n_prompts - mean_v**2) * scale
    cov[:, 0, 1] = cov[:, 1, 0] = (sums[:, 4] / n_prompts - mean_u * mean_v) * scale
    return GapCoefficients(A=As.detach().double().cpu(), quad=mean_u, lin=mean_v, cov=cov,
                           n_prompts=n_prompts, L=L)


def risk_gap(A, b, Sigma, L, *, n_prompts, generator=None, kind="softmax", dtype=None):
    """Monte Carlo ``R_L(A, b) - R_inf(A, b)`` with the control variate of the module docstring.

    Parameters
    ----------
    A : (d, d) with b scalar, or (K, d, d) with b (K,) (shared prompts).
    Other parameters as in :func:`gap_coefficients`.

    Returns
    -------
    (estimate, standard_error): floats, or float64 tensors (K,) for batched parameters.
    """
    Sigma = _check_sigma(Sigma)
    As, bs, batched = _check_params(A, b, Sigma.shape[0])
    coef = gap_coefficients(As, Sigma, L, n_prompts=n_prompts, generator=generator, kind=kind, dtype=dtype)
    est, se = coef.gap(bs.detach().double().cpu())
    return (est, se) if batched else (float(est[0]), float(se[0]))


@dataclass
class UniformGap:
    """Estimate of ``sup_{||theta|| <= radius} |R_L(theta) - R_inf(theta)|`` (Corollary D.3).

    Attributes
    ----------
    sup : float         ``|R_L - R_inf|`` at the maximiser found, re-estimated on fresh prompts (so an
                        unbiased estimate of the gap *there*, hence of a lower bound of the supremum)
    stderr : float      its Monte Carlo standard error
    A : Tensor (d, d); b : float   the maximiser found (``||A||_F^2 + b^2 <= radius^2``)
    grid_sup : float    the largest value on the search grid, on the search prompts (biased upward by the
                        selection; shown for comparison)
    radius : float; L : int
    """

    sup: float
    stderr: float
    A: torch.Tensor
    b: float
    grid_sup: float
    radius: float
    L: int


def _directions(d, n_directions, Sigma, generator):
    """Unit-Frobenius directions in R^{d x d}: +-Sigma^-1, +-I and random Gaussian ones."""
    Sinv = torch.linalg.inv(Sigma.double().cpu())
    eye = torch.eye(d, dtype=torch.float64)
    fixed = [Sinv, -Sinv, eye, -eye]
    G = torch.randn(max(n_directions - len(fixed), 0), d, d, generator=generator, dtype=torch.float64)
    D = torch.cat([torch.stack(fixed), G])[:n_directions]
    return D / torch.linalg.matrix_norm(D)[:, None, None]


def uniform_risk_gap(Sigma, L, radii, *, n_directions, n_norms, n_prompts, refine_steps=20,
                     refine_prompts=None, generator=None, kind="softmax", dtype=None):
    """Search for the largest risk gap ``|R_L - R_inf|`` over balls ``||A||_F^2 + b^2 <= r^2``.

    1. **Grid.** Matrices ``A = s D`` for ``n_directions`` unit directions ``D`` (``+-Sigma^-1``, ``+-I`` and
       random ones) and ``n_norms`` norms ``s`` evenly spaced in ``[0, max(radii))``, all on one sample of
       ``n_prompts`` prompts; for each ``A`` the best ``b`` with ``b^2 <= r^2 - s^2`` is explicit
       (:meth:`GapCoefficients.sup_over_b`).
    2. **Refinement.** From the best grid point of each radius, ``refine_steps`` steps of projected
       gradient ascent on ``A`` (``b`` re-optimised in closed form) on a second sample of
       ``refine_prompts`` prompts (default ``n_prompts``), with step halving whenever a step does not
       improve.
    3. **Fresh estimate.** The gap at the final point is re-estimated on a third, fresh sample: unbiased
       for the gap at that point, so (up to its standard error) a lower bound of the supremum.

    Parameters
    ----------
    Sigma : (d, d); L : int; radii : sequence of positive floats.
    n_directions, n_norms, n_prompts : int; refine_steps : int >= 0; refine_prompts : int >= 2 or None.
    generator, kind, dtype : as in :func:`gap_coefficients`.

    Returns
    -------
    list of UniformGap, one per radius (in the order given).
    """
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    radii = [_check_real("radius", r, positive=True) for r in radii]
    if not radii:
        raise ValueError("radii must hold at least one radius, got none")
    check_positive_int("n_directions", n_directions)
    check_positive_int("n_norms", n_norms)
    if isinstance(refine_steps, bool) or not isinstance(refine_steps, int) or refine_steps < 0:
        raise ValueError(f"refine_steps must be a non-negative integer, got {refine_steps!r}")
    refine_prompts = n_prompts if refine_prompts is None else refine_prompts
    _check_prompt_count(refine_prompts)
    check_generator(generator)
    dtype = Sigma.dtype if dtype is None else dtype
    D = _directions(d, n_directions, Sigma, generator)  # (nD, d, d)
    norms = torch.arange(n_norms, dtype=torch.float64) * (max(radii) / n_norms)
    grid = (norms[:, None, None, None] * D[None]).reshape(-1, d, d)  # (n_norms * nD, d, d)
    grid_norms = norms.repeat_interleave(D.shape[0])
    coef = gap_coefficients(grid.to(Sigma.dtype), Sigma, L, n_prompts=n_prompts, generator=generator,
                            kind=kind, dtype=dtype)
    out = []
    for r in radii:
        inside = grid_norms < r
        b_max = torch.sqrt((r * r - grid_norms**2).clamp(min=0.0)) * inside
        vals, _, _ = coef.sup_over_b(b_max)
        vals = torch.where(inside, vals, torch.zeros_like(vals))
        k = int(vals.argmax())
        A_best = _refine(grid[k], r, Sigma, L, refine_prompts, refine_steps, generator, kind, dtype)
        fresh = gap_coefficients(A_best.to(Sigma.dtype), Sigma, L, n_prompts=n_prompts, generator=generator,
                                 kind=kind, dtype=dtype)
        b_max_best = math.sqrt(max(r * r - float((A_best**2).sum()), 0.0))
        g, b_arg, se = fresh.sup_over_b(torch.tensor([b_max_best], dtype=torch.float64))
        out.append(UniformGap(sup=float(g[0]), stderr=float(se[0]), A=A_best, b=float(b_arg[0]),
                              grid_sup=float(vals[k]), radius=r, L=L))
    return out


def _abs_gap_and_grad(A, r, x, xq, Sig, kind):
    """max_{|b| <= sqrt(r^2 - ||A||^2)} |b^2 quad(A) - b lin(A)| on fixed prompts, and its A-gradient."""
    A = A.detach().requires_grad_(True)
    m, a = _weighted_means(A[None], x, xq, kind)
    lim = a[:, 0] @ Sig
    m = m[:, 0]
    q = 0.5 * ((m * m).sum(-1) - (lim * lim).sum(-1)).mean()
    l = ((m - lim) * xq).sum(-1).mean()
    bm = torch.sqrt(torch.clamp(r * r - (A * A).sum(), min=1e-12))
    cands = [bm, -bm]
    qf, lf = float(q.detach()), float(l.detach())
    if qf != 0.0 and abs(lf / (2 * qf)) <= float(bm.detach()):
        cands.append(l / (2 * q))
    val = torch.stack([(c * c * q - c * l).abs() for c in cands]).max()
    (grad,) = torch.autograd.grad(val, A)
    return float(val.detach()), grad


def _refine(A0, r, Sigma, L, n_prompts, steps, generator, kind, dtype):
    """Projected, normalised gradient ascent of the absolute gap over A, with step halving."""
    A = A0.detach().to(dtype=dtype, device=Sigma.device).clone()
    if steps == 0:
        return A.double().cpu()
    Sig = Sigma.to(dtype)
    x, xq = _sample_inputs(torch.linalg.cholesky(Sig), L, n_prompts, generator, dtype)
    step = 0.1 * r
    val, grad = _abs_gap_and_grad(A, r, x, xq, Sig, kind)
    for _ in range(steps):
        gnorm = float(torch.linalg.matrix_norm(grad))
        if gnorm == 0.0 or not math.isfinite(gnorm):
            break
        new = A + step * grad / gnorm
        nrm = float(torch.linalg.matrix_norm(new))
        if nrm > 0.999 * r:  # keep room for b; the b-range vanishes on the sphere itself
            new = new * (0.999 * r / nrm)
        new_val, new_grad = _abs_gap_and_grad(new, r, x, xq, Sig, kind)
        if new_val > val:
            A, val, grad = new, new_val, new_grad
        else:
            step /= 2
    return A.detach().double().cpu()


# --------------------------------------------------------------------------------------------------
# finite-prompt gradient flow on a fixed sample


class EmpiricalRisk:
    """The finite-prompt risk ``R_L`` estimated on one fixed sample of prompts, and its gradient flow.

    ``value(A, b) = mean_i c_L,i`` (the sample average of :func:`softlin.icl.conditional_risk`), or with
    ``control_variate=True`` (default) ``mean_i (c_L,i - c_inf,i) + R_inf(A, b)``: the same expectation
    ``R_L(A, b)`` with far smaller sampling error, since the query's own fluctuation cancels. The
    second term is closed form, ``mean_i c_inf,i = 1/2 tr(M S_hat M^T)`` with ``M = b Sigma A - I`` and
    ``S_hat`` the empirical second-moment matrix of the queries, so the control variate costs nothing.

    The gradient is written out by hand (about twice as fast as autograd here; the tests compare the
    two): with ``r = b m - x_q``, ``dc_L/db = m . r`` and
    ``dc_L/dA = sum_i p_i ((x_i - m) . b r) x_i x_q^T`` for softmax weights.

    Gradient flow on ``value`` (:meth:`flow`) is deterministic once the sample is drawn: it is the
    finite-``L`` flow ``theta_L(t)`` of the paper up to this sampling error (full-batch training).

    Parameters
    ----------
    Sigma : Tensor (d, d) positive definite; L : int; n_prompts : int >= 2.
    generator : torch.Generator or None; kind : "softmax" or "linear".
    control_variate : bool; dtype : simulation dtype (default that of Sigma).
    """

    def __init__(self, Sigma, L, n_prompts, *, generator=None, kind="softmax", control_variate=True,
                 dtype=None):
        Sigma = _check_sigma(Sigma)
        check_positive_int("L", L)
        _check_prompt_count(n_prompts)
        check_generator(generator)
        _check_kind(kind)
        if not isinstance(control_variate, bool):
            raise TypeError(f"control_variate must be a bool, got {type(control_variate).__name__}")
        self.dtype = Sigma.dtype if dtype is None else dtype
        self.Sigma64 = Sigma.detach().double().cpu()
        self.Sigma = Sigma.detach().to(self.dtype)
        self.d, self.L, self.n_prompts, self.kind = Sigma.shape[0], L, n_prompts, kind
        self.control_variate = control_variate
        C = torch.linalg.cholesky(self.Sigma)
        self.x, self.x_query = _sample_inputs(C, L, n_prompts, generator, self.dtype)
        self._xT = self.x.permute(2, 0, 1).contiguous()  # (d, n, L): one contiguous plane per coordinate
        S_hat = self.x_query.T @ self.x_query / n_prompts
        self._cv_cov = self.Sigma - S_hat  # enters the control variate
        self._eye = torch.eye(self.d, dtype=self.dtype, device=self.Sigma.device)
        self.last_nfev = 0  # gradient evaluations of the last call to flow()

    def _value_and_grad(self, A, b, need_grad=True):
        """Sample objective and its gradient (hand-written backward pass; no autograd).

        With ``need_grad=False`` only the value is computed and ``(value, None, None)`` is returned."""
        xT, xq, n = self._xT, self.x_query, self.n_prompts
        a = xq @ A.T  # (n, d): A x_q
        s = torch.einsum("dnl,nd->nl", xT, a)  # (n, L) scores x_i^T A x_q
        p = torch.softmax(s, dim=-1) if self.kind == "softmax" else s / self.L
        m = torch.einsum("nl,dnl->nd", p, xT)  # (n, d) weighted mean of the inputs
        r = b * m - xq  # (n, d) residual of the prediction coefficient
        val = 0.5 * (r * r).sum(-1).mean()
        if not need_grad:
            if self.control_variate:
                M = b * self.Sigma @ A - self._eye
                val = val + 0.5 * ((M @ self._cv_cov) * M).sum()
            return val, None, None
        gb = (m * r).sum(-1).mean()
        br = b * r  # dc/dm
        xr = torch.einsum("dnl,nd->nl", xT, br)  # (n, L): x_i . b r
        w = p * (xr - (m * br).sum(-1, keepdim=True)) if self.kind == "softmax" else xr / self.L  # dc/ds_i
        gA = torch.einsum("nl,dnl->nd", w, xT).T @ xq / n  # sum_i w_i x_i x_q^T, averaged
        if self.control_variate:
            M = b * self.Sigma @ A - self._eye
            MC = M @ self._cv_cov
            val = val + 0.5 * (MC * M).sum()
            gA = gA + b * self.Sigma @ MC
            gb = gb + (MC * (self.Sigma @ A)).sum()
        return val, gA, gb

    def _value_autograd(self, A, b):
        """The same objective by plain tensor operations (differentiable; used by the tests)."""
        m, _ = _weighted_means(A[None], self.x, self.x_query, self.kind)
        val = 0.5 * ((b * m[:, 0] - self.x_query) ** 2).sum(-1).mean()
        if self.control_variate:
            M = b * self.Sigma @ A - self._eye
            val = val + 0.5 * torch.trace(M @ self._cv_cov @ M.T)
        return val

    def _prepare(self, A, b):
        As, bs, _ = _check_params(A, b, self.d, batched_ok=False)
        return As[0].detach().to(self.dtype), bs[0].detach().to(self.dtype)

    def value(self, A, b):
        """The sample estimate of ``R_L(A, b)`` (float)."""
        A, b = self._prepare(A, b)
        with torch.no_grad():
            return float(self._value_and_grad(A, b, need_grad=False)[0])

    def gradient(self, A, b):
        """Gradient of :meth:`value`: ``(dA (d, d), db scalar)`` tensors in the simulation dtype."""
        A, b = self._prepare(A, b)
        with torch.no_grad():
            _, gA, gb = self._value_and_grad(A, b)
        return gA, gb

    def gradient_gap(self, A, b):
        """``||grad value(A, b) - grad R_inf(A, b)||``, the force that pushes the two flows apart (float)."""
        gA, gb = self.gradient(A, b)
        A64, b64 = (t.detach().double().cpu() for t in self._prepare(A, b))
        iA, ib = icl.infinite_prompt_risk_grad(A64, b64, self.Sigma64)
        return float(torch.sqrt(((gA.double().cpu() - iA) ** 2).sum() + (gb.double().cpu() - ib) ** 2))

    def flow(self, A0, b0, t_eval, *, rtol=1e-6, atol=1e-8, method="RK45"):
        """Gradient flow ``d theta / dt = -grad value(theta)`` from ``(A0, b0)``, by ``solve_ivp``.

        Parameters
        ----------
        A0 : (d, d); b0 : scalar; t_eval : increasing 1-D array of times >= 0 (first usually 0).
        rtol, atol, method : passed to ``scipy.integrate.solve_ivp``.

        Returns
        -------
        softlin.icl.Trajectory (float64, CPU) with ``risk`` = :meth:`value` along the flow. The number
        of gradient evaluations the solver used is left in the attribute ``last_nfev``.

        Raises
        ------
        RuntimeError if the solver fails.
        """
        from scipy.integrate import solve_ivp

        A0, b0 = self._prepare(A0, b0)
        t_eval = np.asarray(t_eval, dtype=np.float64)
        if t_eval.ndim != 1 or t_eval.size == 0 or np.any(np.diff(t_eval) <= 0) or t_eval[0] < 0:
            raise ValueError(f"t_eval must be a non-empty increasing 1-D array of times >= 0, got {t_eval!r}")
        dev, d = self.Sigma.device, self.d

        def rhs(_t, y):
            A, b = _unflatten(torch.as_tensor(y, dtype=self.dtype, device=dev), d)
            _, gA, gb = self._value_and_grad(A, b)
            return -torch.cat([gA.reshape(-1), gb[None]]).double().cpu().numpy()

        y0 = _theta(A0, b0).double().cpu().numpy()
        with torch.no_grad():
            sol = solve_ivp(rhs, (0.0, float(t_eval[-1])), y0, method=method, t_eval=t_eval, rtol=rtol,
                            atol=atol)
            if not sol.success:
                raise RuntimeError(f"solve_ivp failed: {sol.message}")
            theta = torch.from_numpy(sol.y.T.copy())  # (n, d^2 + 1)
            A, b = _unflatten(theta, d)
            values = [self._value_and_grad(a.to(self.dtype), bb.to(self.dtype), need_grad=False)[0]
                      for a, bb in zip(A, b)]
            risk = torch.tensor([float(v) for v in values], dtype=torch.float64)
        self.last_nfev = int(sol.nfev)
        return icl.Trajectory(t=torch.from_numpy(sol.t.copy()), A=A.contiguous(), b=b.contiguous(), risk=risk)


def finite_prompt_flow(A0, b0, Sigma, L, t_eval, *, n_prompts, generator=None, kind="softmax",
                       control_variate=True, dtype=None, rtol=1e-6, atol=1e-8, method="RK45"):
    """Gradient flow of the finite-prompt risk on a fixed sample: ``EmpiricalRisk(...).flow(...)``.

    See :class:`EmpiricalRisk` and :meth:`EmpiricalRisk.flow`. Returns a softlin.icl.Trajectory.
    """
    risk = EmpiricalRisk(Sigma, L, n_prompts, generator=generator, kind=kind, control_variate=control_variate,
                         dtype=dtype)
    return risk.flow(A0, b0, t_eval, rtol=rtol, atol=atol, method=method)


def trajectory_distance(traj_a, traj_b):
    """``||theta_a(t) - theta_b(t)||`` with ``||theta||^2 = ||A||_F^2 + b^2``, at the common times (n,).

    Raises
    ------
    ValueError if the two trajectories are not recorded at the same times.
    """
    for name, tr in (("traj_a", traj_a), ("traj_b", traj_b)):
        if not isinstance(tr, icl.Trajectory):
            raise TypeError(f"{name} must be a softlin.icl.Trajectory, got {type(tr).__name__}")
    if traj_a.t.shape != traj_b.t.shape or not torch.allclose(traj_a.t.double(), traj_b.t.double(), rtol=0,
                                                              atol=1e-9):
        raise ValueError("traj_a and traj_b must be recorded at the same times t")
    dA = traj_a.A.double() - traj_b.A.double()
    db = traj_a.b.double() - traj_b.b.double()
    return torch.sqrt((dA**2).sum((-1, -2)) + db**2)


# --------------------------------------------------------------------------------------------------
# Lipschitz constants and Grönwall bounds


def infinite_risk_hessian(A, b, Sigma):
    """Hessian of ``R_inf`` in ``theta = (vec A, b)`` (row-major ``vec``), in closed form.

    ``R_inf = 1/2 b^2 tr(A^T Sigma^2 A Sigma) - b tr(Sigma^2 A) + 1/2 tr Sigma`` (``tau2 = 1``), so

        d^2R/dA^2 = b^2 (Sigma^2 kron Sigma),   d^2R/dA db = 2 b Sigma^2 A Sigma - Sigma^2,
        d^2R/db^2 = tr(A^T Sigma^2 A Sigma).

    The tests check it against ``torch.func.hessian`` of :func:`softlin.icl.infinite_prompt_risk`.

    Parameters
    ----------
    A : (d, d) with b scalar, or (K, d, d) with b (K,); Sigma : (d, d) positive definite.

    Returns
    -------
    Tensor (d^2 + 1, d^2 + 1), or (K, d^2 + 1, d^2 + 1) for batched parameters; symmetric.
    """
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    As, bs, batched = _check_params(A, b, d)
    for name, t in (("A", As), ("b", bs)):
        if t.dtype != Sigma.dtype or t.device != Sigma.device:
            raise ValueError(f"{name} must have the dtype and device of Sigma ({Sigma.dtype}, "
                             f"{Sigma.device}), got {t.dtype} on {t.device}")
    S2 = Sigma @ Sigma
    K, p = As.shape[0], d * d + 1
    H = torch.empty(K, p, p, dtype=Sigma.dtype, device=Sigma.device)
    H[:, : d * d, : d * d] = (bs**2)[:, None, None] * torch.kron(S2, Sigma)
    mixed = (2 * bs[:, None, None] * (S2 @ As @ Sigma) - S2).reshape(K, d * d)
    H[:, : d * d, d * d] = mixed
    H[:, d * d, : d * d] = mixed
    H[:, d * d, d * d] = torch.einsum("kji,jl,klm,mi->k", As, S2, As, Sigma)
    return H if batched else H[0]


def hessian_extremes(A, b, Sigma):
    """Spectral norm and smallest eigenvalue of the Hessian of ``R_inf`` at each of K points.

    The spectral norm is a local Lipschitz constant of ``grad R_inf`` (the ``beta_inf`` of Lemma D.1 is its
    maximum over the ball); ``-lambda_min`` is the local one-sided Lipschitz constant of the flow's
    vector field ``-grad R_inf`` (negative where ``R_inf`` is strictly convex: the flow contracts there).

    Parameters
    ----------
    A : (K, d, d); b : (K,); Sigma : (d, d).

    Returns
    -------
    (norms (K,), lambda_min (K,)) float64 tensors.
    """
    Sigma = _check_sigma(Sigma)
    As, bs, _ = _check_params(A, b, Sigma.shape[0])
    ev = torch.linalg.eigvalsh(infinite_risk_hessian(As, bs, Sigma)).double().cpu()  # (K, p), ascending
    return ev.abs().amax(dim=1), ev[:, 0]


def max_hessian_norm_on_ball(Sigma, radius, *, n_points, generator=None):
    """Estimate ``beta_inf = sup_{||theta|| <= radius} ||Hess R_inf(theta)||`` by sampling.

    ``R_inf`` is a polynomial of degree four, so its Hessian norm grows with ``||theta||``; the points are
    drawn uniformly on the sphere of the given radius (where the supremum lies for the radii used in the
    book) and, as many again, uniformly in the ball. A sampled maximum is a lower estimate of the
    supremum.

    Returns
    -------
    float
    """
    Sigma = _check_sigma(Sigma)
    radius = _check_real("radius", radius, positive=True)
    check_positive_int("n_points", n_points)
    check_generator(generator)
    d = Sigma.shape[0]
    p = d * d + 1
    z = torch.randn(2 * n_points, p, generator=generator, dtype=torch.float64)
    z = z / torch.linalg.vector_norm(z, dim=1, keepdim=True)
    scale = torch.ones(2 * n_points, dtype=torch.float64)
    scale[n_points:] = torch.rand(n_points, generator=generator, dtype=torch.float64) ** (1.0 / p)
    theta = (z * scale[:, None] * radius).to(Sigma.dtype)
    A, b = _unflatten(theta, d)
    return float(hessian_extremes(A, b, Sigma)[0].max())


def segment_constants(traj_a, traj_b, Sigma, *, n_interp=5):
    """Local Lipschitz and one-sided constants of ``grad R_inf`` on the segments ``[theta_a(t), theta_b(t)]``.

    The Grönwall argument of Lemma D.1 only uses ``grad R_inf`` between the two flows at equal times:
    ``grad R_inf(theta_a) - grad R_inf(theta_b) = H_bar (theta_a - theta_b)`` with ``H_bar`` the Hessian
    averaged on the segment. ``n_interp`` points per segment (end points included) are sampled.

    Returns
    -------
    (beta (n,), mu (n,)) numpy arrays: the largest Hessian spectral norm and the largest ``-lambda_min``
    on each segment.
    """
    check_positive_int("n_interp", n_interp)
    if n_interp < 2:
        raise ValueError(f"n_interp must be at least 2 (the two end points), got {n_interp}")
    trajectory_distance(traj_a, traj_b)  # same-times check
    Sigma = _check_sigma(Sigma)
    s = torch.linspace(0.0, 1.0, n_interp, dtype=torch.float64)
    w_a, w_b = (1 - s)[None, :, None, None], s[None, :, None, None]
    A = w_a * traj_a.A.double()[:, None] + w_b * traj_b.A.double()[:, None]  # (n, n_interp, d, d)
    b = (1 - s)[None, :] * traj_a.b.double()[:, None] + s[None, :] * traj_b.b.double()[:, None]
    n = A.shape[0]
    d = Sigma.shape[0]
    norms, mins = hessian_extremes(A.reshape(-1, d, d).to(Sigma.dtype), b.reshape(-1).to(Sigma.dtype), Sigma)
    beta = norms.reshape(n, n_interp).max(1).values.numpy()
    return beta, (-mins).reshape(n, n_interp).max(1).values.numpy()


def lemma_d1_bound(t, g, beta):
    """The bound of Lemma D.1, ``g t exp(beta t)`` (NumPy array like ``t``).

    Parameters
    ----------
    t : array-like of times >= 0; g : float >= 0, a bound on ``||grad R_L - grad R_inf||`` along the way;
    beta : float >= 0, a Lipschitz constant of ``grad R_inf`` on a ball holding both flows.
    """
    t = np.asarray(t, dtype=np.float64)
    if np.any(t < 0) or not np.all(np.isfinite(t)):
        raise ValueError("t must hold finite times >= 0")
    g = _check_real("g", g, nonneg=True)
    beta = _check_real("beta", beta, nonneg=True)
    with np.errstate(over="ignore"):
        return g * t * np.exp(beta * t)


def gronwall_envelope(t, g, rate):
    """Solution ``E`` of ``E' = g(t) + rate(t) E``, ``E(0) = 0``, with coefficients constant on each interval.

    If ``||e||' <= g + rate ||e||`` with ``e(0) = 0`` (the differential inequality of the proof of
    Lemma D.1), then ``||e(t)|| <= E(t)``. On ``[t_k, t_{k+1}]`` the coefficients are taken as the larger
    of their values at the two ends, and the exact solution of the constant-coefficient equation is used:
    ``E_{k+1} = E_k e^{r h} + g (e^{r h} - 1) / r``. With constant ``g`` and ``rate = beta`` this is
    ``g (e^{beta t} - 1) / beta <= g t e^{beta t}``, the sharper form of :func:`lemma_d1_bound`.

    Parameters
    ----------
    t : increasing 1-D array (first entry the start); g : array like t (>= 0) or float; rate : array like
    t or float (any sign: negative where the flow contracts).

    Returns
    -------
    numpy array like t.
    """
    t = np.asarray(t, dtype=np.float64)
    if t.ndim != 1 or t.size == 0 or np.any(np.diff(t) <= 0):
        raise ValueError(f"t must be a non-empty increasing 1-D array, got {t!r}")
    g = np.broadcast_to(np.asarray(g, dtype=np.float64), t.shape)
    rate = np.broadcast_to(np.asarray(rate, dtype=np.float64), t.shape)
    if np.any(g < 0) or not np.all(np.isfinite(g)) or not np.all(np.isfinite(rate)):
        raise ValueError("g must be finite and non-negative and rate finite")
    E = np.zeros_like(t)
    for k in range(t.size - 1):
        h = t[k + 1] - t[k]
        gk, rk = max(g[k], g[k + 1]), max(rate[k], rate[k + 1])
        x = rk * h
        growth = h * (np.expm1(x) / x if abs(x) > 1e-12 else 1.0 + x / 2)  # (e^{r h} - 1) / r, stably
        with np.errstate(over="ignore"):
            E[k + 1] = E[k] * math.exp(min(rk * h, 700.0)) + gk * growth
    return E


def first_time_below(t, risk, level):
    """First recorded time at which ``risk <= level`` (float), or ``inf`` if it never is.

    In the proof of Theorem 4.3 this is the time ``T`` after which the infinite-prompt flow is within
    ``epsilon / 2`` of its limit risk (``level = lim + epsilon / 2``).
    """
    t = np.asarray(t, dtype=np.float64)
    risk = np.asarray(risk, dtype=np.float64)
    if t.ndim != 1 or risk.shape != t.shape:
        raise ValueError(f"t and risk must be 1-D arrays of the same length, got {t.shape} and {risk.shape}")
    level = _check_real("level", level)
    hit = np.nonzero(risk <= level)[0]
    return float(t[hit[0]]) if hit.size else math.inf


# --------------------------------------------------------------------------------------------------
# explorer


def plot_transfer_proof(ax_risk, ax_budget, t, risk_inf, risk_L, budget, *, T, R_lim, epsilon):
    """The proof of Theorem 4.3 as a picture (two panels of chapter 4).

    Left (``ax_risk``): the infinite-prompt risk curve (solid), the finite-prompt risk curves of
    ``risk_L`` (dashed), the levels ``R_lim + epsilon / 2`` (dotted) and ``R_lim + epsilon`` (dashed) and
    the time ``T`` (vertical line), on a log scale. Right (``ax_budget``): for each prompt length, the two
    terms of step 2 of the proof at ``T`` stacked as bars (absolute values), against the budget
    ``epsilon / 2``.

    Parameters
    ----------
    ax_risk, ax_budget : matplotlib Axes.
    t : (n,) times; risk_inf : (n,) risk of the infinite-prompt flow.
    risk_L : dict L -> (n,) risk of the finite-prompt flow at length L (the curves to draw).
    budget : dict L -> (gap, drift), the two terms at T (floats), in the order of the bars.
    T, R_lim, epsilon : floats.
    """
    t = np.asarray(t, dtype=np.float64)
    risk_inf = np.asarray(risk_inf, dtype=np.float64)
    if t.ndim != 1 or risk_inf.shape != t.shape:
        raise ValueError(f"t and risk_inf must be 1-D arrays of the same length, got {t.shape} and "
                         f"{risk_inf.shape}")
    if not budget:
        raise ValueError("budget must hold at least one prompt length")
    epsilon = _check_real("epsilon", epsilon, positive=True)
    ax_risk.plot(t, risk_inf, color="#0072B2", linestyle="-", marker="",
                 label=r"$R_\infty(\theta_\infty(t))$")
    dashed = ["#E69F00", "#D55E00", "#CC79A7", "#009E73"]
    for (L, r), c in zip(risk_L.items(), dashed):
        r = np.asarray(r, dtype=np.float64)
        if r.shape != t.shape:
            raise ValueError(f"risk_L[{L}] must have the shape of t {t.shape}, got {r.shape}")
        ax_risk.plot(t, r, color=c, linestyle="--", marker="", label=rf"$\hat R_L(\theta_L(t))$, $L = {L}$")
    ax_risk.axhline(R_lim + epsilon / 2, color="0.3", linestyle=":", marker="",
                    label=r"$R_{\lim} + \varepsilon/2$")
    ax_risk.axhline(R_lim + epsilon, color="#009E73", linestyle="--", marker="",
                    label=r"$R_{\lim} + \varepsilon$")
    ax_risk.axvline(T, color="0.3", linestyle="-.", lw=1, marker="")
    ax_risk.text(T, risk_inf.max(), " $T$", va="top")
    ax_risk.set(yscale="log", xlabel="flow time $t$", ylabel="risk (half MSE)")
    ax_risk.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)
    xs = np.arange(len(budget))
    gaps = np.array([abs(g) for g, _ in budget.values()])
    drifts = np.array([abs(dr) for _, dr in budget.values()])
    ax_budget.bar(xs, gaps, color="#56B4E9", label=r"gap $|\hat R_L - R_\infty|(\theta_L(T))$")
    ax_budget.bar(xs, drifts, bottom=gaps, color="#CC79A7", hatch="//",
                  label=r"drift $|R_\infty(\theta_L(T)) - R_\infty(\theta_\infty(T))|$")
    ax_budget.axhline(epsilon / 2, color="k", linestyle="--", marker="", label=r"$\varepsilon/2$")
    positive = np.concatenate([gaps, gaps + drifts, [epsilon / 2]])
    ax_budget.set(xticks=xs, xticklabels=[str(L) for L in budget], yscale="log", xlabel="prompt length $L$",
                  ylabel="excess at $T$", ylim=(positive[positive > 0].min() / 3, 2 * positive.max()))
    ax_budget.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=1)


@functools.lru_cache(maxsize=64)
def _explorer_flows(L, alpha, n_prompts, t_max, n_times, seed, sigma_key):
    """Both flows of :func:`plot_transfer_budget`, cached so that moving the epsilon slider is instant."""
    d, entries = sigma_key
    Sigma = torch.tensor(entries, dtype=torch.float64).reshape(d, d)
    gen = torch.Generator().manual_seed(seed)
    A0, b0 = icl.balanced_initialisation(d, alpha, generator=gen, dtype=Sigma.dtype)
    t = np.linspace(0.0, t_max, n_times)
    inf = icl.infinite_prompt_flow(A0, b0, Sigma, t, rtol=1e-8, atol=1e-10)
    fin = finite_prompt_flow(A0, b0, Sigma, L, t, n_prompts=n_prompts, generator=gen, dtype=torch.float32,
                             rtol=1e-4, atol=1e-6)
    return t, inf.risk.numpy(), fin.risk.numpy()


def plot_transfer_budget(ax, L=100, epsilon=0.05, *, alpha=1.0, Sigma=None, n_prompts=200, t_max=40.0,
                         n_times=81, seed=0, legend=True):
    """Explorer panel: the proof of Theorem 4.3 on one pair of flows.

    Integrates the infinite-prompt flow and the finite-prompt flow at length ``L`` (on ``n_prompts``
    fixed prompts, :class:`EmpiricalRisk`) from the balanced start of scale ``alpha`` (rank-``d``
    ``Theta`` drawn with ``seed``), for ``Sigma`` (default: half the KMS(2, 0.5) matrix). It draws both
    risk curves on a log scale, the level ``R_lim + epsilon / 2`` (dotted), the time ``T`` where the
    infinite flow reaches it (vertical line) and the target ``R_lim + epsilon`` (dashed), where ``R_lim``
    is the last value of the infinite flow's risk. The title says whether the finite flow's risk at
    ``T`` is within the target; by monotonicity of gradient flow it then stays there.

    Returns
    -------
    dict with ``t``, ``risk_inf``, ``risk_L`` (NumPy arrays), ``T``, ``risk_L_at_T`` and ``holds`` (bool).
    """
    check_positive_int("L", L)
    epsilon = _check_real("epsilon", epsilon, positive=True)
    alpha = _check_real("alpha", alpha, positive=True)
    check_positive_int("n_prompts", n_prompts)
    check_positive_int("n_times", n_times)
    t_max = _check_real("t_max", t_max, positive=True)
    if Sigma is None:
        Sigma = 0.5 * icl.kms_covariance(2, 0.5)
    Sigma = _check_sigma(Sigma)
    key = (Sigma.shape[0], tuple(Sigma.detach().double().cpu().reshape(-1).tolist()))
    t, r_inf, r_L = _explorer_flows(L, alpha, n_prompts, t_max, n_times, int(seed), key)
    lim = float(r_inf[-1])
    T = first_time_below(t, r_inf, lim + epsilon / 2)
    kT = int(np.searchsorted(t, T)) if math.isfinite(T) else t.size - 1
    holds = bool(math.isfinite(T) and r_L[kT] <= lim + epsilon)
    ax.plot(t, r_inf, color="#0072B2", linestyle="-", marker="", label=r"$R_\infty(\theta_\infty(t))$")
    ax.plot(t, r_L, color="#D55E00", linestyle="--", marker="", label=rf"$\hat R_L(\theta_L(t))$")
    ax.axhline(lim + epsilon / 2, color="0.35", linestyle=":", lw=1.2, label=r"$R_{\lim}+\varepsilon/2$")
    ax.axhline(lim + epsilon, color="#009E73", linestyle="--", lw=1.2, label=r"$R_{\lim}+\varepsilon$")
    if math.isfinite(T):
        ax.axvline(T, color="0.35", linestyle="-.", lw=1)
        ax.plot([T], [r_L[kT]], color="#D55E00", marker="s" if holds else "X", linestyle="", markersize=7)
    ax.set_yscale("log")
    ax.set_xlabel("flow time $t$")
    ax.set_ylabel("risk (half MSE)")
    ax.set_title(rf"$L={L}$, $\varepsilon={epsilon:g}$: " + ("holds" if holds else "fails"))
    if legend:
        ax.legend(fontsize=7)
    return {"t": t, "risk_inf": r_inf, "risk_L": r_L, "T": T, "risk_L_at_T": float(r_L[kT]), "holds": holds}
