"""In-context linear regression with one attention layer (paper Section 5).

Data (:class:`PromptSampler`). A task ``w ~ N(0, tau2 I_d)`` per prompt; ``L`` tokens ``z_i = (x_i, y_i)``
in ``R^D``, ``D = d + 1``, with ``x_i ~ N(0, Sigma)`` and ``y_i = w^T x_i`` (plus label noise of variance
``noise_var``); the query token ``z_q = (x_q, 0)``, ``x_q ~ N(0, Sigma)``, and the target ``w^T x_q`` (plus
noise). The theory takes ``tau2 = 1`` and no noise, the paper's experiment ``tau2 = 1/d``, noise 0.1.

Reduced model (Section 5.2): ``U = diag(A, 0)``, ``V = b e_D e_D^T``, so the prediction is ``b`` times the
label of the prompt tilted towards ``(A x_q, 0)``, ``b sum_i softmax_i(x_i^T A x_q) y_i``; by Lemma 2.1
its infinite-prompt limit is ``b w^T Sigma A x_q`` and its risk (Section 5.3)
``R_inf(A, b) = 1/2 tr((b Sigma A - I) Sigma (b Sigma A - I)^T)`` (:func:`infinite_prompt_risk`), zero at
``b* = tr(Sigma^-2)^(1/4)``, ``A* = Sigma^-1 / b*`` (:func:`bayes_optimal_parameters`).

The reduced-model risks are *half* mean squared errors (the theory). The paper's experiment (the full
model, its protocol, SGD and evaluation) is :mod:`softlin.experiment`, which builds on this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from ._checks import (
    as_real_array,
    as_tensor_arg,
    check_bool,
    check_choice,
    check_draws,
    check_dtype_device,
    check_generator,
    check_matrix,
    check_memory,
    check_positive_int,
    check_real,
    check_same_dtype_device,
    check_sigma,
    common_dim,
    validated_by,
)
from ._progress import progress
from .attention import TiltedSums, linear_mean, tilted_mean

__all__ = [
    "LargePromptConstants",
    "PromptSampler",
    "RegressionPrompts",
    "Trajectory",
    "balanced_initialisation",
    "bayes_optimal_parameters",  # limit
    "conditional_risk",
    "finite_prompt_risk",  # reduced model
    "infinite_prompt_flow",
    "infinite_prompt_risk",
    "infinite_prompt_risk_grad",
    "initialisation_bound",
    "input_covariances",
    "kms_covariance",
    "large_prompt_constants",
    "linear_class_optimum",
    "linear_finite_prompt_risk",
    "reduced_attention_matrices",
    "risk_fluctuation_constant",
    "sample_prompts",  # data
]

#: The two attention models of Section 5: softmax and (normalised) linear attention.
KINDS = ("softmax", "linear")


_NO_SIGMA = object()  # _reduced_args without a covariance


def _reduced_args(A, b, Sigma=_NO_SIGMA, *, d=None, names=("A", "b")):
    """(A (d, d), b scalar, Sigma (d, d) positive definite, when given), checked with the shared
    validators; ``names``: the caller's names of A and b (A0 and b0 for a start)."""
    if Sigma is not _NO_SIGMA:
        Sigma = check_sigma(Sigma)
        d = Sigma.shape[0]
    nA, nb = names
    A, b = as_tensor_arg(nA, A), as_tensor_arg(nb, b)
    check_matrix(nA, A, d, d)
    if b.dim() != 0:
        raise ValueError(
            f"{nb} must be a scalar (0-dimensional) tensor, got shape {tuple(b.shape)}"
        )
    check_same_dtype_device({nA: A, nb: b, "Sigma": None if Sigma is _NO_SIGMA else Sigma})
    return A, b, Sigma


# --------------------------------------------------------------------------------------------------
# data


def kms_covariance(d, rho, *, dtype=torch.float64, device=None):
    """Kac-Murdock-Szegő (AR(1), Toeplitz) covariance ``Sigma_ij = rho^|i - j|``, shape (d, d); the
    experiment's is ``d = 5, rho = 0.5``. ValueError unless ``d >= 1`` and ``|rho| < 1`` (positive definite).
    """
    check_positive_int("d", d)
    rho = check_real("rho", rho)
    if not -1 < rho < 1:
        raise ValueError(f"rho must lie in (-1, 1) for a positive definite KMS matrix, got {rho}")
    check_dtype_device(dtype, device)
    check_memory(f"d = {d}", 3 * d * d * 8, device=device, what="a (d, d) matrix")
    i = torch.arange(d, device=device)
    return torch.tensor(rho, dtype=dtype, device=device) ** (i[:, None] - i[None, :]).abs().to(
        dtype
    )


