"""Concentration of finite-prompt attention around its infinite-prompt limit (paper Section 3).

A prompt of L i.i.d. tokens from ``mu`` gives the empirical measure ``mu_hat_L``; softmax attention is
``T[mu_hat_L](z) = V m_hat(z)`` where ``m_hat(z) = sum_i p_i z_i``, ``p_i ∝ exp(z_i^T U z)``, is the
softmax-weighted (tilted) mean of the tokens. Its limit is ``T[mu](z) = V m(z)`` with ``m(z)`` the mean
of the tilted law ``mu^(Uz)``. This module estimates, by Monte Carlo over many prompts and many queries
at once,

* the output error ``|T[mu_hat_L](z) - T[mu](z)|^2`` (Proposition 3.1),
* the errors of the Jacobians of ``T`` with respect to ``V`` and ``U`` (Proposition 3.4), computed from
  the analytic finite-prompt Jacobians: the softmax-weighted mean (for ``V``) and the softmax-weighted
  covariance (for ``U``),
* the effective sample size ``(sum_i p_i)^2 / sum_i p_i^2`` of the softmax weights,

for a fixed query or averaged over a query law ``nu`` (random queries, or Gauss-Hermite nodes that
integrate the query exactly). Tokens are drawn and consumed chunk by chunk, so a prompt of length L costs
memory proportional to the chunk, not to L. It also holds the Gaussian closed forms these estimates are
compared with (delta-method constants and their first finite-L corrections) and log-log rate fits.

Norm conventions. The Jacobian errors are squared Frobenius norms of the full Jacobian tensors:
``dT_k/dV_jl = delta_kj m_l`` gives ``|J_V - J_V^inf|^2 = D_out |m_hat - m|^2`` and
``dT_k/dU_ab = (V C)_ka z_b`` gives ``|J_U - J_U^inf|^2 = |V (C_hat - C)|_F^2 |z|^2``, with ``C`` the
(tilted) covariance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from ._checks import as_tensor_arg, check_generator, check_matrix, check_positive_int, check_psd
from .attention import softmax_weights
from .measures import GaussianMeasure, TokenMeasure

__all__ = [
    "MonteCarloEstimate",
    "PromptErrors",
    "PowerLawFit",
    "effective_sample_size",
    "finite_prompt_jacobians",
    "attention_limit_jacobians",
    "sample_prompt_errors",
    "sample_query_averaged_errors",
    "error_curve",
    "gauss_hermite_queries",
    "scalar_rate_sweep",
    "fit_power_law",
    "fit_ratio_power_law",
    "fixed_query_mse_expansion",
    "fixed_query_jacobian_constants",
    "ess_ratio_expansion",
    "query_averaged_mse_expansion",
    "query_averaged_jacobian_constants",
    "heuristic_rate_exponent",
    "plot_query_integrand",
]

KINDS = ("output", "grad_V", "grad_U", "ess")

#: Target number of (prompt, query, token) score entries held in memory per streamed chunk.
CHUNK_ELEMENTS = 2**20


# ---------------------------------------------------------------------------------------------------
# Containers
# ---------------------------------------------------------------------------------------------------
class MonteCarloEstimate(NamedTuple):
    """A Monte Carlo mean with its standard error (``stderr = std / sqrt(n)`` over ``n`` i.i.d. prompts)."""

    mean: object
    stderr: object
    n: object


@dataclass
class PromptErrors:
    """Squared errors of ``n_prompts`` independent prompts of length ``L`` at ``Q`` queries.

    Attributes
    ----------
    output, grad_V, grad_U, ess : Tensor, shape (n_prompts, Q)
        ``|T[mu_hat_L](z) - T[mu](z)|^2``, the squared Frobenius errors of the V- and U-Jacobians
        and the effective sample size of the softmax weights (``None`` when not computed).
    L : int
    """

    output: torch.Tensor
    grad_V: torch.Tensor | None
    grad_U: torch.Tensor | None
    ess: torch.Tensor | None
    L: int

    def _values(self, kind):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        vals = getattr(self, kind)
        if vals is None:
            flag = "ess" if kind == "ess" else "jacobians"
            raise ValueError(f"{kind} was not computed: call the sampler with {flag}=True")
        return vals

    def estimate(self, kind: str = "output", query_weights=None) -> MonteCarloEstimate:
        """Query-averaged mean over prompts, with its standard error.

        Each prompt's errors are first averaged over the queries (``query_weights``, shape (Q,),
        non-negative and summing to one, e.g. Gauss-Hermite weights; default uniform), which gives one
        i.i.d. value per prompt; the mean and standard error are taken over prompts.
        """
        vals = self._values(kind)
        if query_weights is None:
            per_prompt = vals.mean(-1)
        else:
            w = as_tensor_arg("query_weights", query_weights)
            if w.shape != (vals.shape[-1],):
                raise ValueError(
                    f"query_weights must have shape (Q,) = ({vals.shape[-1]},), got {tuple(w.shape)}"
                )
            if bool((w < 0).any()) or abs(float(w.sum()) - 1.0) > 1e-9:
                raise ValueError(
                    f"query_weights must be non-negative and sum to 1, got sum {float(w.sum()):.12g}"
                )
            per_prompt = vals @ w.to(vals.dtype)
        n = per_prompt.shape[0]
        se = float(per_prompt.std() / math.sqrt(n)) if n > 1 else float("nan")
        return MonteCarloEstimate(float(per_prompt.mean()), se, n)

    def estimate_per_query(self, kind: str = "output") -> MonteCarloEstimate:
        """Mean over prompts for each query separately: ``mean`` and ``stderr`` of shape (Q,)."""
        vals = self._values(kind)
        n = vals.shape[0]
        se = vals.std(0) / math.sqrt(n) if n > 1 else torch.full_like(vals[0], float("nan"))
        return MonteCarloEstimate(vals.mean(0), se, n)


class PowerLawFit(NamedTuple):
    """Least-squares fit of ``log value = log prefactor + slope * log L``.

    ``slope_stderr`` comes from the given standard errors of the values (weighted least squares with
    known variances), or from the residuals when none were given; ``chi2_dof`` is the reduced
    chi-square (about 1 when the power law fits within the Monte Carlo errors; NaN without errors).
    """

    slope: float
    slope_stderr: float
    prefactor: float
    chi2_dof: float

    def predict(self, L):
        return self.prefactor * np.asarray(L, dtype=float) ** self.slope


# ---------------------------------------------------------------------------------------------------
# Finite-prompt quantities
# ---------------------------------------------------------------------------------------------------
def effective_sample_size(weights, dim: int = -1) -> torch.Tensor:
    """Effective sample size ``(sum_i w_i)^2 / sum_i w_i^2`` of non-negative weights along ``dim``.

    Between 1 (all mass on one token) and L (uniform weights). For softmax weights ``p_i ∝ exp(a^T z_i)``
    over Gaussian tokens ``N(m, Gamma)``, ``ESS / L -> exp(-a^T Gamma a)`` as L grows.

    Parameters
    ----------
    weights : Tensor, shape (..., L, ...), non-negative, not all zero along ``dim``.

    Returns
    -------
    Tensor, the shape of ``weights`` without ``dim``.
    """
    w = as_tensor_arg("weights", weights, min_dim=1)
    if bool((w < 0).any()):
        raise ValueError(f"weights must be non-negative, got minimum {float(w.min()):.3g}")
    total = w.sum(dim)
    if bool((total <= 0).any()):
        raise ValueError("weights must not be all zero along dim (the effective sample size is undefined)")
    return total**2 / (w * w).sum(dim)


def _check_UV(U, V, D):
    U, V = as_tensor_arg("U", U), as_tensor_arg("V", V)
    check_matrix("U", U, D, D)
    check_matrix("V", V, None, D)
    return U, V


def finite_prompt_jacobians(tokens, queries, U, V):
    """Analytic Jacobians of softmax attention ``T[mu_hat_L](z)`` with respect to ``V`` and ``U``.

    With ``p_i ∝ exp(z_i^T U z)``, ``m = sum_i p_i z_i`` and ``C = sum_i p_i (z_i - m)(z_i - m)^T``
    (the softmax-weighted mean and covariance of the tokens):

    ``dT_k / dV_jl = delta_kj m_l``   and   ``dT_k / dU_ab = (V C)_ka z_b``.

    Parameters
    ----------
    tokens : Tensor, shape (..., L, D)
    queries : Tensor, shape (..., Q, D)
    U : Tensor, shape (D, D)
    V : Tensor, shape (D_out, D)

    Returns
    -------
    jac_V : Tensor, shape (..., Q, D_out, D_out, D)   entry [k, j, l] = dT_k / dV_jl
    jac_U : Tensor, shape (..., Q, D_out, D, D)       entry [k, a, b] = dT_k / dU_ab

    Raises
    ------
    TypeError, ValueError
        As :func:`softlin.softmax_attention`.
    """
    p = softmax_weights(tokens, queries, U)  # validates; (..., Q, L)
    U, V = _check_UV(U, V, tokens.shape[-1])
    m = p @ tokens  # (..., Q, D)
    centred = tokens.unsqueeze(-3) - m.unsqueeze(-2)  # (..., Q, L, D)
    C = torch.einsum("...ql,...qld,...qle->...qde", p, centred, centred)  # (..., Q, D, D)
    return _jacobians_from_moments(m, C, queries, V)


def _jacobians_from_moments(m, C, queries, V):
    D_out = V.shape[0]
    eye = torch.eye(D_out, dtype=m.dtype, device=m.device)
    jac_V = eye[:, :, None] * m[..., None, None, :]  # (..., Q, D_out, D_out, D)
    jac_U = (V @ C).unsqueeze(-1) * queries[..., None, None, :]  # (..., Q, D_out, D, D)
    return jac_V, jac_U


def _tilted_moments(measure, a):
    """Mean and covariance of the tilted law mu^(a) for a of shape (..., D)."""
    if isinstance(measure, GaussianMeasure):  # closed form (Lemma 2.1): N(m + Gamma a, Gamma)
        mean = measure.mean + a @ measure.cov.mT
        return mean, measure.cov.expand(*a.shape, a.shape[-1])
    return measure.tilted_mean(a), measure.tilted_covariance(a)


def attention_limit_jacobians(measure, queries, U, V):
    """Jacobians of the infinite-prompt map ``T[mu](z) = V m(Uz)`` with respect to ``V`` and ``U``.

    The same formulas as :func:`finite_prompt_jacobians` with the tilted mean ``m`` and tilted covariance
    ``C`` of ``mu^(Uz)``: for Gaussian ``mu = N(m0, Gamma)``, ``m = m0 + Gamma U z`` and ``C = Gamma``.

    Parameters
    ----------
    measure : TokenMeasure with a finite MGF
    queries : Tensor, shape (..., Q, D)
    U : Tensor, shape (D, D);  V : Tensor, shape (D_out, D)

    Returns
    -------
    jac_V : (..., Q, D_out, D_out, D);  jac_U : (..., Q, D_out, D, D)
    """
    _check_measure(measure)
    queries = as_tensor_arg("queries", queries, min_dim=1)
    if queries.shape[-1] != measure.dim:
        raise ValueError(
            f"queries must have last dimension D = {measure.dim}, got shape {tuple(queries.shape)}"
        )
    U, V = _check_UV(U, V, measure.dim)
    m, C = _tilted_moments(measure, queries @ U.mT)
    return _jacobians_from_moments(m, C, queries, V)


# ---------------------------------------------------------------------------------------------------
# Streaming Monte Carlo over prompts
# ---------------------------------------------------------------------------------------------------
def _check_measure(measure):
    if not isinstance(measure, TokenMeasure):
        raise TypeError(f"measure must be a softlin TokenMeasure, got {type(measure).__name__}")
    if not measure.has_finite_mgf:
        raise ValueError(
            f"{type(measure).__name__} has no finite MGF: the infinite-prompt limit does not exist"
        )


class _RunningSums:
    """Max-shifted running sums over a stream of token chunks, for every (prompt, query) pair:
    ``s0 = sum e_i``, ``s1 = sum e_i z_i``, ``s2 = sum e_i z_i z_i^T`` and ``s00 = sum e_i^2``, with
    ``e_i = exp(score_i - running max)``. The first three come from one batched product of the weights
    with the augmented tokens ``[1, z_i, vec(z_i z_i^T)]``."""

    def __init__(self, shape, D, dtype, device, second, ess):
        kw = dict(dtype=dtype, device=device)
        self.D, self.second = D, second
        self.m = torch.full(shape, -math.inf, **kw)
        self.sums = torch.zeros(*shape, 1 + D + (D * D if second else 0), **kw)  # [s0, s1, vec s2]
        self.s00 = torch.zeros(shape, **kw) if ess else None

    def update(self, a, x):
        # a: (P or 1, Q, D) tilt directions; x: (P, c, D) a chunk of tokens of every prompt
        if a.shape[0] == 1:  # queries shared by all prompts: one (Q, D) x (D, P c) product
            sc = torch.einsum("qd,pcd->pqc", a[0], x)  # (P, Q, c)
        else:
            sc = torch.einsum("pqd,pcd->pqc", a, x)
        m_new = torch.maximum(self.m, sc.amax(-1))
        r = torch.exp(self.m - m_new)  # 0 on the first chunk
        e = sc.sub_(m_new.unsqueeze(-1)).exp_()  # (P, Q, c), in place
        parts = [torch.ones_like(x[..., :1]), x]
        if self.second:
            parts.append((x.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2))
        aug = torch.cat(parts, dim=-1)  # (P, c, 1 + D [+ D^2])
        self.sums = self.sums * r.unsqueeze(-1) + torch.bmm(e, aug)
        if self.s00 is not None:
            self.s00 = self.s00 * (r * r) + torch.linalg.vecdot(e, e)
        self.m = m_new

    @property
    def s0(self):
        return self.sums[..., 0]

    @property
    def s1(self):
        return self.sums[..., 1 : 1 + self.D]

    @property
    def s2(self):
        return self.sums[..., 1 + self.D :].unflatten(-1, (self.D, self.D)) if self.second else None


def _resolve_chunk(chunk_size, L, P, Q):
    if chunk_size is not None:
        check_positive_int("chunk_size", chunk_size)
        return min(chunk_size, L)
    return max(1, min(L, CHUNK_ELEMENTS // max(1, P * Q)))


def sample_prompt_errors(measure, queries, U, V, L, n_prompts, *, generator, jacobians=True, ess=True,
                         chunk_size=None):
    """Monte Carlo errors of finite-prompt attention, for ``n_prompts`` independent prompts of length L.

    Each prompt is L i.i.d. tokens from ``measure``, drawn from ``generator`` chunk by chunk and
    consumed by an online (max-shifted) softmax, so memory is O(n_prompts * Q * chunk), not O(L).

    Parameters
    ----------
    measure : TokenMeasure
        The token law ``mu`` (finite MGF); the limit ``T[mu]`` uses its tilted mean and covariance
        (closed form for :class:`~softlin.GaussianMeasure`, autograd otherwise).
    queries : Tensor, shape (Q, D) or (n_prompts, Q, D)
        Queries shared by every prompt (fixed queries, quadrature nodes) or one set per prompt.
    U : Tensor, shape (D, D);  V : Tensor, shape (D_out, D)
    L : int, prompt length (>= 1)
    n_prompts : int (>= 1)
    generator : torch.Generator
    jacobians : bool
        Also compute the V- and U-Jacobian errors (needs the weighted second moments).
    ess : bool
        Also compute the effective sample size of the softmax weights.
    chunk_size : int, optional
        Tokens per streamed chunk; default: as many as keep ``n_prompts * Q * chunk`` near
        ``CHUNK_ELEMENTS``. Tokens are drawn as ``measure.sample(n_prompts * chunk)`` per chunk, so the
        draws (not their law) depend on the chunk size.

    Returns
    -------
    PromptErrors
        ``output``, ``grad_V``, ``grad_U`` (squared errors, see the module docstring for the norms) and
        ``ess``, each of shape (n_prompts, Q) (``None`` for what was not asked for).

    Raises
    ------
    TypeError, ValueError
        A measure without finite MGF, wrong shapes or dtypes, non-positive L / n_prompts / chunk_size,
        a missing or wrong generator.
    """
    _check_measure(measure)
    check_positive_int("L", L)
    check_positive_int("n_prompts", n_prompts)
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator (explicit randomness), got {type(generator).__name__}"
        )
    queries = as_tensor_arg("queries", queries, min_dim=2)
    D = measure.dim
    bad_batch = queries.dim() == 3 and queries.shape[0] != n_prompts
    if queries.dim() not in (2, 3) or queries.shape[-1] != D or bad_batch:
        raise ValueError(
            f"queries must have shape (Q, {D}) or (n_prompts, Q, {D}) = ({n_prompts}, Q, {D}), "
            f"got {tuple(queries.shape)}"
        )
    U, V = _check_UV(U, V, D)
    for name, t in (("queries", queries), ("U", U), ("V", V)):
        if t.dtype != measure.dtype:
            raise ValueError(f"{name} has dtype {t.dtype} but the measure has dtype {measure.dtype}")
        if t.device != measure.device:
            raise ValueError(
                f"{name} is on {t.device} but the measure is on {measure.device}; use one device"
            )
    q3 = queries if queries.dim() == 3 else queries.unsqueeze(0)  # (P or 1, Q, D)
    Q = q3.shape[1]
    a = q3 @ U.mT  # (P or 1, Q, D): tilt directions a = U z
    chunk = _resolve_chunk(chunk_size, L, n_prompts, Q)
    acc = _RunningSums((n_prompts, Q), D, measure.dtype, measure.device, jacobians, ess)
    for start in range(0, L, chunk):
        c = min(chunk, L - start)
        x = measure.sample(n_prompts * c, generator=generator).reshape(n_prompts, c, D)
        acc.update(a, x)
    return _errors_from_sums(acc, measure, a, q3, V, L, jacobians)


def _errors_from_sums(acc, measure, a, q3, V, L, jacobians):
    m_hat = acc.s1 / acc.s0.unsqueeze(-1)  # (P, Q, D) softmax-weighted mean
    m_lim, C_lim = _tilted_moments(measure, a)  # (P or 1, Q, D), (P or 1, Q, D, D)
    dm = m_hat - m_lim
    output = ((dm @ V.mT) ** 2).sum(-1)
    ess = None if acc.s00 is None else acc.s0**2 / acc.s00
    grad_V = grad_U = None
    if jacobians:
        C_hat = acc.s2 / acc.s0[..., None, None] - m_hat.unsqueeze(-1) * m_hat.unsqueeze(-2)
        grad_V = V.shape[0] * (dm**2).sum(-1)
        grad_U = ((V @ (C_hat - C_lim)) ** 2).sum((-1, -2)) * (q3**2).sum(-1)
    return PromptErrors(output, grad_V, grad_U, ess, L)


def sample_query_averaged_errors(measure, query_measure, U, V, L, n_prompts, n_queries, *, generator,
                                 jacobians=True, chunk_size=None):
    """As :func:`sample_prompt_errors`, with ``n_queries`` fresh queries per prompt from ``query_measure``.

    ``PromptErrors.estimate(kind)`` then estimates the query-averaged error
    ``E |T[mu_hat_L] - T[mu]|^2_{L^2(nu)}`` of Propositions 3.1 and 3.4.
    """
    if not isinstance(query_measure, TokenMeasure):
        raise TypeError(f"query_measure must be a softlin TokenMeasure, got {type(query_measure).__name__}")
    if query_measure.dim != measure.dim:
        raise ValueError(f"query_measure must have dimension D = {measure.dim}, got {query_measure.dim}")
    check_positive_int("n_queries", n_queries)
    check_positive_int("n_prompts", n_prompts)
    check_generator(generator)
    queries = query_measure.sample(n_prompts * n_queries, generator=generator)
    queries = queries.reshape(n_prompts, n_queries, -1)  # (n_prompts, n_queries, D)
    return sample_prompt_errors(measure, queries, U, V, L, n_prompts, generator=generator,
                                jacobians=jacobians, chunk_size=chunk_size)


def error_curve(measure, queries, U, V, L_values, n_prompts, *, generator, query_weights=None,
                per_query=False, query_measure=None, jacobians=True, chunk_size=None):
    """Monte Carlo error estimates over a list of prompt lengths (independent prompts for each L).

    Parameters
    ----------
    measure, U, V, generator, jacobians, chunk_size : as :func:`sample_prompt_errors`.
    queries : Tensor, shape (Q, D), or int
        Fixed queries / quadrature nodes; with ``query_measure`` given, the number of fresh queries per
        prompt instead.
    L_values : sequence of int
    n_prompts : int or sequence of int (one per L)
    query_weights : Tensor (Q,), optional
        Quadrature weights for the query average (ignored when ``per_query``).
    per_query : bool
        Return one estimate per query (arrays of shape (len(L_values), Q)) instead of the query average.
    query_measure : TokenMeasure, optional
        Draw ``queries`` fresh queries per prompt from this law (query-averaged errors).

    Returns
    -------
    dict
        ``"L"``: array of the L values; for each of ``"output"``, ``"grad_V"``, ``"grad_U"``, ``"ess"``
        (the two gradients only with ``jacobians``): a :class:`MonteCarloEstimate` of numpy arrays.
    """
    L_values = [int(L) for L in L_values]
    if not L_values:
        raise ValueError("L_values must hold at least one prompt length, got an empty sequence")
    counts = [n_prompts] * len(L_values) if isinstance(n_prompts, int) else list(n_prompts)
    if len(counts) != len(L_values):
        raise ValueError(f"n_prompts must be an int or one count per L ({len(L_values)}), got {len(counts)}")
    kinds = KINDS if jacobians else ("output", "ess")
    rows = {k: ([], []) for k in kinds}
    for L, n in zip(L_values, counts):
        if query_measure is not None:
            if not isinstance(queries, int):
                raise TypeError(
                    "with query_measure, queries must be the number of queries per prompt (an int)"
                )
            errs = sample_query_averaged_errors(measure, query_measure, U, V, L, n, queries,
                                                generator=generator, jacobians=jacobians,
                                                chunk_size=chunk_size)
        else:
            errs = sample_prompt_errors(measure, queries, U, V, L, n, generator=generator,
                                        jacobians=jacobians, chunk_size=chunk_size)
        for k in kinds:
            est = errs.estimate_per_query(k) if per_query else errs.estimate(k, query_weights)
            rows[k][0].append(_to_numpy(est.mean))
            rows[k][1].append(_to_numpy(est.stderr))
    out = {"L": np.asarray(L_values)}
    for k in kinds:
        out[k] = MonteCarloEstimate(np.stack(rows[k][0]), np.stack(rows[k][1]), np.asarray(counts))
    return out


def _to_numpy(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy().astype(float)
    return np.asarray(x, dtype=float)


def gauss_hermite_queries(n_nodes: int, dim: int = 1, *, dtype=torch.float64, device=None):
    """Gauss-Hermite nodes and weights for the standard Gaussian query law ``nu = N(0, I_dim)``.

    ``sum_j weights[j] f(nodes[j])`` integrates ``E_{z~nu} f(z)`` exactly for polynomials of degree up
    to ``2 n_nodes - 1`` in each coordinate (tensor-product rule; ``numpy.polynomial.hermite.hermgauss``
    rescaled from the weight ``exp(-x^2)`` to ``N(0, 1)``).

    Returns
    -------
    nodes : Tensor, shape (n_nodes**dim, dim);  weights : Tensor, shape (n_nodes**dim,), summing to one.
    """
    check_positive_int("n_nodes", n_nodes)
    check_positive_int("dim", dim)
    x, w = np.polynomial.hermite.hermgauss(n_nodes)
    z1, w1 = x * math.sqrt(2.0), w / math.sqrt(math.pi)
    grids = np.meshgrid(*([z1] * dim), indexing="ij")
    wgrids = np.meshgrid(*([w1] * dim), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids], axis=-1)
    weights = np.prod(np.stack([g.ravel() for g in wgrids], axis=-1), axis=-1)
    return (torch.tensor(nodes, dtype=dtype, device=device),
            torch.tensor(weights / weights.sum(), dtype=dtype, device=device))


def scalar_rate_sweep(u_values, L_values, n_prompts, *, n_nodes, generator, chunk_size=None):
    """Query-averaged output error in the scalar setting of the rate experiment, for many scales u at once.

    Setting: d = 1, tokens and queries ``N(0, 1)``, ``V = 1``, ``U = u``; ``T[mu](z) = u z``. The
    error ``E_prompt E_{z~N(0,1)} (T[mu_hat_L](z) - u z)^2`` is estimated with the query integrated by
    Gauss-Hermite quadrature (``n_nodes`` nodes) and the prompt by Monte Carlo. Since only ``a = u z``
    enters, all scales share the same tokens (common random numbers, which also makes differences
    between scales more precise); prompts are independent across L.

    Parameters
    ----------
    u_values : sequence of float (>= 0)
    L_values : sequence of int
    n_prompts : int or sequence of int (one per L)
    n_nodes : int, Gauss-Hermite nodes for the query
    generator : torch.Generator

    Returns
    -------
    dict with ``"u"`` (nU,), ``"L"`` (nL,), ``"mse"`` and ``"stderr"`` (nU, nL) numpy arrays, and
    ``"cov"`` (nL, nU, nU), the covariance of the estimates across scales at each L (they share tokens).
    """
    u = np.asarray(u_values, dtype=float)
    if u.ndim != 1 or u.size == 0 or not np.all(np.isfinite(u)) or np.any(u < 0):
        raise ValueError(f"u_values must be a non-empty list of finite non-negative scales, got {u_values!r}")
    check_generator(generator)
    dev = generator.device if generator is not None else torch.device("cpu")
    nodes, weights = gauss_hermite_queries(n_nodes, device=dev)
    # Queries u_k z_j with U = 1 give exactly the scores and limits of U = u_k at query z_j.
    queries = (torch.tensor(u, device=dev)[:, None] * nodes[None, :, 0]).reshape(-1, 1)  # (nU * n_nodes, 1)
    one = torch.ones(1, 1, dtype=torch.float64, device=dev)
    mu = GaussianMeasure(torch.zeros(1, dtype=torch.float64, device=dev), one)
    counts = [n_prompts] * len(L_values) if isinstance(n_prompts, int) else list(n_prompts)
    if len(counts) != len(L_values):
        raise ValueError(f"n_prompts must be an int or one count per L ({len(L_values)}), got {len(counts)}")
    mse = np.empty((u.size, len(L_values)))
    se = np.empty_like(mse)
    cov = np.empty((len(L_values), u.size, u.size))
    for j, (L, n) in enumerate(zip(L_values, counts)):
        errs = sample_prompt_errors(mu, queries, one, one, int(L), n, generator=generator, jacobians=False,
                                    ess=False, chunk_size=chunk_size)
        per_prompt = errs.output.reshape(n, u.size, -1) @ weights  # (P, nU): exact query average
        mse[:, j] = per_prompt.mean(0).cpu().numpy()
        se[:, j] = (per_prompt.std(0) / math.sqrt(n)).cpu().numpy()
        cov[j] = (torch.atleast_2d(torch.cov(per_prompt.T)) / n).cpu().numpy()
    return {"u": u, "L": np.asarray(L_values), "mse": mse, "stderr": se, "cov": cov}


# ---------------------------------------------------------------------------------------------------
# Rate fits
# ---------------------------------------------------------------------------------------------------
def fit_power_law(L_values, values, stderr=None) -> PowerLawFit:
    """Fit ``values ≈ prefactor * L**slope`` by least squares in log-log coordinates.

    With ``stderr`` (standard errors of ``values``), the fit is weighted by the delta-method variances
    ``(stderr / values)^2`` of ``log values`` and the slope's standard error assumes those variances
    are exact; ``chi2_dof`` tells whether the power law fits within them. Without, ordinary least
    squares and the residual-based standard error.

    Parameters
    ----------
    L_values, values, stderr : 1-D arrays of equal length (at least 3); values positive.

    Returns
    -------
    PowerLawFit
    """
    x = np.log(np.asarray(L_values, dtype=float))
    v = np.asarray(values, dtype=float)
    if x.ndim != 1 or v.shape != x.shape or x.size < 3:
        raise ValueError(f"L_values and values must be 1-D of equal length >= 3, got {x.shape} and {v.shape}")
    if not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise ValueError("values must be finite and positive to be fitted in log-log coordinates")
    y = np.log(v)
    if stderr is None:
        w = np.ones_like(y)
    else:
        s = np.asarray(stderr, dtype=float)
        if s.shape != v.shape or np.any(~np.isfinite(s)) or np.any(s <= 0):
            raise ValueError(f"stderr must be positive and finite with the shape of values {v.shape}")
        w = (v / s) ** 2
    X = np.stack([np.ones_like(x), x], axis=1)
    A = X.T @ (w[:, None] * X)
    coef = np.linalg.solve(A, X.T @ (w * y))
    resid = y - X @ coef
    dof = x.size - 2
    chi2 = float(np.sum(w * resid**2))
    if stderr is None:
        cov = np.linalg.inv(A) * chi2 / dof
        chi2_dof = float("nan")
    else:
        cov = np.linalg.inv(A)
        chi2_dof = chi2 / dof
    return PowerLawFit(float(coef[1]), float(math.sqrt(cov[1, 1])), float(math.exp(coef[0])), chi2_dof)


def fit_ratio_power_law(sweep: dict, i: int, j: int) -> PowerLawFit:
    """Fit the ratio ``mse[j](L) / mse[i](L)`` of two scales of a :func:`scalar_rate_sweep` as a power of L.

    Its slope is the difference of the two rate exponents. Both errors come from the same tokens, so the
    standard error of ``log(mse_j / mse_i)`` uses their covariance (paired errors), which is much
    smaller than the two separate standard errors combined.
    """
    for name, k in (("i", i), ("j", j)):
        if not (isinstance(k, (int, np.integer)) and 0 <= k < len(sweep["u"])):
            raise ValueError(f"{name} must be an index into sweep['u'] (0..{len(sweep['u']) - 1}), got {k!r}")
    m_i, m_j, C = sweep["mse"][i], sweep["mse"][j], sweep["cov"]
    var_log = C[:, i, i] / m_i**2 + C[:, j, j] / m_j**2 - 2 * C[:, i, j] / (m_i * m_j)
    ratio = m_j / m_i
    return fit_power_law(sweep["L"], ratio, ratio * np.sqrt(np.maximum(var_log, 1e-300)))


# ---------------------------------------------------------------------------------------------------
# Gaussian closed forms (delta method)
# ---------------------------------------------------------------------------------------------------
def _gaussian_args(queries, U, V, cov):
    queries = as_tensor_arg("queries", queries, min_dim=2)
    cov = as_tensor_arg("cov", cov)
    D = queries.shape[-1]
    check_matrix("cov", cov, D, D)
    check_psd("cov", cov)
    U, V = _check_UV(U, V, D)
    if queries.dim() != 2:
        raise ValueError(f"queries must have shape (Q, D), got {tuple(queries.shape)}")
    return queries, U, V, cov


def fixed_query_mse_expansion(queries, U, V, cov):
    """Delta-method expansion of the fixed-query output error for Gaussian tokens ``N(m, cov)``.

    ``E |T[mu_hat_L](z) - T[mu](z)|^2 = A / L + B / L^2 + O(L^-3)`` with ``a = U z``, ``s = a^T Gamma a``,
    ``t = tr(V Gamma V^T)``, ``b = |V Gamma a|^2``:

    ``A = e^s (t + b)``  (the constant of paper-notes section 3), and
    ``B = -2 e^{3s} (t + 4b) + 3 e^{2s} (t + 3b) - e^s (t + b)``.

    ``B`` comes from expanding ``1 / (1 + eps)^2`` around the normalised softmax denominator
    ``1 + eps``; it is negative for ``s > 0``, so ``L * error`` approaches ``A`` from below, slowly when
    ``s`` is large. Neither depends on the mean ``m``.

    Parameters
    ----------
    queries : Tensor, shape (Q, D);  U : (D, D);  V : (D_out, D);  cov : (D, D) symmetric PSD

    Returns
    -------
    A, B : Tensor, shape (Q,)
    """
    queries, U, V, cov = _gaussian_args(queries, U, V, cov)
    a = queries @ U.mT  # (Q, D)
    s = ((a @ cov) * a).sum(-1)
    t = torch.trace(V @ cov @ V.mT)
    b = ((a @ cov @ V.mT) ** 2).sum(-1)
    A = torch.exp(s) * (t + b)
    B = -2 * torch.exp(3 * s) * (t + 4 * b) + 3 * torch.exp(2 * s) * (t + 3 * b) - torch.exp(s) * (t + b)
    return A, B


def fixed_query_jacobian_constants(queries, U, V, cov):
    """Limits of ``L * E |J - J^inf|_F^2`` for the V- and U-Jacobians, Gaussian tokens ``N(m, cov)``.

    With ``a = U z``, ``s = a^T Gamma a``, ``c = Gamma a``, ``W = V^T V``:

    ``C_V = D_out e^s (tr Gamma + |c|^2)`` (the tilted-mean error, once per output row), and
    ``C_U = |z|^2 e^s [(tr Gamma + |c|^2)(tr(W Gamma) + c^T W c) + tr(Gamma W Gamma) + 2 c^T Gamma W c]``,
    the delta-method variance of the softmax-weighted covariance (a fourth moment of the tilted tokens).

    Returns
    -------
    C_V, C_U : Tensor, shape (Q,)
    """
    queries, U, V, cov = _gaussian_args(queries, U, V, cov)
    a = queries @ U.mT
    s = ((a @ cov) * a).sum(-1)
    c = a @ cov  # (Q, D) = (Gamma a)^T
    W = V.mT @ V
    cc = (c * c).sum(-1)
    C_V = V.shape[0] * torch.exp(s) * (torch.trace(cov) + cc)
    quad = ((torch.trace(cov) + cc) * (torch.trace(W @ cov) + ((c @ W) * c).sum(-1))
            + torch.trace(cov @ W @ cov) + 2 * ((c @ cov @ W) * c).sum(-1))
    C_U = (queries**2).sum(-1) * torch.exp(s) * quad
    return C_V, C_U


def ess_ratio_expansion(queries, U, cov):
    """``E[ESS / L] = exp(-s) + beta / L + O(L^-2)`` for softmax weights over Gaussian tokens.

    ``s = a^T Gamma a`` with ``a = U z``; ``beta = e^{3s} - 2 e^s + 1`` (delta method on
    ``(mean w)^2 / mean w^2`` with log-normal weights ``w``). Returns ``(exp(-s), beta)``, each (Q,).
    """
    queries = as_tensor_arg("queries", queries, min_dim=2)
    cov = as_tensor_arg("cov", cov)
    D = queries.shape[-1]
    check_matrix("cov", cov, D, D)
    U = as_tensor_arg("U", U)
    check_matrix("U", U, D, D)
    a = queries @ U.mT
    s = ((a @ cov) * a).sum(-1)
    return torch.exp(-s), torch.exp(3 * s) - 2 * torch.exp(s) + 1


def _query_quadratics(U, V, cov, query_cov):
    U, V = as_tensor_arg("U", U), as_tensor_arg("V", V)
    cov = as_tensor_arg("cov", cov)
    D = cov.shape[-1]
    check_matrix("cov", cov, D, D)
    check_psd("cov", cov)
    U, V = _check_UV(U, V, D)
    if query_cov is None:
        S = torch.eye(D, dtype=cov.dtype, device=cov.device)
    else:
        query_cov = as_tensor_arg("query_cov", query_cov)
        check_matrix("query_cov", query_cov, D, D)
        check_psd("query_cov", query_cov)
        evals, evecs = torch.linalg.eigh(query_cov)
        S = evecs * evals.clamp_min(0).sqrt()  # S S^T = query_cov; z = S g with g ~ N(0, I)
    M = S.mT @ U.mT @ cov @ U @ S  # s = a^T Gamma a = g^T M g
    return U, V, cov, S, M


def _gaussian_exp_quadratic(M, k):
    """det(I - 2kM)^{-1/2} and (I - 2kM)^{-1}, or (inf, None) when E exp(k g^T M g) diverges."""
    D = M.shape[0]
    A = torch.eye(D, dtype=M.dtype, device=M.device) - 2 * k * M
    evals = torch.linalg.eigvalsh(A)
    if float(evals.min()) <= 1e-12:  # at or beyond the threshold (to rounding): the integral diverges
        return math.inf, None
    return float(torch.prod(evals) ** -0.5), torch.linalg.inv(A)


def query_averaged_mse_expansion(U, V, cov, query_cov=None):
    """Query average over ``nu = N(0, query_cov)`` of :func:`fixed_query_mse_expansion`'s A and B.

    With ``z = S g``, ``g ~ N(0, I)``, ``M = S^T U^T Gamma U S`` and ``N = S^T U^T Gamma V^T V Gamma U S``,
    Gaussian integrals give ``E exp(k g^T M g) (t + j g^T N g) = det(I - 2kM)^{-1/2}
    (t + j tr(N (I - 2kM)^{-1}))``, finite iff ``2 k lambda_max(M) < 1``. For d = 1, ``U = u``,
    ``V = Gamma = 1``: ``C(u) = (1 - 2u^2)^{-1/2} + u^2 (1 - 2u^2)^{-3/2}`` for ``u^2 < 1/2``.

    Returns
    -------
    C, B_bar : float
        ``C = E_z A(z)`` (``inf`` when ``2 lambda_max(M) >= 1``: the averaged error is then not O(1/L))
        and ``B_bar = E_z B(z)`` (``nan`` when a term diverges, from ``6 lambda_max(M) >= 1``).
    """
    U, V, cov, S, M = _query_quadratics(U, V, cov, query_cov)
    N = S.mT @ U.mT @ cov @ V.mT @ V @ cov @ U @ S
    t = float(torch.trace(V @ cov @ V.mT))

    def term(k, j):
        det, inv = _gaussian_exp_quadratic(M, k)
        return math.inf if inv is None else det * (t + j * float(torch.trace(N @ inv)))

    C = term(1, 1)
    parts = [term(3, 4), term(2, 3), term(1, 1)]
    B_bar = math.nan if any(math.isinf(p) for p in parts) else -2 * parts[0] + 3 * parts[1] - parts[2]
    return C, B_bar


def query_averaged_jacobian_constants(U, V, cov, query_cov=None, n_nodes: int = 6):
    """Query averages over ``nu = N(0, query_cov)`` of :func:`fixed_query_jacobian_constants`.

    ``E_z[e^{s(z)} P(z)]`` with ``P`` a polynomial of degree <= 6 equals ``det(I - 2M)^{-1/2}`` times
    the mean of ``P`` under the Gaussian ``N(0, S (I - 2M)^{-1} S^T)``; that mean is computed exactly by
    a tensor Gauss-Hermite rule with ``n_nodes >= 4`` nodes per dimension. Returns ``(inf, inf)`` when
    ``2 lambda_max(M) >= 1``.
    """
    check_positive_int("n_nodes", n_nodes)
    if n_nodes < 4:
        raise ValueError(f"n_nodes must be >= 4 to integrate degree-6 polynomials exactly, got {n_nodes}")
    U, V, cov, S, M = _query_quadratics(U, V, cov, query_cov)
    det, inv = _gaussian_exp_quadratic(M, 1)
    if inv is None:
        return math.inf, math.inf
    D = cov.shape[0]
    g, w = gauss_hermite_queries(n_nodes, D, dtype=cov.dtype, device=cov.device)
    evals, evecs = torch.linalg.eigh(inv)
    R = evecs * evals.sqrt()
    z = (g @ R.mT) @ S.mT  # (n, D): samples of N(0, S inv S^T)
    C_V, C_U = fixed_query_jacobian_constants(z, U, V, cov)
    # fixed_query_* include the factor e^s; divide it out, the density change supplies det(...)
    s = (((z @ U.mT) @ cov) * (z @ U.mT)).sum(-1)
    return det * float((w * C_V * torch.exp(-s)).sum()), det * float((w * C_U * torch.exp(-s)).sum())


def heuristic_rate_exponent(u):
    """Asymptotic exponent of the query-averaged error in the scalar setting (``d = 1``, ``U = u``).

    ``-1`` when ``u^2 < 1/2`` (finite constant ``C(u)``); otherwise ``-1 / (2 u^2)``: truncating the
    query at ``|z| ≈ sqrt(ln L) / u``, where the effective sample size ``L e^{-u^2 z^2}`` reaches one,
    balances ``L^-1 e^{(u^2 - 1/2) z^2}`` against the Gaussian tail ``e^{-z^2/2}`` (up to powers of
    ``ln L``). This is the ``L^{-c / sigma^2}`` shape of Proposition 3.1.
    """
    u = np.asarray(u, dtype=float)
    return np.where(u**2 < 0.5, -1.0, -1.0 / (2 * np.maximum(u, 1e-300) ** 2))


# ---------------------------------------------------------------------------------------------------
# Explorer panel
# ---------------------------------------------------------------------------------------------------
def plot_query_integrand(ax, u: float = 1.0, L: int = 1024, *, n_prompts: int = 200, n_z: int = 33,
                         z_max: float = 5.0, seed: int = 0, legend: bool = True):
    """Draw where the query average of the error comes from (d = 1, ``mu = nu = N(0, 1)``, ``V = 1``).

    Plots, against the query ``z >= 0``, the integrand ``phi(z) L E(T[mu_hat_L](z) - u z)^2`` of
    ``L`` times the query-averaged error (Monte Carlo over ``n_prompts`` prompts), and the delta-method
    integrand ``phi(z) e^{u^2 z^2}(1 + u^2 z^2)``; a dotted line marks ``z* = sqrt(ln L) / u`` where the
    effective sample size ``L e^{-u^2 z^2}`` falls to one. Below ``u^2 = 1/2`` both curves vanish in the
    tail; above, the delta-method integrand grows without bound while the true one is cut off near z*.

    The area under the Monte Carlo curve is half of ``L`` times the query-averaged error (z >= 0 only).
    Returns the Monte Carlo integrand values (numpy, shape (n_z,)) for tests.
    """
    if not (isinstance(u, (int, float)) and math.isfinite(u) and u > 0):
        raise ValueError(f"u must be a positive finite number, got {u!r}")
    check_positive_int("L", L)
    check_positive_int("n_prompts", n_prompts)
    check_positive_int("n_z", n_z)
    gen = torch.Generator().manual_seed(seed)
    z = torch.linspace(0.0, z_max, n_z, dtype=torch.float64)
    one = torch.ones(1, 1, dtype=torch.float64)
    mu = GaussianMeasure(torch.zeros(1, dtype=torch.float64), one)
    errs = sample_prompt_errors(mu, z[:, None], u * one, one, L, n_prompts, generator=gen, jacobians=False)
    est = errs.estimate_per_query("output")
    phi = torch.exp(-z**2 / 2) / math.sqrt(2 * math.pi)
    mc = (L * phi * est.mean).numpy()
    band = (2 * L * phi * est.stderr).numpy()
    s = (u * z) ** 2
    delta = (phi * torch.exp(s) * (1 + s)).numpy()
    zn = z.numpy()
    ax.fill_between(zn, np.maximum(mc - band, 1e-12), mc + band, color="#0072B2", alpha=0.2, linewidth=0)
    ax.plot(zn, mc, color="#0072B2", marker="o", linestyle="-", markersize=3, label="Monte Carlo")
    ax.plot(zn, delta, color="#D55E00", marker="", linestyle="--", label="delta method")
    zstar = math.sqrt(math.log(L)) / u
    if zstar <= z_max:
        ax.axvline(zstar, color="#000000", linestyle=":", linewidth=1.2, label=r"ESS $\approx 1$")
    ax.set_yscale("log")
    ax.set_ylim(1e-4, 1e3)
    ax.set_xlabel("query $z$")
    ax.set_ylabel(r"$\varphi(z)\,L\,\mathrm{error}(z)$")
    ax.set_title(f"u = {u:g}, L = {L}")
    if legend:
        ax.legend(loc="upper left", fontsize=8)
    return mc
