"""Token measures, their log-moment-generating functions, and the infinite-prompt attention limit.

For a token law ``mu`` on R^D write ``M_mu(a) = E_mu[exp(a^T X)]`` and ``Lambda_mu = log M_mu``. Softmax
attention over an infinite prompt is (Section 2 of the paper, in exponential-tilt form)

    T_{U,V}[mu](z) = V grad Lambda_mu(U z) = V E_{mu^(Uz)}[X],     mu^(a)(dx) ∝ exp(a^T x) mu(dx),

the value map applied to the mean of the exponentially tilted measure. :func:`attention_limit` computes
this by automatic differentiation of ``log_mgf``; for a Gaussian ``mu = N(m, Gamma)`` the log-MGF is
quadratic and the limit is the affine map of Lemma 2.1, ``V (m + Gamma U z)``
(:func:`gaussian_attention_limit`, closed form).

Every measure has ``dim`` (D), ``sample(n, generator=...)`` returning ``(n, D)`` and ``log_mgf(a)`` taking
``(..., D)`` to ``(...)``. Measures without a finite MGF (heavy tails) return ``+inf`` for ``a != 0``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ._checks import (
    as_tensor_arg,
    check_dtype_device,
    check_generator,
    check_matrix,
    check_memory,
    check_positive_int,
    check_psd,
    check_real,
    check_same_dtype_device,
    check_weights,
    common_dim,
    psd_tolerance,
    validated_by,
)

__all__ = [
    "EmpiricalMeasure",
    "GaussianMeasure",
    "GaussianMixtureMeasure",
    "LogNormalMeasure",
    "RademacherMeasure",
    "StudentTMeasure",
    "TokenMeasure",
    "UniformMeasure",
    "attention_limit",
    "gauss_hermite_rule",
    "gaussian_attention_limit",
    "gaussian_range_factor",
    "linear_attention_limit",
]

#: Largest number of nodes :func:`gauss_hermite_rule` builds (``n_nodes ** rank``).
MAX_QUADRATURE_NODES = 2_000_000


class TokenMeasure:
    """Base class: a probability measure on R^D with a log-MGF and a sampler."""

    dim: int
    dtype: torch.dtype = torch.float64
    device: torch.device = torch.device("cpu")
    has_finite_mgf: bool = True

    def sample(self, n: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draw ``n`` i.i.d. tokens; returns a tensor of shape ``(n, D)``."""
        raise NotImplementedError

    def log_mgf(self, a: torch.Tensor) -> torch.Tensor:
        """``Lambda_mu(a) = log E_mu[exp(a^T X)]`` for ``a`` of shape ``(..., D)``; returns ``(...)``."""
        raise NotImplementedError

    # -- derived quantities ------------------------------------------------------------------------
    def _check_a(self, a, *, tilted: bool = False) -> torch.Tensor:
        a = as_tensor_arg("a", a, min_dim=1)
        if a.shape[-1] != self.dim:
            raise ValueError(
                f"a must have last dimension D = {self.dim}, got shape {tuple(a.shape)}"
            )
        if tilted:
            check_measure(self, type(self).__name__, finite_mgf=True)
        return a

    def tilted_mean(self, a: torch.Tensor) -> torch.Tensor:
        """Mean of the tilted measure ``mu^(a)``, i.e. ``grad Lambda_mu(a)``, by autograd.

        ``a``: ``(..., D)`` -> ``(..., D)``. Raises ``ValueError`` if the measure has no finite MGF.
        """
        a = self._check_a(a, tilted=True)
        return torch.func.grad(lambda x: self.log_mgf(x).sum())(a)

    def tilted_covariance(self, a: torch.Tensor) -> torch.Tensor:
        """Covariance of the tilted measure ``mu^(a)``, the Hessian of ``Lambda_mu`` at ``a``.

        ``a``: ``(..., D)`` -> ``(..., D, D)``. Raises ``ValueError`` if the measure has no finite MGF.
        """
        a = self._check_a(a, tilted=True)
        hess = torch.func.vmap(torch.func.hessian(self.log_mgf))(a.reshape(-1, self.dim))
        return hess.reshape(*a.shape, self.dim)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dim={self.dim})"