@dataclass
class RegressionPrompts:
    """A batch of regression prompts: tokens (B, L, D) ``(x_i, y_i)``, queries (B, 1, D) ``(x_q, 0)``,
    targets (B,) ``w^T x_q`` (+ noise), tasks (B, d) ``w``."""

    tokens: torch.Tensor
    queries: torch.Tensor
    targets: torch.Tensor
    tasks: torch.Tensor

    @property
    def x(self):  # prompt inputs (B, L, d), a view
        return self.tokens[..., :-1]

    @property
    def y(self):  # prompt labels (B, L), a view
        return self.tokens[..., -1]

    @property
    def x_query(self):  # query inputs (B, d), a view
        return self.queries[:, 0, :-1]


class PromptSampler:
    """The prompt sampler of the regression data: batches drawn into buffers allocated once.

    Each :meth:`sample` overwrites the previous batch. One batched product ``M_w^T G`` of standard normals
    ``G`` (B, D, L + 1) (column ``L`` is the query, row ``d`` the label noise) with
    ``M_w^T = [[C, 0], [w^T C, s]]``, ``Sigma = C C^T``, gives the tokens laid out (B, D, L + 1): the
    batch's ``tokens`` and ``queries`` are transposed views of it, whose rows over tokens are contiguous.

    Parameters
    ----------
    Sigma : Tensor (d, d), positive definite; sets dtype and device.
    L, batch_size : int, prompt length and prompts per batch.
    tau2 : float > 0, task prior variance (``w ~ N(0, tau2 I)``); noise_var : float >= 0.
    released : bool, draw as the authors' released generator does instead: prompt inputs with covariance
        ``(C C)(C C)^T`` (the factor applied twice), query inputs ``N(0, I)`` (the released script of the paper's code).
    """

    def __init__(self, Sigma, L, batch_size, *, tau2=1.0, noise_var=0.0, released=False):
        Sigma = check_sigma(Sigma)
        check_positive_int("L", L)
        check_positive_int("batch_size", batch_size)
        self.tau2 = check_real("tau2", tau2, positive=True)
        self.noise_var = check_real("noise_var", noise_var, nonneg=True)
        check_bool("released", released)
        d = Sigma.shape[0]
        n_bytes = batch_size * (2 * (d + 1) * (L + 1) + (d + 1) ** 2) * Sigma.element_size()
        check_memory(
            f"L = {L}, batch_size = {batch_size}", n_bytes, device=Sigma.device, what="the prompts"
        )
        self._build(Sigma, L, batch_size, self.tau2, self.noise_var, released)

    @classmethod
    def _trusted(cls, Sigma, L, batch_size, tau2=1.0, noise_var=0.0, released=False):
        """A sampler from checked arguments (a caller that has validated them)."""
        return cls.__new__(cls)._build(Sigma, L, batch_size, tau2, noise_var, released)

    def _build(self, Sigma, L, batch_size, tau2, noise_var, released):
        self.Sigma, self.L, self.batch_size, self.released = Sigma, L, batch_size, bool(released)
        self.tau2, self.noise_var = float(tau2), float(noise_var)
        d = self.d = Sigma.shape[0]
        kw = {"dtype": Sigma.dtype, "device": Sigma.device}
        C = torch.linalg.cholesky(Sigma)
        self._factor = C @ C if self.released else C  # the prompt inputs are factor @ g
        self._normals = torch.empty(batch_size, d + 1, L + 1, **kw)
        self._mix = torch.zeros(batch_size, d + 1, d + 1, **kw)  # M_w^T for each prompt
        self._mix[:, :d, :d] = self._factor
        self._mix[:, d, d] = math.sqrt(self.noise_var)
        self._out = torch.empty(batch_size, d + 1, L + 1, **kw)
        self._tasks = torch.empty(batch_size, d, **kw)
        self._targets = torch.empty(batch_size, **kw)
        self.prompts = RegressionPrompts(
            self._out[:, :, :L].mT, self._out[:, :, L:].mT, self._targets, self._tasks
        )
        return self

    def sample(self, generator=None) -> RegressionPrompts:
        """Refill the buffers with a fresh batch and return it (views into the buffers)."""
        check_generator(generator)
        d, L = self.d, self.L
        torch.randn(self._tasks.shape, generator=generator, out=self._tasks).mul_(
            math.sqrt(self.tau2)
        )
        torch.randn(self._normals.shape, generator=generator, out=self._normals)
        self._mix[:, d, :d] = self._tasks @ self._factor  # w^T factor: the label row
        # (B, D, L + 1): columns (x, w^T x + noise)
        torch.bmm(self._mix, self._normals, out=self._out)
        if self.released:  # query input N(0, I), its label from it
            xq = self._normals[:, :d, L]
            self._out[:, :d, L] = xq
            self._out[:, d, L] = (xq * self._tasks).sum(-1) + self._mix[:, d, d] * self._normals[
                :, d, L
            ]
        self._targets.copy_(self._out[:, d, L])
        self._out[:, d, L] = 0.0  # the query token carries no label
        return self.prompts


