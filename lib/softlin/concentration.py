"""Concentration of finite-prompt attention around its infinite-prompt limit (paper Section 3).

Softmax attention over a prompt of L tokens is ``V m_hat(z)``, with ``m_hat`` the softmax-weighted
(tilted) mean of the tokens, a self-normalised average; its limit is ``V m(z)``, the mean of the tilted law
``mu^(Uz)``. This module holds

* one Monte Carlo estimator of the finite-prompt errors, :func:`sample_errors`: prompts are drawn chunk by
  chunk and fed to the engine's online accumulator :class:`softlin.attention.TiltedSums`, which gives the
  tilted mean, covariance and effective sample size (ESS) of every prompt;
* the Gaussian closed forms they are compared with: the delta-method expansion
  ``L * E error = A + B / L + O(L^-2)`` for one query (:func:`fixed_query_mse_expansion` for the output,
  :func:`delta_method_expansion` for the output and the V- and U-Jacobians), its exact average over a
  Gaussian query law (:func:`query_averaged_expansion`), the ESS expansion and the heuristic rate exponent.

Errors are squared Frobenius norms: ``dT_k/dV_jl = delta_kj m_l`` gives ``|J_V - J_V^inf|^2 = D_out
|m_hat - m|^2`` and ``dT_k/dU_ab = (V C)_ka z_b`` gives ``|J_U - J_U^inf|^2 = |V (C_hat - C)|_F^2 |z|^2``,
with ``C`` the tilted covariance.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from ._checks import (
    as_real_array,
    as_tensor_arg,
    check_bool,
    check_choice,
    check_draws,
    check_generator,
    check_matrix,
    check_memory,
    check_positive_int,
    check_psd,
    check_same_dtype_device,
    common_dim,
    validated_by,
)
from ._progress import progress
from .attention import TiltedSums
from .measures import _check_limit_args, gauss_hermite_rule, gaussian_range_factor

__all__ = [
    "PromptErrors",
    "delta_method_expansion",
    "ess_ratio_expansion",
    "fixed_query_mse_expansion",
    "heuristic_rate_exponent",
    "query_averaged_expansion",
    "query_averaged_rates",
    "sample_errors",
]

#: The errors :func:`sample_errors` measures: the output's and those of its V- and U-Jacobians.
ERROR_KINDS = ("output", "grad_V", "grad_U")


class PromptErrors(NamedTuple):
    """Squared errors of ``n_prompts`` independent prompts at ``Q`` queries, each (n_prompts, Q).

    ``output = |T[mu_hat_L](z) - T[mu](z)|^2``; ``grad_V``, ``grad_U``: the squared Frobenius errors of the
    Jacobians (None unless asked for); ``ess``: effective sample size ``1 / sum_i p_i^2`` of the weights.
    """

    output: torch.Tensor
    grad_V: torch.Tensor | None
    grad_U: torch.Tensor | None
    ess: torch.Tensor


def _check_sample_errors(
    measure, queries, U, V, L, n_prompts, *, generator, jacobians=False, chunk_size=None
):
    """A token law with a finite MGF; queries (Q, D) or (n_prompts, Q, D), U (D, D), V (D_out, D) in its
    dtype and device; positive sizes whose sums fit in memory and whose draws are not endless."""
    L, n_prompts = check_positive_int("L", L), check_positive_int("n_prompts", n_prompts)
    check_positive_int("chunk_size", chunk_size, allow_none=True)
    check_generator(generator, required=True)
    jacobians = check_bool("jacobians", jacobians)
    _check_limit_args(queries, U, V, measure=measure)
    D, Q = measure.dim, queries.shape[-2] if queries.dim() > 1 else 0
    if queries.dim() not in (2, 3) or queries.shape[:-2] not in ((), (n_prompts,)):
        raise ValueError(
            f"queries must have shape (Q, {D}) or ({n_prompts}, Q, {D}), got {tuple(queries.shape)}"
        )
    sizes = f"L = {L}, n_prompts = {n_prompts}"
    check_draws(sizes, L * n_prompts)
    chunk = _chunk(L, n_prompts, Q, chunk_size)
    per_prompt = Q * (D + 4 + 2 * jacobians * D * D) + chunk * (D + 2 * Q)  # sums, then one chunk
    n_bytes = n_prompts * per_prompt * queries.element_size()
    check_memory(sizes, n_bytes, device=queries.device, what="the sums of every prompt")


def _chunk(L, n_prompts, Q, chunk_size):
    """Tokens per prompt drawn at once: about 2^20 scores over all prompts unless ``chunk_size``."""
    return min(L, chunk_size or max(1, 2**20 // (n_prompts * Q)))


@validated_by(_check_sample_errors)
def sample_errors(
    measure, queries, U, V, L, n_prompts, *, generator, jacobians=False, chunk_size=None
) -> PromptErrors:
    """Monte Carlo errors of softmax attention over ``n_prompts`` prompts of ``L`` i.i.d. tokens.

    Tokens are drawn from ``generator`` chunk by chunk and consumed by :class:`TiltedSums` (memory
    O(n_prompts * Q * chunk), not O(L)); the limits are the measure's ``tilted_mean`` and
    ``tilted_covariance`` (closed form for a Gaussian). A run of more than a few seconds shows progress.

    Parameters
    ----------
    measure : TokenMeasure with a finite MGF
    queries : Tensor, shape (Q, D) shared by every prompt, or (n_prompts, Q, D)
    U : Tensor (D, D);  V : Tensor (D_out, D)
    L, n_prompts : positive int
    generator : torch.Generator
    jacobians : bool, also return the V- and U-Jacobian errors
    chunk_size : positive int, optional; default about 2^20 scores per chunk

    Returns
    -------
    PromptErrors, each field of shape (n_prompts, Q)

    Raises
    ------
    TypeError, ValueError
        No finite MGF, wrong shapes, dtypes or devices, non-positive sizes, a missing generator, sums
        beyond the machine's memory, more than ``MAX_DRAWS`` tokens in all.
    """
    z = queries.expand(n_prompts, *queries.shape[-2:])  # (P, Q, D)
    a = z @ U.mT  # (P, Q, D): the tilt U z of each query
    D, chunk = z.shape[-1], _chunk(L, *z.shape[:2], chunk_size)
    sums = TiltedSums(a, second=jacobians)
    for start in progress(range(0, L, chunk), work=n_prompts * L * D):
        c = min(chunk, L - start)
        sums.update(measure.sample(n_prompts * c, generator=generator).reshape(n_prompts, c, D))
    mom = sums.moments()
    dm = mom.mean - measure.tilted_mean(a)  # (P, Q, D)
    grad_V = grad_U = None
    if jacobians:
        grad_V = V.shape[0] * (dm**2).sum(-1)
        dC = mom.covariance - measure.tilted_covariance(a)  # (P, Q, D, D)
        grad_U = ((V @ dC) ** 2).sum((-1, -2)) * (z**2).sum(-1)
    return PromptErrors(((dm @ V.mT) ** 2).sum(-1), grad_V, grad_U, mom.ess)


# ---------------------------------------------------------------------------------------------------
# Gaussian closed forms (delta method)
# ---------------------------------------------------------------------------------------------------
def _gaussian_args(U, V, cov, queries=None, *, need_queries=True):
    """U (D, D), V (D_out, D), cov (D, D) PSD and queries (Q, D) (unless not ``need_queries``), with D
    that of most of them (one wrong argument is the one an error names)."""
    U, V, cov = as_tensor_arg("U", U), as_tensor_arg("V", V), as_tensor_arg("cov", cov)
    named = {"cov": cov, "U": U, "V": V}
    if need_queries:
        named["queries"] = queries = as_tensor_arg("queries", queries)
    D, _ = common_dim({k: x.shape[-1] if x.dim() else 0 for k, x in named.items()})
    check_matrix("cov", cov, D, D)
    check_matrix("U", U, D, D)
    check_matrix("V", V, None, D)
    if need_queries:
        check_matrix("queries", queries, None, D)
    check_same_dtype_device(named)
    check_psd("cov", cov)
    return U, V, cov, queries


def fixed_query_mse_expansion(queries, U, V, cov):
    """Delta-method expansion of the fixed-query output error for Gaussian tokens ``N(m, cov)``.

    ``L * E |T[mu_hat_L](z) - T[mu](z)|^2 = C1 + C2 / L + O(L^-2)`` (the book's fixed-query lemma) with
    ``a = U z``, ``s = a^T cov a``, ``tr = tr(V cov V^T)``, ``zeta = |V cov a|^2``:
    ``C1 = e^s (tr + zeta)`` and
    ``C2 = -2 e^{3s} (tr + 4 zeta) + 3 e^{2s} (tr + 3 zeta) - e^s (tr + zeta)`` (from ``1 / (1 + eps)^2``
    expanded around the normalised softmax denominator). Neither depends on ``m``; ``C2 < 0`` for ``s > 0``.

    queries (Q, D), U (D, D), V (D_out, D), cov (D, D) PSD -> C1, C2 : Tensor (Q,). A query whose
    ``e^{3s}`` exceeds the dtype's range (``s > 236`` in float64: a far quadrature node) gets the IEEE
    overflow (``inf``, or NaN where two such terms cancel) in that entry, as ``torch.exp`` does.
    """
    U, V, cov, queries = _gaussian_args(U, V, cov, queries)  # validation
    a = queries @ U.mT  # (Q, D)
    s, zeta = ((a @ cov) * a).sum(-1), ((a @ cov @ V.mT) ** 2).sum(-1)
    tr, e = torch.trace(V @ cov @ V.mT), torch.exp(s)
    C1 = e * (tr + zeta)
    return C1, -2 * e**3 * (tr + 4 * zeta) + 3 * e**2 * (tr + 3 * zeta) - C1


def _error_function(kind, V, cov):
    """The error ``h`` as a function of the sums ``x = (s0, s1, vec s2)`` of the weighted tokens, in
    coordinates centred at the tilted mean (the limit is then mean 0 and covariance ``cov``)."""
    D = cov.shape[0]

    def h(x):
        mean = x[1 : 1 + D] / x[0]
        if kind == "output":
            return ((V @ mean) ** 2).sum()
        if kind == "grad_V":
            return V.shape[0] * (mean**2).sum()
        C = x[1 + D :].reshape(D, D) / x[0] - torch.outer(mean, mean)
        return ((V @ (C - cov)) ** 2).sum()  # times |z|^2 for the U-Jacobian

    return h


def _derivatives(kind, V, cov):
    """The point ``mu = (1, 0, vec cov)`` of the sums and the 2nd to 4th derivatives of ``h`` there."""
    h = _error_function(kind, V, cov)
    mu = torch.cat([torch.ones_like(cov[0, :1]), torch.zeros_like(cov[0]), cov.flatten()])
    H = torch.func.hessian(h)
    return mu, H(mu), torch.func.jacfwd(H)(mu), torch.func.jacfwd(torch.func.jacfwd(H))(mu)


def _expansion_terms(z, U, cov, kind, derivatives):
    """Coefficients of ``A = A_1 r`` and ``B = sum_j B_j r^j`` (j = 0..3) in ``r = e^{s(z)}``, (Q,), (Q, 4).

    With tokens ``y`` centred at the tilted mean, ``w = e^{a^T y + s/2}`` (so ``E w = 1``) and the sums
    ``X = w (1, y, vec y y^T)`` of mean ``mu``, the error is ``h(X_bar)``, ``h(mu) = 0``, and
    ``E h(X_bar) = H:Sig / (2L) + (T:k3 / 6 + Q:(Sig x Sig) / 8) / L^2 + O(L^-3)``: H, T, Q the 2nd to
    4th derivatives of h at mu, Sig and k3 the 2nd and 3rd central moments of X. These come from
    ``E[w^k f(y)] = r^{k(k-1)/2} E f(N((k-1) cov a, cov))``, exact by a 4-node Gauss-Hermite rule.
    """
    mu, H, T, Q4 = derivatives
    nodes, w = gauss_hermite_rule(torch.zeros_like(cov[0]), cov, 4)  # (K, D), (K,)
    shift = (z @ U.mT @ cov)[:, None, :]  # (Q, 1, D): cov a
    g2, g3 = (_monomials(nodes + k * shift) for k in (1, 2))  # (Q, K, n)
    m2 = torch.einsum("k,qki,qkj->qij", w, g2, g2)  # E[X X^T] / r
    m3 = torch.einsum("k,qki,qkj,qkl->qijl", w, g3, g3, g3)  # E[X X X] / r^3
    A1 = 0.5 * torch.einsum("ij,qij->q", H, m2)  # no r^0 term: h is 0-homogeneous, so H mu = 0
    Tm, Qmm = T @ mu, Q4 @ mu @ mu  # (n, n) each
    B0 = (Tm @ mu @ mu) / 3 + (Qmm @ mu @ mu) / 8
    B = torch.stack(
        [
            B0.expand(len(z)),
            -torch.einsum("ij,qij->q", Tm / 2 + Qmm / 4, m2),
            torch.einsum("qij,ijkl,qkl->q", m2, Q4, m2) / 8,
            torch.einsum("ijk,qijk->q", T, m3) / 6,
        ],
        -1,
    )
    if kind == "grad_U":
        z2 = (z**2).sum(-1)
        A1, B = A1 * z2, B * z2[:, None]
    return A1, B


def _monomials(y):
    """(..., D) -> (..., 1 + D + D^2): ``(1, y, vec y y^T)``."""
    return torch.cat(
        [torch.ones_like(y[..., :1]), y, (y.unsqueeze(-1) * y.unsqueeze(-2)).flatten(-2)], -1
    )


def delta_method_expansion(queries, U, V, cov, kind="output"):
    """``L * E error = A + B / L + O(L^-2)`` for one query, Gaussian tokens ``N(m, cov)``.

    ``kind``: "output", "grad_V" or "grad_U" (the errors of :func:`sample_errors`): the second-order delta
    method on the weighted sums of the tokens, with their exact Gaussian moments. For "output" it equals
    :func:`fixed_query_mse_expansion`; for "grad_V", ``A = D_out e^s (tr cov + |cov a|^2)``; for "grad_U",
    ``A`` is a fourth moment of the tilted tokens times ``|z|^2``.

    queries (Q, D), U (D, D), V (D_out, D), cov (D, D) PSD -> A, B : Tensor (Q,); overflow beyond the
    dtype's range as :func:`fixed_query_mse_expansion`.
    """
    check_choice("kind", kind, ERROR_KINDS)
    U, V, cov, queries = _gaussian_args(U, V, cov, queries)
    A1, B = _expansion_terms(queries, U, cov, kind, _derivatives(kind, V, cov))
    a = queries @ U.mT
    r = torch.exp(((a @ cov) * a).sum(-1))  # e^s
    return A1 * r, (B * r[:, None] ** torch.arange(4, dtype=r.dtype, device=r.device)).sum(-1)


def query_averaged_expansion(U, V, cov, kind="output", query_cov=None):
    """Exact average of :func:`delta_method_expansion` over Gaussian queries ``z ~ N(0, query_cov)``.

    With ``z = S g``, ``S S^T = query_cov`` (default I), ``M = S^T U^T cov U S``, each term ``e^{j s} P_j(z)``
    (``P_j`` a polynomial of degree <= 10) averages to ``det(I - 2jM)^{-1/2} E P_j(N(0, S (I - 2jM)^{-1}
    S^T))``, finite iff ``2 j lambda_max(M) < 1``; a 6-node Gauss-Hermite rule gives it exactly.

    Returns floats ``(C, B_bar)``: ``C = inf`` once ``2 lambda_max(M) >= 1`` (the averaged error is then
    not O(1/L)), ``B_bar = nan`` once ``6 lambda_max(M) >= 1``. For d = 1, ``U = u``, ``V = cov = 1``,
    "output": ``C = (1 - 2u^2)^{-1/2} + u^2 (1 - 2u^2)^{-3/2}``.
    """
    check_choice("kind", kind, ERROR_KINDS)
    U, V, cov, _ = _gaussian_args(U, V, cov, need_queries=False)
    if query_cov is None:
        S = torch.eye(cov.shape[0], dtype=cov.dtype, device=cov.device)
    else:
        query_cov = as_tensor_arg("query_cov", query_cov)
        check_matrix("query_cov", query_cov, *cov.shape)
        check_psd("query_cov", query_cov)
        S = gaussian_range_factor(query_cov)  # (D, r), S S^T = query_cov
    M = S.mT @ U.mT @ cov @ U @ S
    derivatives = _derivatives(kind, V, cov)
    terms = []  # (average of the A-term, average of the j-th B-term), or None when infinite
    for j in range(4):
        K = torch.eye(M.shape[0], dtype=M.dtype, device=M.device) - 2 * j * M
        if float(torch.linalg.eigvalsh(K).min()) <= 1e-12:  # at or beyond the threshold (rounding)
            terms.append(None)
            continue
        qc = S @ torch.linalg.inv(K) @ S.mT
        nodes, w = gauss_hermite_rule(torch.zeros_like(cov[0]), 0.5 * (qc + qc.mT), 6)
        A1, B = _expansion_terms(nodes, U, cov, kind, derivatives)
        terms.append([float(torch.linalg.det(K)) ** -0.5 * float(w @ x) for x in (A1, B[:, j])])
    C = math.inf if terms[1] is None else terms[1][0]
    return C, (math.nan if None in terms else sum(t[1] for t in terms))


def ess_ratio_expansion(queries, U, cov):
    """``E[ESS] / L = e^{-s} + beta / L + O(L^-2)`` for softmax weights over Gaussian tokens.

    ``s = a^T cov a``, ``a = U z``; ``beta = e^{3s} - 2 e^s + 1`` (second-order delta method on
    ``(mean w)^2 / mean w^2`` for log-normal weights). queries (Q, D) -> ``(e^{-s}, beta)``, each (Q,);
    overflow beyond the dtype's range as :func:`fixed_query_mse_expansion`.
    """
    U, _, cov, queries = _gaussian_args(U, U, cov, queries)
    a = queries @ U.mT
    s = ((a @ cov) * a).sum(-1)
    return torch.exp(-s), torch.exp(3 * s) - 2 * torch.exp(s) + 1


def heuristic_rate_exponent(u):
    """Asymptotic exponent of the query-averaged error in the scalar model (d = 1, ``U = u``).

    ``-1`` for ``u^2 < 1/2`` (finite constant); otherwise ``-1 / (2 u^2)``: cutting the query at
    ``|z| = sqrt(ln L) / u``, where the ESS ``L e^{-u^2 z^2}`` reaches one, balances ``e^{(u^2 - 1/2) z^2}
    / L`` against the Gaussian tail ``e^{-z^2/2}`` (up to powers of ``ln L``).
    """
    u = as_real_array("u", u)
    return np.where(u**2 < 0.5, -1.0, -1.0 / (2 * np.maximum(u, 1e-300) ** 2))


# ---------------------------------------------------------------------------------------------------
# The query-averaged rate of the scalar model (Proposition 3.1 with d = 1)
# ---------------------------------------------------------------------------------------------------
def _rates_arguments(u_values, L_values, n_prompts, *, generator, nodes=(24,)):
    check_generator(generator, required=True)
    check_positive_int("n_prompts", n_prompts, minimum=2)
    u = as_real_array("u_values", u_values)
    if u.ndim != 1 or u.size == 0:
        raise ValueError(
            f"u_values must be a non-empty 1-D sequence of scales, got shape {u.shape}"
        )
    if not isinstance(L_values, (list, tuple, range, np.ndarray, torch.Tensor)):
        raise TypeError(
            f"L_values must be a sequence of prompt lengths, got {type(L_values).__name__}"
        )
    if not isinstance(nodes, (list, tuple)):
        raise TypeError(f"nodes must be a tuple of even rule sizes, got {type(nodes).__name__}")
    if len(L_values) < 3:
        raise ValueError(f"L_values must hold at least 3 prompt lengths, got {list(L_values)}")
    for i, L in enumerate(L_values):
        check_positive_int(f"L_values[{i}]", L)
    if not nodes:
        raise ValueError("nodes must hold at least one rule size, got an empty sequence")
    for i, n in enumerate(nodes):
        check_positive_int(f"nodes[{i}]", n, minimum=2)
        if n % 2:
            raise ValueError(f"nodes[{i}] must be even (the rule is folded onto z > 0), got {n}")
    n_bytes = 8 * u.size * n_prompts * sum(nodes)  # the queries, float64
    check_memory(f"n_prompts = {n_prompts}, nodes = {nodes}", n_bytes, what="the queries")
    check_draws(f"n_prompts = {n_prompts}", u.size * n_prompts * float(sum(L_values)))


@validated_by(_rates_arguments)
def query_averaged_rates(u_values, L_values, n_prompts, *, generator, nodes=(24,)):
    """Query-averaged output error of the scalar Gaussian model at several scales ``u`` and prompt
    lengths ``L``, and its rate in ``L`` (Proposition 3.1 with d = 1).

    Tokens and queries are N(0, 1), ``V = 1`` and ``U = u``, so ``T[mu](z) = u z`` and a prompt's error
    is ``E_z |T[mu_hat_L](z) - u z|^2``, ``z ~ N(0, 1)``. The query average is a Gauss-Hermite rule
    folded onto ``z > 0`` (the expected error is even in ``z``); the prompts are Monte Carlo, fresh for
    every ``u`` and ``L`` (estimates at different ``u`` or ``L`` are independent). Every prompt is
    evaluated with each rule of ``nodes`` (the same prompts: a coarser second rule measures the
    quadrature error of the first). The fitted slope over ``L`` is about -1 while the averaged constant
    ``C(u)`` is finite (``u^2 < 1/2``) and rises above -1 as ``u`` grows: the ``L^(-c_2 / sigma^2)`` of
    Proposition 3.1.

    Parameters
    ----------
    u_values : sequence of n_u finite reals, the scales of U
    L_values : sequence of n_L >= 3 positive ints, the prompt lengths
    n_prompts : int >= 2, prompts per scale and length
    generator : torch.Generator (float64 draws on its device)
    nodes : sequence of even ints >= 2, the sizes of the Gauss-Hermite rules (default: one rule of 24)

    Returns
    -------
    errors : Tensor, shape (n_rules, n_L, n_prompts, n_u), float64
        per-prompt query-averaged squared errors, one block per rule of ``nodes``
    fits : list of n_u PowerLawFit
        ``fit_power_law`` of the mean of ``errors[0]`` over the prompts against ``L_values``, weighted
        by its standard error (softlin.montecarlo)

    Raises
    ------
    TypeError, ValueError
        a missing generator, fewer than 3 lengths, a non-positive length, fewer than 2 prompts, an odd
        or empty rule size, non-finite scales.
    """
    from .measures import GaussianMeasure  # imported here: this is the module's only user of these
    from .montecarlo import fit_power_law, mean_and_stderr

    f64 = dict(dtype=torch.float64, device=generator.device)
    one = torch.ones(1, 1, **f64)
    rules = []  # (nodes z > 0, weights), each (n / 2,)
    for n in nodes:
        z, w = gauss_hermite_rule(torch.zeros(1, **f64), one, n)
        rules.append((z[z[:, 0] > 0, 0], 2 * w[z[:, 0] > 0]))
    u = torch.as_tensor(u_values, **f64)  # (n_u,)
    # U = 1 at the query u z gives the scores and the limit of U = u at z; one block of prompts per u
    queries = (u[:, None] * torch.cat([z for z, _ in rules])).repeat_interleave(n_prompts, 0)
    tokens, sizes = GaussianMeasure(torch.zeros(1, **f64), one), [len(w) for _, w in rules]
    errors = []
    for L in L_values:
        err = sample_errors(
            tokens, queries[..., None], one, one, L, len(queries), generator=generator
        ).output  # (n_u * n_prompts, all nodes)
        err = err.reshape(len(u), n_prompts, -1).split(sizes, -1)
        errors.append(torch.stack([(e @ w).T for e, (_, w) in zip(err, rules)]))  # (rules, P, n_u)
    errors = torch.stack(errors, 1)  # (n_rules, n_L, n_prompts, n_u)
    est = mean_and_stderr(errors[0].cpu(), dim=1)  # (n_L, n_u) each
    return errors, [fit_power_law(L_values, m, s) for m, s in zip(est.mean.T, est.stderr.T)]