def check_measure(measure, name: str = "measure", *, finite_mgf: bool = False):
    """A softlin :class:`TokenMeasure`; with ``finite_mgf``, one whose MGF is finite (the validator of
    every function that takes a token law; it lives here, beside the class it knows)."""
    if not isinstance(measure, TokenMeasure):
        raise TypeError(f"{name} must be a softlin TokenMeasure, got {type(measure).__name__}")
    if finite_mgf and not measure.has_finite_mgf:
        raise ValueError(
            f"{name} ({type(measure).__name__}) has no finite moment generating function away "
            "from 0, so the tilted law and the infinite-prompt limit do not exist"
        )
    return measure


def _check_sample(measure, n, generator):
    check_positive_int("n", n)
    check_generator(generator)
    size = torch.empty(0, dtype=measure.dtype).element_size()
    what = f"{n} tokens of dimension {measure.dim}"
    check_memory(f"n = {n}", 2 * n * measure.dim * size, device=measure.device, what=what)


def _init_coordinates(measure, dim, dtype, device):
    """A law with i.i.d. coordinates is described by ``dim``, ``dtype`` and ``device`` (and its own
    parameters)."""
    measure.dim = check_positive_int("dim", dim)
    measure.dtype, measure.device = check_dtype_device(dtype, device)


def _infinite_log_mgf(self, a):
    """``+inf`` at every ``a != 0`` (the MGF is infinite away from 0), 0 at ``a = 0``."""
    nonzero = (a != 0).any(-1)
    return torch.where(nonzero, torch.full(nonzero.shape, float("inf"), dtype=a.dtype), 0.0)


def _range_eigh(cov):
    """Eigen-decomposition of a (validated) PSD matrix with the eigenvalues within rounding of zero (the
    tolerance of check_psd) set to zero exactly, so that samples of a singular Gaussian lie exactly in
    the range of cov."""
    evals, evecs = torch.linalg.eigh(0.5 * (cov + cov.mT))
    return torch.where(evals > psd_tolerance(cov), evals, torch.zeros_like(evals)), evecs


def gaussian_range_factor(cov) -> torch.Tensor:
    """A factor ``B`` (D, r) with ``B B^T = cov`` (D, D, symmetric PSD) and ``r = rank(cov)`` (0 if zero).

    A Gaussian ``N(m, cov)`` is the law of ``m + B G``, ``G ~ N(0, I_r)``: this is how the proof of Lemma
    2.1 (and :func:`gauss_hermite_rule`) handles a singular covariance, on its range. Eigenvalues within
    rounding of zero (the PSD check's ``1e3 * eps * max(max|cov|, 1)``) count as zero. TypeError or
    ValueError if ``cov`` is not a floating tensor, not square, not finite, asymmetric or not PSD.
    """
    cov = as_tensor_arg("cov", cov)
    if cov.dim() != 2:
        raise ValueError(f"cov must be a matrix of shape (D, D), got shape {tuple(cov.shape)}")
    check_psd("cov", cov)
    evals, evecs = _range_eigh(cov)
    keep = evals > 0
    return evecs[:, keep] * evals[keep].sqrt()  # (D, r)