def sample_prompts(
    Sigma, L, batch_size, *, tau2=1.0, noise_var=0.0, generator=None, released=False
):
    """A fresh batch of regression prompts in new memory (:class:`PromptSampler`, same arguments)."""
    return PromptSampler(
        Sigma, L, batch_size, tau2=tau2, noise_var=noise_var, released=released
    ).sample(generator)


# --------------------------------------------------------------------------------------------------
# reduced model


def reduced_attention_matrices(A, b):
    """The block matrices ``U = diag(A, 0)`` and ``V = b e_D e_D^T`` (both D x D) of Section 5.2.

    With them :func:`softlin.softmax_attention` returns ``(0, ..., 0, y_hat_L)`` for each query.
    """
    A = as_tensor_arg("A", A)
    check_matrix("A", A, A.shape[0] if A.dim() == 2 else None, None)
    d = A.shape[0]
    A, b, _ = _reduced_args(A, b, d=d)
    U = torch.zeros(d + 1, d + 1, dtype=A.dtype, device=A.device)
    U[:d, :d] = A
    V = torch.zeros_like(U)
    V[d, d] = b
    return U, V


def _conditional_risk(A, b, x, x_query, kind, tau2, noise_var):
    """Half risk given the inputs, task and noise integrated out, for n parameter sets at once.

    A (n, d, d), b (n,), x (B, L, d), x_query (B, d) -> (B, n). The prediction is ``b p^T y`` with
    ``y = x w + eps``, so given x it is ``w^T v + b p^T eps``, ``v = b sum_i p_i x_i``."""
    a = torch.einsum("nij,bj->bni", A, x_query)  # (B, n, d): the tilt direction A x_q of each set
    if kind == "linear":
        mean = linear_mean(x, a)  # (B, n, d)
        sum_p2 = ((a @ x.mT) ** 2).sum(-1) / x.shape[-2] ** 2  # weights p_i = x_i^T A x_q / L
    elif noise_var:
        moments = TiltedSums(a).update(x).moments()
        mean, sum_p2 = moments.mean, 1.0 / moments.ess  # sum_i p_i^2 = 1 / ESS
    else:
        mean, sum_p2 = tilted_mean(x, a), 0.0
    v = b[:, None] * mean  # (B, n, d)
    risk = tau2 * ((v - x_query[:, None]) ** 2).sum(-1)
    return 0.5 * (risk + noise_var * (b * b * sum_p2 + 1.0))


def conditional_risk(A, b, x, x_query, *, kind="softmax", tau2=1.0, noise_var=0.0):
    """Per-prompt half risk of the reduced model with the task and the noise integrated out exactly.

    ``E[1/2 (y_hat - y_q)^2 | x] = 1/2 (tau2 ||v - x_q||^2 + noise_var (b^2 sum_i p_i^2 + 1))`` with
    ``v = b sum_i p_i x_i``; its average over prompts is ``R_L(A, b)``. Differentiable in ``A`` and ``b``.

    Parameters: A (d, d); b scalar; x (B, L, d) prompt inputs; x_query (B, d). Returns a Tensor (B,).
    """
    check_choice("kind", kind, KINDS)
    x, x_query = as_tensor_arg("x", x), as_tensor_arg("x_query", x_query)
    A = as_tensor_arg("A", A)
    named = {"A": A, "x": x, "x_query": x_query}
    d, agree = common_dim({k: v.shape[-1] if v.dim() else 0 for k, v in named.items()})
    if x.dim() != 3 or x.shape[1] == 0 or x.shape[-1] != d:
        raise ValueError(
            f"x must have shape (B, L, d) with L >= 1 and d = {d} (that of {agree}), "
            f"got {tuple(x.shape)}"
        )
    B = x.shape[0]
    if x_query.shape != (B, d):
        raise ValueError(
            f"x_query must have shape (B, d) = ({B}, {d}) to match x {tuple(x.shape)}, "
            f"got {tuple(x_query.shape)}"
        )
    A, b, _ = _reduced_args(A, b, d=d)
    check_same_dtype_device({"x": x, "x_query": x_query, "A": A})
    tau2 = check_real("tau2", tau2, positive=True)
    noise_var = check_real("noise_var", noise_var, nonneg=True)
    return _conditional_risk(A[None], b[None], x, x_query, kind, tau2, noise_var)[:, 0]


