"""The infinite-prompt limit of softmax attention (Lemma 2.1) and three independent ways to check it.

For tokens drawn from ``mu = N(m, Gamma)``, softmax attention over a prompt of length L converges, as L
grows, to the affine map ``z -> V (m + Gamma U z)`` (:func:`softlin.gaussian_attention_limit`). This module
computes the same limit, or estimates it, *without* the closed form:

- :func:`quadrature_attention_limit`: the numerator and denominator of ``T[mu](z)`` by tensor-product
  Gauss-Hermite quadrature over the range of ``Gamma`` (:func:`gauss_hermite_rule`), so singular
  covariances are handled by integrating over ``r = rank(Gamma)`` coordinates only;
- :func:`finite_prompt_outputs` and :func:`fit_rmse_rate`: Monte Carlo over many prompts of length L and
  the fitted decay rate of the root-mean-square error (``L^{-1/2}`` for a fixed query);
- :func:`tilted_moments`: the mean and covariance of samples re-weighted by ``exp(a^T x)`` (the
  exponentially tilted law), with their delta-method standard errors.

It also gives the Gaussian push-forward of a Gaussian query law (:func:`gaussian_pushforward`) and the
plotting function behind chapter 2's explorer (:func:`plot_prompt_cloud`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from ._checks import (
    as_tensor_arg,
    check_generator,
    check_matrix,
    check_positive_int,
    check_psd,
    check_same_dtype_device,
)
from .attention import linear_attention, softmax_attention
from .measures import GaussianMeasure, TokenMeasure, gaussian_range_factor  # noqa: F401 (re-exported)

__all__ = [
    "gaussian_range_factor",
    "gauss_hermite_rule",
    "quadrature_attention_limit",
    "TiltedMoments",
    "tilted_moments",
    "finite_prompt_outputs",
    "RateFit",
    "fit_rmse_rate",
    "gaussian_pushforward",
    "plot_prompt_cloud",
]

#: Largest number of quadrature nodes :func:`gauss_hermite_rule` builds (n_nodes ** rank).
MAX_QUADRATURE_NODES = 2_000_000


def _check_mean_cov(mean, cov):
    mean = as_tensor_arg("mean", mean)
    cov = as_tensor_arg("cov", cov)
    if mean.dim() != 1:
        raise ValueError(f"mean must be a vector of shape (D,), got shape {tuple(mean.shape)}")
    D = mean.shape[0]
    if cov.shape != (D, D):
        raise ValueError(f"cov must have shape (D, D) = ({D}, {D}) to match mean, got {tuple(cov.shape)}")
    check_same_dtype_device({"mean": mean, "cov": cov})
    check_psd("cov", cov)
    return mean, cov


def gauss_hermite_rule(mean, cov, n_nodes: int):
    """Tensor-product Gauss-Hermite rule for ``N(mean, cov)``: nodes and weights summing to one.

    With ``cov = B B^T`` (``B`` of shape ``(D, r)``, :func:`gaussian_range_factor`) and the ``n``-point
    Gauss-Hermite rule ``(t_k, w_k)`` for the weight ``exp(-t^2)`` (``numpy.polynomial.hermite.hermgauss``),
    the nodes are ``mean + B sqrt(2) (t_{k_1}, ..., t_{k_r})`` with weights ``prod_j w_{k_j} / pi^{r/2}``.
    Then ``sum_k weights_k f(nodes_k)`` approximates ``E f(X)``, ``X ~ N(mean, cov)``, exactly when ``f``
    composed with ``B`` is a polynomial of degree at most ``2n - 1`` in each coordinate, and with an error
    that falls faster than geometrically in ``n`` for entire functions such as ``exp(a^T x)``.

    Parameters
    ----------
    mean : Tensor, shape (D,)
    cov : Tensor, shape (D, D), symmetric PSD, possibly singular (the rule lives on its range).
    n_nodes : int, nodes per dimension of the range.

    Returns
    -------
    nodes : Tensor, shape (n_nodes ** r, D)
    weights : Tensor, shape (n_nodes ** r,), positive (tiny ones may underflow to 0), summing to 1.

    Raises
    ------
    TypeError, ValueError
        Bad ``mean``/``cov`` (see :class:`softlin.GaussianMeasure`), non-positive ``n_nodes``, or more than
        ``MAX_QUADRATURE_NODES`` nodes (``n_nodes ** rank`` too large: use fewer nodes).
    """
    mean, cov = _check_mean_cov(mean, cov)
    check_positive_int("n_nodes", n_nodes)
    B = gaussian_range_factor(cov)  # (D, r)
    r = B.shape[1]
    if n_nodes**r > MAX_QUADRATURE_NODES:
        raise ValueError(
            f"n_nodes ** rank(cov) = {n_nodes}^{r} exceeds {MAX_QUADRATURE_NODES} nodes; use fewer n_nodes "
            "(tensor-product quadrature is meant for rank <= 3)"
        )
    t, w = np.polynomial.hermite.hermgauss(n_nodes)
    g1 = math.sqrt(2.0) * t  # nodes for one standard normal coordinate
    w1 = w / math.sqrt(math.pi)  # weights summing to one
    if r == 0:
        return mean.unsqueeze(0).clone(), torch.ones(1, dtype=mean.dtype, device=mean.device)
    grid = np.stack(np.meshgrid(*([g1] * r), indexing="ij"), axis=-1).reshape(-1, r)  # (n^r, r)
    w_grid = np.stack(np.meshgrid(*([w1] * r), indexing="ij"), axis=-1).reshape(-1, r)  # (n^r, r)
    weights = np.prod(w_grid, axis=1)  # (n^r,)
    grid_t = torch.as_tensor(grid, dtype=mean.dtype, device=mean.device)
    nodes = mean + grid_t @ B.mT  # (n^r, D)
    return nodes, torch.as_tensor(weights, dtype=mean.dtype, device=mean.device)


def quadrature_attention_limit(queries, U, V, mean, cov, *, n_nodes: int = 32):
    """Infinite-prompt softmax attention ``T_{U,V}[N(mean, cov)](z)`` by Gauss-Hermite quadrature.

    Both integrals of the definition (paper section 2),

        numerator   N(z) = E[exp(X^T U z) V X],      denominator   M(z) = E[exp(X^T U z)],

    are replaced by the rule of :func:`gauss_hermite_rule`, and the ratio ``N(z) / M(z)`` is returned. A
    quadrature rule is a weighted prompt (its nodes are the tokens, its weights the token weights), so the
    ratio is computed by :func:`softlin.softmax_attention` with ``weights``: scores are shifted by their
    maximum before exponentiation, so large ``|U z|`` does not overflow. Nothing here uses the closed form
    of Lemma 2.1; it is an independent check of it.

    Parameters
    ----------
    queries : Tensor, shape (Q, D)
    U : Tensor, shape (D, D)
    V : Tensor, shape (D_out, D)
    mean : Tensor, shape (D,)
    cov : Tensor, shape (D, D), symmetric PSD, possibly singular.
    n_nodes : int, Gauss-Hermite nodes per dimension of the range of ``cov`` (default 32).

    Returns
    -------
    Tensor, shape (Q, D_out)

    Raises
    ------
    TypeError, ValueError
        Mismatched shapes, dtypes or devices; bad ``cov``; too many nodes.
    """
    queries = as_tensor_arg("queries", queries)
    if queries.dim() != 2:
        raise ValueError(f"queries must have shape (Q, D), got {tuple(queries.shape)}")
    nodes, weights = gauss_hermite_rule(mean, cov, n_nodes)
    D = nodes.shape[1]
    if queries.shape[1] != D:
        raise ValueError(
            f"queries must have last dimension D = {D} (that of mean), got {tuple(queries.shape)}"
        )
    check_same_dtype_device({"queries": queries, "mean": mean})
    return softmax_attention(nodes, queries, U, V, weights=weights)


class TiltedMoments(NamedTuple):
    """Self-normalised estimates of the tilted law's moments, and their delta-method standard errors."""

    mean: torch.Tensor  #: (D,)
    cov: torch.Tensor  #: (D, D)
    mean_se: torch.Tensor  #: (D,)
    cov_se: torch.Tensor  #: (D, D)
    ess: float  #: effective sample size (sum p)^2 / sum p^2 of the normalised weights p