class GaussianMeasure(TokenMeasure):
    """The Gaussian ``N(mean, cov)`` on R^D; ``cov`` may be singular (e.g. regression tokens).

    Parameters
    ----------
    mean : Tensor, shape (D,)
    cov : Tensor, shape (D, D), symmetric positive semi-definite.

    Raises
    ------
    TypeError if an argument is not a floating tensor; ValueError on wrong shapes, NaN/inf,
    an asymmetric or non-PSD covariance.

    Notes
    -----
    ``log_mgf(a) = a^T m + a^T cov a / 2``; the tilted measure ``mu^(a)`` is ``N(m + cov a, cov)``
    (the completed square in the proof of Lemma 2.1).
    """

    def __init__(self, mean, cov):
        mean = as_tensor_arg("mean", mean)
        cov = as_tensor_arg("cov", cov)
        if mean.dim() != 1:
            raise ValueError(f"mean must be a vector of shape (D,), got shape {tuple(mean.shape)}")
        D = mean.shape[0]
        if cov.dim() != 2 or cov.shape != (D, D):
            raise ValueError(
                f"cov must have shape (D, D) = ({D}, {D}) to match mean, got {tuple(cov.shape)}"
            )
        check_same_dtype_device({"mean": mean, "cov": cov})
        check_psd("cov", cov)
        self.mean, self.cov, self.dim = mean, cov, D
        self.dtype, self.device = mean.dtype, mean.device
        evals, evecs = _range_eigh(cov)
        # (D, D) with factor @ factor^T = cov (zero columns off range)
        self._factor = evecs * evals.sqrt()

    def sample(self, n, *, generator=None):
        _check_sample(self, n, generator)
        g = torch.randn(n, self.dim, generator=generator, dtype=self.dtype, device=self.device)
        return self.mean + g @ self._factor.mT

    def log_mgf(self, a):
        return a @ self.mean + 0.5 * ((a @ self.cov) * a).sum(-1)

    def tilted_mean(self, a):
        """``mean + cov a`` (Lemma 2.1's completed square), ``a``: (..., D) -> (..., D)."""
        a = self._check_a(a)
        return self.mean + a @ self.cov.mT

    def tilted_covariance(self, a):
        """``cov`` for every ``a`` (the tilt only moves a Gaussian), ``a``: (..., D) -> (..., D, D)."""
        a = self._check_a(a)
        return self.cov.expand(*a.shape, self.dim)

    def __repr__(self):
        return f"GaussianMeasure(dim={self.dim}, rank={int(torch.linalg.matrix_rank(self.cov))})"


class EmpiricalMeasure(TokenMeasure):
    """The (weighted) empirical measure ``sum_i w_i delta_{z_i} / sum_i w_i`` of a prompt.

    Parameters
    ----------
    atoms : Tensor, shape (L, D)
    weights : Tensor, shape (L,), optional; non-negative, not all zero. Default: uniform.

    Notes
    -----
    ``log_mgf(a) = logsumexp_i(a^T z_i + log w_i) - log sum_i w_i``; its gradient is the softmax-weighted
    mean of the atoms, so :func:`attention_limit` of an empirical measure is exactly softmax attention.
    """

    def __init__(self, atoms, weights=None):
        atoms = as_tensor_arg("atoms", atoms)
        if atoms.dim() != 2:
            raise ValueError(f"atoms must have shape (L, D), got {tuple(atoms.shape)}")
        if atoms.shape[0] == 0:
            raise ValueError(
                f"atoms must hold at least one token (L >= 1), got shape {tuple(atoms.shape)}"
            )
        if weights is None:
            weights = torch.ones(atoms.shape[0], dtype=atoms.dtype, device=atoms.device)
        else:
            weights = as_tensor_arg("weights", weights)
            check_weights(weights, (atoms.shape[0],))
            check_same_dtype_device({"atoms": atoms, "weights": weights})
        self.atoms, self.weights = atoms, weights
        self.dim = atoms.shape[1]
        self.dtype, self.device = atoms.dtype, atoms.device
        self._log_p = torch.log(weights / weights.sum())

    def sample(self, n, *, generator=None):
        _check_sample(self, n, generator)
        idx = torch.multinomial(self._log_p.exp(), n, replacement=True, generator=generator)
        return self.atoms[idx]

    def log_mgf(self, a):
        return torch.logsumexp(a @ self.atoms.mT + self._log_p, dim=-1)