def finite_prompt_risk(
    A,
    b,
    Sigma,
    L,
    *,
    n_prompts,
    generator=None,
    kind="softmax",
    tau2=1.0,
    noise_var=0.0,
    batch_size=4096,
    dtype=None,
):
    """Monte Carlo estimate of the finite-prompt risk ``R_L(A, b)`` of the reduced model (half MSE).

    Averages :func:`conditional_risk` over ``n_prompts`` prompts of :class:`PromptSampler` drawn in batches.
    Several parameter sets (``A`` (n, d, d), ``b`` (n,)) share the same prompts (common random numbers), so
    their differences are far more precise than each value. ``dtype`` of the simulation defaults to that of
    ``Sigma`` (float32 quarters the cost of the draws). Per-prompt risks are heavy-tailed when ``A`` is
    large: use many prompts.

    Returns
    -------
    (estimate, standard_error) : floats, or two float64 tensors (n,) for batched parameters.
    """
    Sigma = check_sigma(Sigma)
    d = Sigma.shape[0]
    batched = isinstance(A, torch.Tensor) and A.dim() == 3
    if batched:
        As, bs = as_tensor_arg("A", A), as_tensor_arg("b", b)
        if As.shape[1:] != (d, d) or tuple(bs.shape) != (As.shape[0],):
            raise ValueError(
                f"batched A must have shape (n, {d}, {d}) and b shape (n,), got "
                f"{tuple(As.shape)} and {tuple(bs.shape)}"
            )
    else:
        A, b, _ = _reduced_args(A, b, d=d)
        As, bs = A[None], b[None]
    for name, value in (("L", L), ("n_prompts", n_prompts), ("batch_size", batch_size)):
        check_positive_int(name, value)
    if n_prompts < 2:
        raise ValueError(
            f"n_prompts must be at least 2 to estimate a standard error, got {n_prompts}"
        )
    check_choice("kind", kind, KINDS)
    check_generator(generator)
    tau2 = check_real("tau2", tau2, positive=True)
    noise_var = check_real("noise_var", noise_var, nonneg=True)
    check_dtype_device(dtype, None, optional_dtype=True)
    dtype = Sigma.dtype if dtype is None else dtype
    sizes = f"L = {L}, n_prompts = {n_prompts}, batch_size = {batch_size}"
    n = min(batch_size, n_prompts)
    check_draws(sizes, L * n_prompts, what="prompt tokens")
    per_prompt = 2 * (d + 1) * (L + 1) + d + 3 * As.shape[0] * (L + d)  # tokens, then scores
    check_memory(sizes, n * per_prompt * 8, device=Sigma.device, what="one batch of prompts")
    As, bs = (t.detach().to(dtype=dtype, device=Sigma.device) for t in (As, bs))
    total = torch.zeros(As.shape[0], dtype=torch.float64)
    total_sq = torch.zeros_like(total)
    sampler = None
    with torch.no_grad():
        for done in progress(range(0, n_prompts, batch_size), work=n_prompts * L * (d + 1)):
            n = min(batch_size, n_prompts - done)
            if sampler is None or sampler.batch_size != n:
                sampler = PromptSampler._trusted(Sigma.to(dtype), L, n)
            p = sampler.sample(generator)
            r = _conditional_risk(As, bs, p.x, p.x_query, kind, tau2, noise_var).double().cpu()
            total += r.sum(0)
            total_sq += (r * r).sum(0)
    mean = total / n_prompts
    var = (total_sq / n_prompts - mean * mean).clamp(min=0.0) * n_prompts / (n_prompts - 1)
    se = torch.sqrt(var / n_prompts)
    return (mean, se) if batched else (float(mean[0]), float(se[0]))