def tilted_moments(samples, a) -> TiltedMoments:
    """Mean and covariance of ``samples`` re-weighted by ``exp(a^T x)``: the tilted law ``mu^(a)``.

    With ``x_1..x_N`` drawn from ``mu`` and ``p_i ∝ exp(a^T x_i)``, ``sum_i p_i x_i`` estimates the mean of
    ``mu^(a)(dx) ∝ exp(a^T x) mu(dx)`` and ``sum_i p_i (x_i - mean)(x_i - mean)^T`` its covariance. For
    ``mu = N(m, Gamma)`` these are ``m + Gamma a`` and ``Gamma`` (the completed square in the proof of
    Lemma 2.1). With ``V = I`` the weighted mean is exactly softmax attention of the query ``z`` with
    ``U z = a`` over the prompt ``samples``.

    Standard errors are those of self-normalised importance sampling (delta method):
    ``se(mean_j)^2 = sum_i p_i^2 (x_ij - mean_j)^2`` and
    ``se(cov_jk)^2 = sum_i p_i^2 ((x_ij - mean_j)(x_ik - mean_k) - cov_jk)^2``.

    Parameters
    ----------
    samples : Tensor, shape (N, D), N >= 2
    a : Tensor, shape (D,), the tilt direction.

    Returns
    -------
    TiltedMoments(mean (D,), cov (D, D), mean_se (D,), cov_se (D, D), ess float)

    Raises
    ------
    TypeError, ValueError
        Non-tensors, wrong shapes, fewer than two samples, mismatched dtypes or devices, NaN/inf.
    """
    samples = as_tensor_arg("samples", samples)
    a = as_tensor_arg("a", a)
    if samples.dim() != 2 or samples.shape[0] < 2:
        raise ValueError(f"samples must have shape (N, D) with N >= 2, got {tuple(samples.shape)}")
    if a.shape != (samples.shape[1],):
        raise ValueError(
            f"a must have shape (D,) = ({samples.shape[1]},) to match samples, got {tuple(a.shape)}"
        )
    check_same_dtype_device({"samples": samples, "a": a})
    p = torch.softmax(samples @ a, dim=0)  # (N,) normalised tilt weights
    mean = p @ samples  # (D,)
    xc = samples - mean  # (N, D)
    outer = xc.unsqueeze(-1) * xc.unsqueeze(-2)  # (N, D, D)
    cov = torch.einsum("i,ijk->jk", p, outer)
    p2 = p**2
    mean_se = (p2 @ xc**2).sqrt()
    cov_se = torch.einsum("i,ijk->jk", p2, (outer - cov) ** 2).sqrt()
    return TiltedMoments(mean, cov, mean_se, cov_se, float(1.0 / p2.sum()))