class RademacherMeasure(TokenMeasure):
    """Independent uniform signs on {-1, +1}^D: centred, unit variance, 1-sub-Gaussian, not Gaussian.

    ``log_mgf(a) = sum_j log cosh(a_j)``, so the infinite-prompt limit is ``V tanh(U z)`` (coordinate-wise
    tanh): the paper's example that the linear limit is specific to Gaussian tokens.
    """

    def __init__(self, dim: int, *, dtype=torch.float64, device="cpu"):
        _init_coordinates(self, dim, dtype, device)

    def sample(self, n, *, generator=None):
        _check_sample(self, n, generator)
        bits = torch.randint(0, 2, (n, self.dim), generator=generator, device=self.device)
        return (2 * bits - 1).to(self.dtype)

    def log_mgf(self, a):
        # log cosh(a): direct where cosh cannot overflow (smooth at 0, so autograd Hessians are right),
        # |a| - log 2 + log1p(exp(-2|a|)) beyond; each branch gets safe inputs (no NaN gradients).
        big = a.abs() > 20
        a_small = torch.where(big, torch.zeros_like(a), a)
        a_big = torch.where(big, a.abs(), torch.full_like(a, 21.0))
        direct = torch.log(torch.cosh(a_small))
        tail = a_big - math.log(2.0) + torch.log1p(torch.exp(-2 * a_big))
        return torch.where(big, tail, direct).sum(-1)


class UniformMeasure(TokenMeasure):
    """Independent coordinates uniform on [-h, h]; the default h = sqrt(3) gives unit variance.

    ``log_mgf(a) = sum_j log(sinh(h a_j) / (h a_j))``, evaluated stably (series near 0).
    """

    def __init__(
        self, dim: int, half_width: float = math.sqrt(3.0), *, dtype=torch.float64, device="cpu"
    ):
        _init_coordinates(self, dim, dtype, device)
        self.half_width = check_real("half_width", half_width, positive=True)

    def sample(self, n, *, generator=None):
        _check_sample(self, n, generator)
        u = torch.rand(n, self.dim, generator=generator, dtype=self.dtype, device=self.device)
        return (2 * u - 1) * self.half_width

    def log_mgf(self, a):
        ha = self.half_width * a
        small = ha.abs() < 0.05
        # Each branch gets safe inputs (no NaN gradients); the series is written in (h a)^2 so that it
        # stays smooth at 0 (autograd Hessians there give the variance h^2 / 3).
        y = torch.where(small, ha, torch.zeros_like(ha)) ** 2
        xl = torch.where(small, torch.ones_like(ha), ha.abs())
        series = y / 6 - y**2 / 180 + y**3 / 2835
        large = xl + torch.log(-torch.expm1(-2 * xl)) - torch.log(2 * xl)
        return torch.where(small, series, large).sum(-1)