def linear_finite_prompt_risk(A, b, Sigma, L, *, tau2=1.0, noise_var=0.0):
    """Exact finite-prompt half risk of the reduced *linear* model (Gaussian fourth moments).

    With ``C_L = (1/L) sum_i x_i x_i^T``, ``E[C_L^2] = (1 + 1/L) Sigma^2 + tr(Sigma) Sigma / L`` (the
    effective covariance of Zhang, Frei and Bartlett), so

        R_L^lin = 1/2 [tau2 (b^2 tr(A^T E[C_L^2] A Sigma) - 2 b tr(Sigma A Sigma) + tr Sigma)
                       + noise_var (b^2 tr(A^T Sigma A Sigma) / L + 1)].

    Returns a scalar Tensor, differentiable in ``A`` and ``b``; it tends to :func:`infinite_prompt_risk`.
    """
    A, b, Sigma = _reduced_args(A, b, Sigma)
    check_positive_int("L", L)
    tau2 = check_real("tau2", tau2, positive=True)
    noise_var = check_real("noise_var", noise_var, nonneg=True)
    G = (1 + 1 / L) * Sigma @ Sigma + torch.trace(Sigma) * Sigma / L
    signal = b * b * torch.trace(A.T @ G @ A @ Sigma) - 2 * b * torch.trace(Sigma @ A @ Sigma)
    noise = b * b * torch.trace(A.T @ Sigma @ A @ Sigma) / L + 1.0
    return 0.5 * (tau2 * (signal + torch.trace(Sigma)) + noise_var * noise)


def _check_covariances(Sigma, *, released=False):
    check_sigma(Sigma)
    check_bool("released", released)


@validated_by(_check_covariances)
def input_covariances(Sigma, *, released=False):
    """The covariances of the prompt inputs and of the query input, ((d, d), (d, d)).

    ``(Sigma, Sigma)`` for the data model of Section 5; with ``released``, those of the authors' released
    generator (:class:`PromptSampler`): ``(C C)(C C)^T`` with ``Sigma = C C^T`` for the prompt, ``I`` for
    the query.
    """
    if not released:
        return Sigma, Sigma
    C = torch.linalg.cholesky(Sigma)
    return (C @ C) @ (C @ C).T, torch.eye(Sigma.shape[0], dtype=Sigma.dtype, device=Sigma.device)


def _check_optimum(Sigma, L, *, tau2=1.0, noise_var=0.0, released=False):
    _check_covariances(Sigma, released=released)
    check_positive_int("L", L)
    check_real("tau2", tau2, positive=True)
    check_real("noise_var", noise_var, nonneg=True)


@validated_by(_check_optimum)
def linear_class_optimum(Sigma, L, *, tau2=1.0, noise_var=0.0, released=False):
    """The best single-layer linear attention at prompt length ``L``, and its mean squared error.

    Any linear attention (any ``Q, K, V, o``; the scores divided by ``L``) predicts
    ``h^T P x_q + e`` with ``h = (1/L) sum_i y_i x_i``, ``P = v_y U_xx + v_x U_yx`` and a part
    ``e`` even in the task and noise (``(w, noise) -> -(w, noise)`` flips every label), which is
    uncorrelated with the target and with the odd part, so it only adds error; every ``P`` is
    reachable. With the prompt and query input covariances ``S_p``, ``S_q``
    (:func:`input_covariances`) and Gaussian fourth moments,
    ``H = E[h h^T] = tau2 ((1 + 1/L) S_p^2 + tr(S_p) S_p / L) + noise_var S_p / L``, the error
    ``noise_var + tau2 tr S_q + tr(S_q P^T H P) - 2 tau2 tr(S_q P^T S_p)`` is least at
    ``P* = tau2 H^-1 S_p``, where it is ``noise_var + tau2 tr S_q - tau2^2 tr(S_q S_p H^-1 S_p)``.
    This is the finite-prompt analogue of the effective covariance of Zhang, Frei and Bartlett; as
    ``L -> inf`` (``released`` False) it tends to ``noise_var``, the Bayes risk.

    Parameters
    ----------
    Sigma : Tensor (d, d), positive definite; L : int >= 1; tau2 > 0, noise_var >= 0 : float.
    released : bool, the released generator's input covariances (:class:`PromptSampler`).

    Returns
    -------
    (P* Tensor (d, d), mse float): the plain mean squared error (no 1/2, the experiment's loss),
    target noise included.
    """
    S_p, S_q = input_covariances.kernel(Sigma, released=released)
    H = tau2 * ((1 + 1 / L) * S_p @ S_p + torch.trace(S_p) * S_p / L) + noise_var * S_p / L
    P = tau2 * torch.linalg.solve(H, S_p)  # H^-1 S_p, times tau2
    mse = noise_var + tau2 * torch.trace(S_q) - tau2 * torch.trace(S_q @ S_p @ P)
    return P, float(mse)