def finite_prompt_outputs(
    measure: TokenMeasure,
    queries,
    U,
    V,
    L: int,
    n_prompts: int,
    *,
    generator: torch.Generator,
    attention: str = "softmax",
    chunk_size: int | None = None,
    max_batch_tokens: int = 2**20,
):
    """Attention outputs ``T[mu_hat_L](z)`` over ``n_prompts`` independent prompts of ``L`` tokens.

    Prompts are drawn and processed in batches of at most ``max(1, max_batch_tokens // L)`` prompts, so
    memory stays bounded for long prompts (``L = 10^6``); ``chunk_size`` is passed on to
    :func:`softlin.softmax_attention` to stream over each prompt.

    Parameters
    ----------
    measure : TokenMeasure, the token law ``mu`` (anything with ``sample``).
    queries : Tensor, shape (Q, D) (the same queries for every prompt) or (n_prompts, Q, D) (prompt p
        answers queries[p]).
    U : Tensor, shape (D, D)
    V : Tensor, shape (D_out, D)
    L : int, prompt length.
    n_prompts : int, number of independent prompts.
    generator : torch.Generator, the only source of randomness.
    attention : "softmax" (default) or "linear" (normalised linear attention,
        ``(1/L) sum_i (z_i^T U z) V z_i``).
    chunk_size : int, optional; softmax only.
    max_batch_tokens : int, tokens held in memory at once (default 2^20).

    Returns
    -------
    Tensor, shape (n_prompts, Q, D_out)

    Raises
    ------
    TypeError, ValueError
        Bad measure, shapes, sizes, generator or ``attention`` name; the message names the argument.
    """
    if not isinstance(measure, TokenMeasure):
        raise TypeError(f"measure must be a softlin TokenMeasure, got {type(measure).__name__}")
    check_positive_int("L", L)
    check_positive_int("n_prompts", n_prompts)
    check_positive_int("max_batch_tokens", max_batch_tokens)
    check_positive_int("chunk_size", chunk_size, allow_none=True)
    if generator is None:
        raise TypeError("generator must be a torch.Generator (all randomness is explicit), got None")
    check_generator(generator)
    if attention not in ("softmax", "linear"):
        raise ValueError(f"attention must be 'softmax' or 'linear', got {attention!r}")
    if attention == "linear" and chunk_size is not None:
        raise ValueError(
            "chunk_size applies to softmax attention only; got attention='linear' with a chunk_size"
        )
    queries = as_tensor_arg("queries", queries)
    U, V = as_tensor_arg("U", U), as_tensor_arg("V", V)
    D = measure.dim
    if queries.dim() == 2:
        per_prompt = False
    elif queries.dim() == 3 and queries.shape[0] == n_prompts:
        per_prompt = True
    else:
        raise ValueError(
            f"queries must have shape (Q, D) or (n_prompts, Q, D) = ({n_prompts}, Q, D), "
            f"got {tuple(queries.shape)}"
        )
    if queries.shape[-1] != D:
        raise ValueError(
            f"queries must have last dimension D = {D} (the measure's dimension), got {tuple(queries.shape)}"
        )
    check_matrix("U", U, D, D)
    check_matrix("V", V, None, D)
    check_same_dtype_device({"queries": queries, "U": U, "V": V})
    if queries.dtype != measure.dtype:
        raise ValueError(f"queries has dtype {queries.dtype} but the measure samples {measure.dtype}")
    Q = queries.shape[-2]
    out = torch.empty(n_prompts, Q, V.shape[0], dtype=queries.dtype, device=queries.device)
    batch = max(1, max_batch_tokens // L)
    for start in range(0, n_prompts, batch):
        b = min(batch, n_prompts - start)
        tokens = measure.sample(b * L, generator=generator).reshape(b, L, D)  # (b, L, D)
        q = queries[start : start + b] if per_prompt else queries.expand(b, Q, D)  # (b, Q, D)
        if attention == "softmax":
            out[start : start + b] = softmax_attention(tokens, q, U, V, chunk_size=chunk_size)
        else:
            out[start : start + b] = linear_attention(tokens, q, U, V)
    return out


class RateFit(NamedTuple):
    """Weighted least-squares fit of ``log RMSE = intercept + slope * log L``."""

    slope: float
    slope_se: float  #: propagated from the per-length standard errors, inflated by sqrt(chi2_reduced) if > 1
    intercept: float
    rmse: torch.Tensor  #: (n_lengths,)
    log_rmse_se: torch.Tensor  #: (n_lengths,) delta-method standard error of each log RMSE
    chi2_reduced: float  #: chi^2 / (n_lengths - 2) of the fit; about 1 when the power law fits


def fit_rmse_rate(lengths, errors) -> RateFit:
    """Fit the decay rate of the root-mean-square error of independent prompts against the prompt length.

    For each length ``L_j``, ``errors[j]`` holds the errors ``T[mu_hat_L](z) - T[mu](z)`` of ``P_j``
    independent prompts. Per prompt ``s_p`` is the squared error, averaged over queries and summed over
    output coordinates; ``RMSE_j = sqrt(mean_p s_p)`` and, by the delta method, the standard error of
    ``log RMSE_j`` is ``sd(s) / (2 sqrt(P_j) mean(s))``. The slope of ``log RMSE`` against ``log L`` is
    fitted by weighted least squares with weights ``1 / se_j^2``; its standard error is the propagated one,
    multiplied by ``sqrt(chi2_reduced)`` when the residuals are larger than the standard errors predict
    (the Birge ratio), so a poor fit widens the interval instead of hiding. For a fixed query and
    sub-Gaussian tokens the slope tends to ``-1/2`` (paper section 3).

    Parameters
    ----------
    lengths : sequence of int, at least three distinct positive prompt lengths.
    errors : sequence of Tensors, one per length, shape (P_j, ...) with P_j >= 2 prompts.

    Returns
    -------
    RateFit(slope, slope_se, intercept, rmse, log_rmse_se, chi2_reduced)

    Raises
    ------
    TypeError, ValueError
        Fewer than three lengths, repeated or non-positive lengths, mismatched list lengths, fewer than
        two prompts at a length, or an all-zero error (log of zero).
    """
    lengths = list(lengths)
    errors = list(errors)
    if len(lengths) < 3:
        raise ValueError(
            f"lengths must hold at least three prompt lengths to fit a slope with an error, got {lengths}"
        )
    for L in lengths:
        check_positive_int("lengths[i]", L)
    if len(set(lengths)) != len(lengths):
        raise ValueError(f"lengths must be distinct, got {lengths}")
    if len(errors) != len(lengths):
        raise ValueError(f"errors must hold one tensor per length ({len(lengths)}), got {len(errors)}")
    rmse, se = [], []
    for j, e in enumerate(errors):
        e = as_tensor_arg(f"errors[{j}]", e, min_dim=1)
        if e.shape[0] < 2:
            raise ValueError(
                f"errors[{j}] must hold at least two prompts (shape (P, ...)), got {tuple(e.shape)}"
            )
        per_query = e.reshape(e.shape[0], -1, e.shape[-1] if e.dim() > 1 else 1)  # (P, Q, D_out)
        s = (per_query**2).sum(-1).mean(-1).double()  # (P,): squared error of each prompt
        ms = float(s.mean())
        if ms <= 0:
            raise ValueError(f"errors[{j}] is identically zero; its log RMSE is undefined")
        rmse.append(math.sqrt(ms))
        se.append(float(s.std()) / (2 * math.sqrt(s.shape[0]) * ms))
    x = np.log(np.array(lengths, dtype=float))
    y = np.log(np.array(rmse))
    sev = np.array(se)
    if np.any(sev <= 0):
        raise ValueError(
            "every length needs errors that vary across prompts (a zero standard error cannot weight a fit)"
        )
    w = 1.0 / sev**2
    xb, yb = np.sum(w * x) / np.sum(w), np.sum(w * y) / np.sum(w)
    sxx = np.sum(w * (x - xb) ** 2)
    slope = float(np.sum(w * (x - xb) * (y - yb)) / sxx)
    intercept = float(yb - slope * xb)
    chi2_red = float(np.sum(w * (y - intercept - slope * x) ** 2) / (len(x) - 2))
    slope_se = float(math.sqrt(1.0 / sxx) * math.sqrt(max(1.0, chi2_red)))
    return RateFit(slope, slope_se, intercept, torch.tensor(rmse, dtype=torch.float64),
                   torch.tensor(se, dtype=torch.float64), chi2_red)


def gaussian_pushforward(query_mean, query_cov, U, V, mean, cov):
    """Law of the limit output ``V (m + Gamma U z)`` when the query is Gaussian, ``z ~ N(m', Gamma')``.

    An affine map sends a Gaussian to a Gaussian: the output is ``N(V m + V Gamma U m',
    (V Gamma U) Gamma' (V Gamma U)^T)`` (the push-forward part of Lemma 2.1, as reconstructed in the book).

    Parameters
    ----------
    query_mean : Tensor, shape (D,), m'
    query_cov : Tensor, shape (D, D), Gamma', symmetric PSD
    U : Tensor, shape (D, D)
    V : Tensor, shape (D_out, D)
    mean : Tensor, shape (D,), m (token mean)
    cov : Tensor, shape (D, D), Gamma (token covariance), symmetric PSD

    Returns
    -------
    (out_mean, out_cov) : Tensors of shapes (D_out,) and (D_out, D_out)

    Raises
    ------
    TypeError, ValueError
        Mismatched shapes, dtypes or devices; a covariance that is not symmetric PSD.
    """
    query_mean, query_cov = _check_mean_cov(query_mean, query_cov)
    mean, cov = _check_mean_cov(mean, cov)
    U, V = as_tensor_arg("U", U), as_tensor_arg("V", V)
    D = mean.shape[0]
    if query_mean.shape[0] != D:
        raise ValueError(
            f"query_mean must have shape (D,) = ({D},) to match mean, got {tuple(query_mean.shape)}"
        )
    check_matrix("U", U, D, D)
    check_matrix("V", V, None, D)
    check_same_dtype_device({"query_mean": query_mean, "mean": mean, "U": U, "V": V})
    A = V @ cov @ U  # (D_out, D): the linear part of the limit map
    return V @ mean + A @ query_mean, A @ query_cov @ A.mT


# -- the explorer of chapter 2 ------------------------------------------------------------------------

#: The fixed two-dimensional example of :func:`plot_prompt_cloud`: token law, base U, and the query.
CLOUD_MEAN = torch.tensor([0.0, 0.0], dtype=torch.float64)
CLOUD_COV = torch.tensor([[1.0, 0.4], [0.4, 0.6]], dtype=torch.float64)
CLOUD_U = torch.tensor([[0.6, -0.5], [0.4, 0.7]], dtype=torch.float64)
CLOUD_QUERY = torch.tensor([[1.0, 0.5]], dtype=torch.float64)
CLOUD_HALF_WIDTH = 1.0


def plot_prompt_cloud(ax, L: int, scale: float, *, n_prompts: int = 150, seed: int = 0):
    """Draw the outputs of softmax attention over ``n_prompts`` prompts of length ``L`` around their limit.

    Tokens are ``N(0, Gamma)`` in D = 2 (``CLOUD_COV``), ``U = scale * CLOUD_U``, ``V = I`` and the query
    is ``CLOUD_QUERY``. Each dot is ``T[mu_hat_L](z)`` for one prompt; the star is the limit
    ``Gamma U z`` of Lemma 2.1. The window is the limit plus or minus ``CLOUD_HALF_WIDTH`` in each
    coordinate, so shrinking clouds are comparable across panels; dots outside it are counted in the title.

    Parameters
    ----------
    ax : matplotlib Axes
    L : int, prompt length (>= 1).
    scale : float, multiplies ``CLOUD_U`` (>= 0; 0 gives uniform weights, i.e. the plain token mean).
    n_prompts : int, number of prompts (default 150).
    seed : int, seed of the generator that draws the prompts (default 0).

    Returns
    -------
    dict with ``outputs`` (n_prompts, 2), ``limit`` (2,) and ``rms`` (root-mean-square distance of the
    outputs to the limit), for tests and captions.

    Raises
    ------
    TypeError, ValueError
        Bad ``L``, ``n_prompts`` or ``seed``; ``scale`` negative, NaN or not a number.
    """
    check_positive_int("L", L)
    check_positive_int("n_prompts", n_prompts)
    is_number = isinstance(scale, (int, float)) and not isinstance(scale, bool)
    if not is_number or not math.isfinite(scale) or scale < 0:
        raise ValueError(f"scale must be a finite number >= 0, got {scale!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    gen = torch.Generator().manual_seed(seed)
    mu = GaussianMeasure(CLOUD_MEAN, CLOUD_COV)
    U = scale * CLOUD_U
    V = torch.eye(2, dtype=torch.float64)
    outs = finite_prompt_outputs(mu, CLOUD_QUERY, U, V, L, n_prompts, generator=gen)[:, 0]  # (n_prompts, 2)
    limit = (CLOUD_MEAN + CLOUD_COV @ U @ CLOUD_QUERY[0]) @ V.mT  # (2,)
    rms = float(((outs - limit) ** 2).sum(-1).mean().sqrt())
    h = CLOUD_HALF_WIDTH
    outside = int(((outs - limit).abs() > h).any(-1).sum())
    ax.plot(outs[:, 0], outs[:, 1], linestyle="none", marker="o", markersize=3, alpha=0.5, color="#0072B2",
            label=f"{n_prompts} prompts")
    ax.plot([float(limit[0])], [float(limit[1])], linestyle="none", marker="*", markersize=14,
            color="#D55E00", markeredgecolor="black", label="limit $\\Gamma U z$")
    ax.set_xlim(float(limit[0]) - h, float(limit[0]) + h)
    ax.set_ylim(float(limit[1]) - h, float(limit[1]) + h)
    ax.set_aspect("equal")
    ax.set_xlabel("output 1")
    ax.set_ylabel("output 2")
    extra = f", {outside} outside" if outside else ""
    ax.set_title(f"L = {L}, scale = {scale:g}\nRMS distance {rms:.3f}{extra}", fontsize=9)
    return {"outputs": outs, "limit": limit, "rms": rms}