class GaussianMixtureMeasure(TokenMeasure):
    """A finite mixture ``sum_k pi_k N(m_k, Gamma_k)`` on R^D: sub-Gaussian, but its limit is not affine.

    Parameters
    ----------
    means : Tensor, shape (K, D)
    covs : Tensor, shape (K, D, D), each symmetric PSD
    probs : Tensor, shape (K,), non-negative, summing to one (to 1e-12 relative)
    """

    def __init__(self, means, covs, probs):
        means = as_tensor_arg("means", means)
        covs = as_tensor_arg("covs", covs)
        probs = as_tensor_arg("probs", probs)
        if means.dim() != 2:
            raise ValueError(f"means must have shape (K, D), got {tuple(means.shape)}")
        K, D = means.shape
        if covs.shape != (K, D, D):
            raise ValueError(
                f"covs must have shape (K, D, D) = ({K}, {D}, {D}) to match means "
                f"{tuple(means.shape)}, got {tuple(covs.shape)}"
            )
        if probs.shape != (K,):
            raise ValueError(
                f"probs must have shape (K,) = ({K},) to match means {tuple(means.shape)}, "
                f"got {tuple(probs.shape)}"
            )
        check_psd("covs", covs)
        if bool((probs < 0).any()) or abs(float(probs.sum()) - 1.0) > 1e-12:
            raise ValueError(f"probs must be non-negative and sum to 1, got {probs.tolist()}")
        check_same_dtype_device({"means": means, "covs": covs, "probs": probs})
        self.components = [GaussianMeasure(means[k], covs[k]) for k in range(K)]
        self.means, self.covs, self.probs = means, covs, probs
        self.dim, self.dtype, self.device = D, means.dtype, means.device

    def sample(self, n, *, generator=None):
        _check_sample(self, n, generator)
        comp = torch.multinomial(self.probs, n, replacement=True, generator=generator)  # (n,)
        g = torch.randn(n, self.dim, generator=generator, dtype=self.dtype, device=self.device)
        factors = torch.stack([c._factor for c in self.components])  # (K, D, D)
        return self.means[comp] + (factors[comp] @ g.unsqueeze(-1)).squeeze(-1)

    def log_mgf(self, a):
        per = torch.stack([c.log_mgf(a) for c in self.components], dim=-1)  # (..., K)
        return torch.logsumexp(per + torch.log(self.probs), dim=-1)


class StudentTMeasure(TokenMeasure):
    """Independent Student-t coordinates with ``df`` degrees of freedom (centred when df > 1).

    Heavy-tailed: ``E exp(a^T X) = +inf`` for every ``a != 0``, so no infinite-prompt limit of the
    exponential-tilt form exists; ``log_mgf`` returns ``+inf`` there. Sampling uses the inverse CDF
    (``scipy.special.stdtrit``) of uniforms drawn from ``generator``.
    """

    has_finite_mgf = False
    log_mgf = _infinite_log_mgf

    def __init__(self, dim: int, df: float, *, dtype=torch.float64, device="cpu"):
        _init_coordinates(self, dim, dtype, device)
        self.df = check_real("df", df, positive=True)

    def sample(self, n, *, generator=None):
        from scipy.special import stdtrit

        _check_sample(self, n, generator)
        u = torch.rand(n, self.dim, generator=generator, dtype=torch.float64)
        u = u.clamp(1e-300, 1 - 1e-16)  # rand is in [0, 1); the inverse CDF needs the open interval
        return torch.from_numpy(stdtrit(self.df, u.numpy())).to(self.dtype).to(self.device)


class LogNormalMeasure(TokenMeasure):
    """Independent centred log-normal coordinates ``exp(s G) - exp(s^2/2)``, G standard normal.

    All moments are finite, yet the MGF is infinite for every ``a`` with a positive coordinate:
    heavy right tail. ``log_mgf`` returns ``+inf`` for ``a != 0``.
    """

    has_finite_mgf = False
    log_mgf = _infinite_log_mgf

    def __init__(self, dim: int, s: float = 1.0, *, dtype=torch.float64, device="cpu"):
        _init_coordinates(self, dim, dtype, device)
        self.s = check_real("s", s, positive=True)

    def sample(self, n, *, generator=None):
        _check_sample(self, n, generator)
        g = torch.randn(n, self.dim, generator=generator, dtype=self.dtype, device=self.device)
        return torch.exp(self.s * g) - math.exp(self.s**2 / 2)


_NO_MEASURE = object()