def risk_fluctuation_constant(A, b, Sigma, *, tau2=1.0, noise_var=0.0, allow_infinite=False):
    """``lim L E 1/2 (y_hat_L - y_hat_inf)^2``: the delta-method constant, averaged over w and x_q.

    For a fixed task and query ``L E(y_hat_L - y_hat_inf)^2 -> exp(a^T Sigma a) b^2 (w^T Sigma w +
    noise_var + (w^T Sigma a)^2)``, ``a = A x_q`` (chapter 3's constant with the token covariance
    ``Gamma_w``, whose label entry is ``w^T Sigma w + noise_var``); half its average over
    ``w ~ N(0, tau2 I)`` and ``x_q ~ N(0, Sigma)`` is, with ``M = A^T Sigma A``, ``N = A^T Sigma^2 A`` and
    ``S = (Sigma^-1 - 2 M)^-1``,

        C = 1/2 b^2 det(I - 2 M Sigma)^(-1/2) (tau2 tr Sigma + noise_var + tau2 tr(N S)),

    finite if and only if ``Sigma^-1 - 2 M`` is positive definite. Otherwise the average over queries
    diverges (the error decays more slowly than 1/L): a ValueError that says so, or ``math.inf`` with
    ``allow_infinite=True`` (a sweep across the threshold). Where the infinite-prompt prediction is
    exact (``b Sigma A = I``) it is ``lim L (R_L - R_inf)``.
    """
    A, b, Sigma = _reduced_args(A, b, Sigma)
    tau2 = check_real("tau2", tau2, positive=True)
    noise_var = check_real("noise_var", noise_var, nonneg=True)
    check_bool("allow_infinite", allow_infinite)
    M = A.T @ Sigma @ A
    prec = torch.linalg.inv(Sigma) - 2 * M
    prec = 0.5 * (prec + prec.T)
    lam = float(torch.linalg.eigvalsh(prec).min())
    if lam <= 0 and allow_infinite:
        return math.inf
    if lam <= 0:
        raise ValueError(
            f"the fluctuation constant is infinite at this A (and b): Sigma^-1 - 2 A^T Sigma A has "
            f"smallest eigenvalue {lam:.3g} <= 0, so the average of exp(x_q^T A^T Sigma A x_q) over "
            "queries diverges and L (R_L - R_inf) grows without bound (the risk gap decays more slowly "
            "than 1/L); pass allow_infinite=True to get math.inf"
        )
    det = torch.linalg.det(torch.eye(A.shape[0], dtype=A.dtype, device=A.device) - 2 * M @ Sigma)
    NS = A.T @ Sigma @ Sigma @ A @ torch.linalg.inv(prec)
    inner = tau2 * torch.trace(Sigma) + noise_var + tau2 * torch.trace(NS)
    return float(0.5 * b**2 * det**-0.5 * inner)


# --------------------------------------------------------------------------------------------------
# the large-prompt constants of the paper's experiment


class LargePromptConstants(NamedTuple):
    """``L x (excess over the Bayes risk) -> C`` for the best model of each class (plain MSE)."""

    linear: float  #: C_lin, of the best linear attention (the closed-form class optimum)
    softmax: float  #: C_soft, of the reduced softmax model at its best scale (delta method)
    scale: float  #: r*, the best scale of the curve (r A*, b* / r): A = r* A*, b = b* / r*
    bayes: float  #: the Bayes risk's own constant, noise_var d (subtracted from both)
    ratio: float  #: C_soft / C_lin: softmax's excess at L is about linear's at L / ratio


def large_prompt_constants(Sigma, *, tau2=1.0, noise_var=0.0):
    """The large-L limits of ``L x (excess over the Bayes risk)`` for linear and softmax attention.

    Linear: the class optimum (:func:`linear_class_optimum`) errs by ``noise_var + (tau2 (d + 1) tr Sigma
    + noise_var d) / L + O(L^-2)``, read off the closed form by Richardson extrapolation at ``L = 10^6``.
    Softmax: on the set ``b Sigma A = I`` (``A = r A*``, ``b = b*/r``) the error exceeds the noise by
    ``V(r) / L``, ``V`` twice :func:`risk_fluctuation_constant` with the noise, finite for
    ``2 r^2 < b*^2``; its minimum over the scale ``r`` is the reduced model's best (the finite-L optimum is
    ``O(1/L)`` away, an ``O(L^-2)`` change). Bayes: ``noise_var + noise_var d / L + O(L^-2)``
    (``E (X^T X)^-1 = Sigma^-1 / (L - d - 1)``), subtracted from both. Prompt and query inputs
    ``N(0, Sigma)``; Sigma (d, d) positive definite, tau2 > 0, noise_var > 0. Returns a
    :class:`LargePromptConstants`.
    """
    from scipy.optimize import minimize_scalar

    Sigma = check_sigma(Sigma)
    tau2 = check_real("tau2", tau2, positive=True)
    s2 = check_real("noise_var", noise_var, positive=True)
    d = Sigma.shape[0]

    def scaled(L):  # L (error of the linear class optimum - noise)
        return L * (linear_class_optimum(Sigma, L, tau2=tau2, noise_var=s2)[1] - s2)

    bayes = s2 * d
    linear = 2 * scaled(2 * 10**6) - scaled(10**6) - bayes
    A_star, b_star = bayes_optimal_parameters(Sigma)

    def excess(r):  # V(r): plain MSE, twice the half risk
        return 2 * risk_fluctuation_constant(r * A_star, b_star / r, Sigma, tau2=tau2, noise_var=s2)

    r_max = float(b_star) / math.sqrt(2)
    best = minimize_scalar(
        excess,
        bounds=(1e-3 * r_max, (1 - 1e-9) * r_max),
        method="bounded",
        options={"xatol": 1e-10},
    )
    softmax = float(best.fun) - bayes
    return LargePromptConstants(linear, softmax, float(best.x), bayes, softmax / linear)