def _check_limit_args(queries, U, V, *, measure=_NO_MEASURE, mean=None, cov=None, min_dim=1):
    """queries (..., D), U (D, D), V (D_out, D) of one dtype and device, with D that of most of them and of
    the ``measure`` (whose MGF must be finite) or of ``mean`` and ``cov``: so one wrong argument is the
    one an error names."""
    if measure is _NO_MEASURE:
        measure = None
    else:
        check_measure(measure, finite_mgf=True)
    queries = as_tensor_arg("queries", queries, min_dim=min_dim)
    U, V = as_tensor_arg("U", U), as_tensor_arg("V", V)
    sizes = {"queries": queries.shape[-1], "U": U.shape[-1] if U.dim() else 0}
    sizes["V"] = V.shape[-1] if V.dim() else 0
    if measure is not None:
        sizes["the measure"] = measure.dim
    else:
        sizes.update(mean=mean.shape[-1], cov=cov.shape[-1])
    D, agree = common_dim(sizes)
    if queries.shape[-1] != D:
        raise ValueError(
            f"queries must have last dimension D = {D} (that of {agree}), got {tuple(queries.shape)}"
        )
    check_matrix("U", U, D, D)
    check_matrix("V", V, None, D)
    check_same_dtype_device({"queries": queries, "U": U, "V": V})
    if measure is not None and queries.dtype != measure.dtype:
        raise ValueError(
            f"queries has dtype {queries.dtype} but the measure has dtype {measure.dtype}"
        )


def _check_attention_limit(measure, queries, U, V):
    _check_limit_args(queries, U, V, measure=measure)


@validated_by(_check_attention_limit)
def attention_limit(measure: TokenMeasure, queries, U, V):
    """Infinite-prompt softmax attention ``T_{U,V}[mu](z) = V grad Lambda_mu(U z)`` (paper Section 2).

    The tilted mean ``grad Lambda_mu`` comes from ``measure.tilted_mean``: automatic differentiation of
    ``log_mgf`` in general, the closed form ``m + Gamma a`` of Lemma 2.1 for :class:`GaussianMeasure`.

    Parameters
    ----------
    measure : TokenMeasure
        The token law ``mu`` (any measure with a finite log-MGF).
    queries : Tensor, shape (..., Q, D)
    U : Tensor, shape (D, D)
    V : Tensor, shape (D_out, D)

    Returns
    -------
    Tensor, shape (..., Q, D_out). Exact (to rounding) for Gaussian and empirical measures; for an
    empirical measure it equals :func:`softlin.softmax_attention` on its atoms.

    Raises
    ------
    TypeError, ValueError
        Non-tensor or mismatched inputs; a measure without a finite MGF.
    """
    return measure.tilted_mean(queries @ U.mT) @ V.mT


@validated_by(_check_attention_limit)
def linear_attention_limit(measure, queries, U, V):
    """Infinite-prompt normalised linear attention ``V E_mu[X X^T] U z`` (Section 2 of the paper).

    ``E[X X^T] = Cov + m m^T`` is read off the log-MGF at 0 (its gradient and Hessian; the parameters for a
    Gaussian). For ``N(m, Gamma)`` it differs from :func:`attention_limit` by ``V(m - m m^T U z)``, and the
    two agree when ``m = 0`` (Section 2 of the paper).

    Parameters and errors as :func:`attention_limit`; returns (..., Q, D_out).
    """
    zero = torch.zeros(measure.dim, dtype=measure.dtype, device=measure.device)
    m, C = measure.tilted_mean(zero), measure.tilted_covariance(zero)
    return queries @ U.mT @ (C + torch.outer(m, m)) @ V.mT


def _check_gaussian_limit(queries, U, V, mean, cov):
    """queries (..., Q, D), U (D, D), V (D_out, D), mean (..., D) and cov (..., D, D) symmetric PSD."""
    mean, cov = as_tensor_arg("mean", mean, min_dim=1), as_tensor_arg("cov", cov, min_dim=2)
    _check_limit_args(queries, U, V, mean=mean, cov=cov, min_dim=2)
    D, lead = queries.shape[-1], tuple(queries.shape[:-2])
    for name, x, shape in (("mean", mean, lead + (D,)), ("cov", cov, lead + (D, D))):
        if tuple(x.shape) != shape:
            raise ValueError(
                f"{name} must have shape {shape} to match queries {tuple(queries.shape)}, "
                f"got {tuple(x.shape)}"
            )
    check_same_dtype_device({"queries": queries, "mean": mean, "cov": cov})
    check_psd("cov", cov)