# --------------------------------------------------------------------------------------------------
# infinite-prompt risk and its optimum


def _check_risk(A, b, Sigma, *, tau2=1.0, noise_var=0.0):
    _reduced_args(A, b, Sigma)
    check_real("tau2", tau2, positive=True)
    check_real("noise_var", noise_var, nonneg=True)


@validated_by(_check_risk)
def infinite_prompt_risk(A, b, Sigma, *, tau2=1.0, noise_var=0.0):
    """``R_inf(A, b) = 1/2 tau2 tr((b Sigma A - I) Sigma (b Sigma A - I)^T) + noise_var / 2`` (Section 5.3).

    The half mean squared error of the infinite-prompt prediction ``b w^T Sigma A x_q`` (Lemma 2.1) for
    ``w ~ N(0, tau2 I)`` and target noise of variance ``noise_var`` (noise on the prompt labels does not
    change the limit). A (d, d), b scalar, Sigma (d, d); returns a scalar Tensor, differentiable.
    """
    Delta = b * Sigma @ A - torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
    return 0.5 * tau2 * torch.trace(Delta @ Sigma @ Delta.T) + 0.5 * noise_var


@validated_by(_check_risk)
def infinite_prompt_risk_grad(A, b, Sigma, *, tau2=1.0):
    """Closed-form gradient of :func:`infinite_prompt_risk`; the gradient flow is minus it (Section 5.3).

    ``dR/dA = tau2 (b^2 Sigma^2 A Sigma - b Sigma^2)``, ``dR/db = tau2 (b tr(A^T Sigma^2 A Sigma) -
    tr(A^T Sigma^2))``. Returns (Tensor (d, d), scalar Tensor).
    """
    Sigma2 = Sigma @ Sigma
    S2A = Sigma2 @ A
    return (
        tau2 * (b * b * S2A @ Sigma - b * Sigma2),
        tau2 * (b * torch.trace(A.T @ S2A @ Sigma) - torch.trace(S2A)),
    )


def bayes_optimal_parameters(Sigma):
    """Limit of the balanced flow: ``b* = tr(Sigma^-2)^(1/4)``, ``A* = Sigma^-1 / b*`` (Section 5.3).

    ``b* Sigma A* = I`` (zero infinite-prompt risk) and ``||A*||_F = b*`` (balanced). Returns
    (A* (d, d), b* scalar) in the dtype and device of ``Sigma``.
    """
    Sigma = check_sigma(Sigma)
    Sinv = torch.linalg.inv(Sigma)
    Sinv = 0.5 * (Sinv + Sinv.T)
    b_star = torch.trace(Sinv @ Sinv) ** 0.25
    return Sinv / b_star, b_star


# --------------------------------------------------------------------------------------------------
# dynamics


@dataclass
class Trajectory:
    """Parameters and risk along a training run or a flow: t (n,), A (n, d, d), b (n,), risk (n,)."""

    t: torch.Tensor
    A: torch.Tensor
    b: torch.Tensor
    risk: torch.Tensor

    def invariant(self):
        """The balance ``||A||_F^2 - b^2`` at every recorded time, shape (n,)."""
        return (self.A**2).sum((-1, -2)) - self.b**2

    def distance_to(self, A, b):
        """``sqrt(||A(t) - A||_F^2 + (b(t) - b)^2)`` at every recorded time, shape (n,)."""
        A, b, _ = _reduced_args(A, b, d=self.A.shape[-1])
        check_same_dtype_device({"A": A, "the trajectory": self.A})
        return torch.sqrt(((self.A - A) ** 2).sum((-1, -2)) + (self.b - b) ** 2)


def balanced_initialisation(
    d, alpha, *, rank=None, generator=None, dtype=torch.float64, device=None
):
    """Balanced start of Eq. (9): ``A(0) = alpha Theta Theta^T / ||Theta Theta^T||_F``, ``b(0) = alpha``.

    ``Theta`` is a standard Gaussian (d, rank) matrix (rank 1..d, default d), so ``||A(0)||_F = b(0) =
    alpha``. Returns (A0 (d, d) Tensor, b0 0-d Tensor). TypeError or ValueError for a bad ``d``, ``alpha``
    (not positive), ``rank`` (not in 1..d) or ``generator``.
    """
    check_positive_int("d", d)
    alpha = check_real("alpha", alpha, positive=True)
    rank = d if rank is None else rank
    check_positive_int("rank", rank)
    if rank > d:
        raise ValueError(f"rank must be at most d = {d}, got {rank}")
    check_generator(generator)
    check_dtype_device(dtype, device)
    check_memory(
        f"d = {d}, rank = {rank}", 8 * d * (d + rank), device=device, what="(d, d) matrices"
    )
    theta = torch.randn(d, rank, generator=generator, dtype=dtype, device=device)
    P = theta @ theta.T
    return alpha * P / torch.linalg.matrix_norm(P), torch.tensor(alpha, dtype=dtype, device=device)


def initialisation_bound(Sigma):
    """The displayed sufficient range of Eq. (9): ``alpha < sqrt(2) / (d^(1/4) ||Sigma||_op)`` (0.418 for
    d = 5, KMS 0.5); the flow converges for every ``alpha > 0`` (see chapter 5)."""
    Sigma = check_sigma(Sigma)
    return math.sqrt(2) / (Sigma.shape[0] ** 0.25 * float(torch.linalg.eigvalsh(Sigma).max()))


#: The integrators of ``scipy.integrate.solve_ivp``.
ODE_METHODS = ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA")


def infinite_prompt_flow(
    A0, b0, Sigma, t_eval, *, tau2=1.0, rtol=1e-10, atol=1e-12, method="LSODA"
):
    """Gradient flow ``d(A, b)/dt = -grad R_inf`` from ``(A0, b0)``, with ``scipy.integrate.solve_ivp``.

    The right-hand side is minus :func:`infinite_prompt_risk_grad`; the balance ``||A||_F^2 - b^2`` is
    conserved by the flow (to about ``rtol`` by the solver). ``t_eval``: increasing times >= 0.

    Returns a :class:`Trajectory` (float64, CPU) with ``risk = R_inf``; raises RuntimeError if the solver
    fails.
    """
    from scipy.integrate import solve_ivp

    A0, b0, Sigma = _reduced_args(A0, b0, Sigma, names=("A0", "b0"))
    tau2 = check_real("tau2", tau2, positive=True)
    rtol, atol = check_real("rtol", rtol, positive=True), check_real("atol", atol, positive=True)
    check_choice("method", method, ODE_METHODS)
    t_eval = as_real_array("t_eval", t_eval)
    if t_eval.ndim != 1 or t_eval.size == 0 or np.any(np.diff(t_eval) <= 0) or t_eval[0] < 0:
        raise ValueError(
            f"t_eval must be a non-empty increasing 1-D array of times >= 0, got {t_eval!r}"
        )
    d = Sigma.shape[0]
    S = Sigma.detach().cpu().double()

    def rhs(_t, y):  # the arguments are checked above: the formula alone
        y = torch.from_numpy(y)
        gA, gb = infinite_prompt_risk_grad.kernel(y[:-1].reshape(d, d), y[-1], S, tau2=tau2)
        return -torch.cat([gA.reshape(-1), gb.reshape(1)]).numpy()

    y0 = torch.cat([A0.detach().cpu().double().reshape(-1), b0.detach().cpu().double().reshape(1)])
    sol = solve_ivp(
        rhs,
        (0.0, float(t_eval[-1])),
        y0.numpy(),
        method=method,
        t_eval=t_eval,
        rtol=rtol,
        atol=atol,
    )
    if not sol.success:
        raise RuntimeError(
            f"solve_ivp stopped at t = {sol.t[-1]:.3g} (the flow may diverge): {sol.message}"
        )
    A = torch.from_numpy(sol.y[:-1].T.reshape(-1, d, d).copy())
    b = torch.from_numpy(sol.y[-1].copy())
    Delta = b[:, None, None] * (S @ A) - torch.eye(d, dtype=torch.float64)
    risk = 0.5 * tau2 * torch.einsum("nij,jk,nik->n", Delta, S, Delta)
    return Trajectory(t=torch.from_numpy(sol.t.copy()), A=A, b=b, risk=risk)