@validated_by(_check_gaussian_limit)
def gaussian_attention_limit(queries, U, V, mean, cov):
    """Infinite-prompt softmax attention for Gaussian tokens (Lemma 2.1): ``z -> V (mean + cov U z)``.

    For tokens distributed as ``N(mean, cov)``, softmax attention over a prompt of length L converges,
    as L grows, to this affine map of the query.

    Parameters
    ----------
    queries : Tensor, shape (..., Q, D)
    U : Tensor, shape (D, D)          merged key-query matrix, score(z_i, z) = z_i^T U z
    V : Tensor, shape (D_out, D)      value matrix
    mean : Tensor, shape (..., D)     same leading dimensions as ``queries`` (no broadcasting)
    cov : Tensor, shape (..., D, D)   symmetric positive semi-definite; may be singular

    Returns
    -------
    Tensor, shape (..., Q, D_out)

    Raises
    ------
    TypeError, ValueError
        If shapes disagree, or cov is not symmetric PSD (the message names the argument).
    """
    tilted = mean.unsqueeze(-2) + queries @ U.mT @ cov.mT  # (..., Q, D): m + Gamma U z
    return tilted @ V.mT


def gauss_hermite_rule(mean, cov, n_nodes: int):
    """Tensor-product Gauss-Hermite rule for ``N(mean, cov)``: nodes and weights summing to one.

    With ``cov = B B^T`` (``B`` of shape (D, r), :func:`gaussian_range_factor`) and the n-point rule
    ``(t_k, w_k)`` for the weight ``exp(-t^2)`` (``numpy.polynomial.hermite.hermgauss``), the nodes are
    ``mean + B sqrt(2) (t_{k_1}, ..., t_{k_r})`` with weights ``prod_j w_{k_j} / pi^{r/2}``. Then
    ``sum_k weights_k f(nodes_k)`` equals ``E f(X)``, ``X ~ N(mean, cov)``, when ``f`` composed with ``B`` is a
    polynomial of degree at most ``2n - 1`` in each coordinate; for entire functions such as ``exp(a^T x)``
    the error falls faster than geometrically in ``n``. A rule is a weighted prompt: with ``weights`` it
    goes straight into :func:`softlin.softmax_attention` or :class:`EmpiricalMeasure`.

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
        Bad ``mean`` or ``cov`` (as :class:`GaussianMeasure`), non-positive ``n_nodes``, or more than
        ``MAX_QUADRATURE_NODES`` nodes.
    """
    mu = GaussianMeasure(mean, cov)  # validates
    check_positive_int("n_nodes", n_nodes)
    B = gaussian_range_factor(mu.cov)  # (D, r)
    r = B.shape[1]
    if n_nodes**r > MAX_QUADRATURE_NODES:
        raise ValueError(
            f"n_nodes ** rank(cov) = {n_nodes}^{r} exceeds {MAX_QUADRATURE_NODES} nodes; use "
            "fewer n_nodes (tensor-product quadrature is meant for rank <= 3)"
        )
    kw = {"dtype": mu.dtype, "device": mu.device}
    if r == 0:
        return mu.mean.unsqueeze(0).clone(), torch.ones(1, **kw)
    t, w = np.polynomial.hermite.hermgauss(n_nodes)
    g1, w1 = math.sqrt(2.0) * t, w / math.sqrt(math.pi)  # one standard normal coordinate
    grid = np.stack(np.meshgrid(*([g1] * r), indexing="ij"), axis=-1).reshape(-1, r)  # (n^r, r)
    w_grid = np.stack(np.meshgrid(*([w1] * r), indexing="ij"), axis=-1).reshape(-1, r)
    nodes = mu.mean + torch.as_tensor(grid, **kw) @ B.mT  # (n^r, D)
    return nodes, torch.as_tensor(np.prod(w_grid, axis=1), **kw)
