"""In-context linear regression with one attention layer (paper section 5 and its experiment).

Data (paper-notes section 5.1). A task ``w ~ N(0, tau2 I_d)`` is drawn per prompt; the prompt holds ``L``
tokens ``z_i = (x_i, y_i)`` in ``R^D``, ``D = d + 1``, with ``x_i ~ N(0, Sigma)`` and ``y_i = w^T x_i``
(plus optional label noise of variance ``noise_var``); the query token is ``z_q = (x_q, 0)`` with
``x_q ~ N(0, Sigma)`` and the target is ``y_q = w^T x_q`` (plus the same noise). The theory uses
``tau2 = 1`` and no noise; the paper's experiment uses ``tau2 = 1/d`` and ``noise_var = 0.1``.

Reduced model (section 5.2). The merged key-query and value matrices are restricted to
``U = diag(A, 0)`` and ``V = b e_D e_D^T``, so softmax attention predicts

    y_hat_L = b sum_i softmax_i(x_i^T A x_q) y_i ,

and, by Lemma 2.1 applied to the (singular) Gaussian law of the tokens given ``w``, the infinite-prompt
prediction is ``y_hat_inf = b w^T Sigma A x_q``. Its risk (section 5.3) is

    R_inf(A, b) = 1/2 tr((b Sigma A - I) Sigma (b Sigma A - I)^T)          (tau2 = 1, no noise),

minimised, with zero risk, on the balanced manifold ``||A||_F^2 = b^2`` by ``b* = tr(Sigma^-2)^(1/4)``,
``A* = Sigma^-1 / b*`` (:func:`bayes_optimal_parameters`). :func:`infinite_prompt_flow` integrates the
gradient flow of ``R_inf`` with ``scipy.integrate.solve_ivp``; :func:`train_reduced` runs full-batch
gradient descent (a proxy for the gradient flow of ``R_L``) or online SGD at a finite ``L``.

Full model (section 6.1). :class:`FullAttention` holds the separate ``Q, K, V`` matrices (D x D) and an
output vector ``o`` (D) of the paper's single-head experiment, with scores ``(K z_i)^T (Q z_q) / sqrt(D)``
(softmax over the prompt, or divided by ``L`` for the linear variant). It is plain tensors with a
hand-written backward pass: the forward re-associates the products (``K^T (Q z_q)`` once per prompt, the
weighted token mean before ``V``) so that no ``(B, L, D) x (D, D)`` projection is ever formed.

Baselines: ridge regression with the Bayes regulariser ``lambda = noise_var / tau2``, its exact
finite-``L`` risk (:func:`bayes_risk`), and the asymptotic optimally-tuned ridge risk for isotropic data
(:func:`asymptotic_ridge_risk`).

Risk conventions. The reduced-model risks are *half* mean squared errors, as in the theory; the full
model, :func:`bayes_risk` and :func:`asymptotic_ridge_risk` use the plain mean squared error
``E (y_hat - y)^2`` of the experiment (``torch.nn.MSELoss``), noise included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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

__all__ = [
    # data
    "kms_covariance",
    "RegressionPrompts",
    "PromptSampler",
    "sample_prompts",
    # reduced model
    "reduced_attention_matrices",
    "reduced_prediction",
    "infinite_prompt_prediction",
    "prediction_fluctuation",
    "prediction_fluctuation_constant",
    "risk_fluctuation_constant",
    # risks
    "infinite_prompt_risk",
    "infinite_prompt_risk_grad",
    "conditional_risk",
    "finite_prompt_risk",
    "linear_finite_prompt_risk",
    "bayes_optimal_parameters",
    # dynamics
    "Trajectory",
    "balanced_initialisation",
    "initialisation_bound",
    "infinite_prompt_flow",
    "train_reduced",
    # full model
    "FullAttention",
    "train_full_attention",
    "FullTrainingHistory",
    # baselines
    "bayes_ridge_lambda",
    "ridge_prediction",
    "bayes_risk",
    "asymptotic_ridge_risk",
    # explorer
    "plot_flow_at_prompt_length",
]

KINDS = ("softmax", "linear")


# --------------------------------------------------------------------------------------------------
# validation helpers (module-private)


def _check_kind(kind):
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def _check_nonneg_float(name, value, *, positive=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite real number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be {'positive' if positive else 'non-negative'}, got {value!r}")


def _check_sigma(Sigma, *, name="Sigma"):
    Sigma = as_tensor_arg(name, Sigma)
    if Sigma.dim() != 2 or Sigma.shape[0] != Sigma.shape[1] or Sigma.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square matrix (d, d), got shape {tuple(Sigma.shape)}")
    check_psd(name, Sigma)
    lam_min = float(torch.linalg.eigvalsh(Sigma).min())
    if lam_min <= 0:
        raise ValueError(
            f"{name} must be positive definite (invertible), got smallest eigenvalue {lam_min:.3g}"
        )
    return Sigma


def _check_A_b(A, b, d):
    A = as_tensor_arg("A", A)
    check_matrix("A", A, d, d)
    b = as_tensor_arg("b", b)
    if b.dim() != 0:
        raise ValueError(f"b must be a scalar (0-dimensional) tensor, got shape {tuple(b.shape)}")
    return A, b


def _check_prompts_tensors(tokens, queries):
    tokens = as_tensor_arg("tokens", tokens)
    queries = as_tensor_arg("queries", queries)
    if tokens.dim() != 3:
        raise ValueError(f"tokens must have shape (B, L, D), got {tuple(tokens.shape)}")
    B, L, D = tokens.shape
    if L == 0 or D < 2:
        raise ValueError(f"tokens must hold L >= 1 tokens of dimension D = d + 1 >= 2, got shape {(B, L, D)}")
    if tuple(queries.shape) != (B, 1, D):
        raise ValueError(f"queries must have shape (B, 1, D) = {(B, 1, D)}, got {tuple(queries.shape)}")
    check_same_dtype_device({"tokens": tokens, "queries": queries})
    return tokens, queries


# --------------------------------------------------------------------------------------------------
# data


def kms_covariance(d, rho, *, dtype=torch.float64, device=None):
    """Kac-Murdock-Szegő (AR(1), Toeplitz) covariance ``Sigma_ij = rho^|i - j|``.

    The paper's experiment uses ``d = 5, rho = 0.5`` (eigenvalues about 0.360 ... 2.262).

    Parameters
    ----------
    d : int, the dimension (at least 1).
    rho : float in (-1, 1), the correlation between neighbouring coordinates.

    Returns
    -------
    Tensor, shape (d, d), symmetric positive definite.

    Raises
    ------
    ValueError if ``d`` is not a positive integer or ``|rho| >= 1`` (the matrix is then singular or
    indefinite).
    """
    check_positive_int("d", d)
    if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not math.isfinite(rho):
        raise TypeError(f"rho must be a finite real number, got {rho!r}")
    if not -1 < rho < 1:
        raise ValueError(f"rho must lie in (-1, 1) for a positive definite KMS matrix, got {rho}")
    i = torch.arange(d, device=device)
    return torch.tensor(float(rho), dtype=dtype, device=device) ** (i[:, None] - i[None, :]).abs().to(dtype)


@dataclass
class RegressionPrompts:
    """A batch of in-context regression prompts.

    Attributes
    ----------
    tokens : Tensor, shape (B, L, D)   ``z_i = (x_i, y_i)``, ``D = d + 1``
    queries : Tensor, shape (B, 1, D)  ``z_q = (x_q, 0)``
    targets : Tensor, shape (B,)       ``y_q = w^T x_q`` (+ noise)
    tasks : Tensor, shape (B, d)       the task vectors ``w``
    """

    tokens: torch.Tensor
    queries: torch.Tensor
    targets: torch.Tensor
    tasks: torch.Tensor

    @property
    def x(self):
        """Prompt inputs, shape (B, L, d) (a view)."""
        return self.tokens[..., :-1]

    @property
    def y(self):
        """Prompt labels, shape (B, L) (a view)."""
        return self.tokens[..., -1]

    @property
    def x_query(self):
        """Query inputs, shape (B, d) (a view)."""
        return self.queries[:, 0, :-1]


class PromptSampler:
    """Draw batches of regression prompts into preallocated buffers (no allocation per batch).

    Each call to :meth:`sample` overwrites the buffers of the previous batch, so a training loop can
    sample, step and sample again without allocating. The tokens are produced by one batched matrix
    product ``G @ M_w`` of standard normals ``G`` (shape (B, L + 1, D); its last row per prompt is the query
    and its last column is the label noise) with ``M_w = [[C^T, C^T w], [0, s]]``, ``Sigma = C C^T``.

    Parameters
    ----------
    Sigma : Tensor, shape (d, d), positive definite; sets dtype and device of the batches.
    L : int, prompt length.
    batch_size : int, number of prompts B per batch.
    tau2 : float, prior variance of each task coordinate (``w ~ N(0, tau2 I)``); 1 in the theory, 1/d in
        the paper's experiment.
    noise_var : float, variance of the label noise on the prompt labels and on the target (0 in the
        theory, 0.1 in the experiment).

    Raises
    ------
    ValueError / TypeError on a bad ``Sigma``, ``L``, ``batch_size``, ``tau2`` or ``noise_var``.
    """

    def __init__(self, Sigma, L, batch_size, *, tau2=1.0, noise_var=0.0):
        Sigma = _check_sigma(Sigma)
        check_positive_int("L", L)
        check_positive_int("batch_size", batch_size)
        _check_nonneg_float("tau2", tau2, positive=True)
        _check_nonneg_float("noise_var", noise_var)
        self.Sigma, self.L, self.batch_size = Sigma, L, batch_size
        self.tau2, self.noise_var = float(tau2), float(noise_var)
        d = Sigma.shape[0]
        self.d, self.D = d, d + 1
        dt, dev = Sigma.dtype, Sigma.device
        self._chol = torch.linalg.cholesky(Sigma)  # (d, d), Sigma = C C^T
        self._normals = torch.empty(batch_size, L + 1, d + 1, dtype=dt, device=dev)
        self._mix = torch.zeros(batch_size, d + 1, d + 1, dtype=dt, device=dev)  # M_w per prompt
        self._mix[:, :d, :d] = self._chol.T
        self._mix[:, d, d] = math.sqrt(self.noise_var)
        self._out = torch.empty(batch_size, L + 1, d + 1, dtype=dt, device=dev)
        self._tasks = torch.empty(batch_size, d, dtype=dt, device=dev)
        self._targets = torch.empty(batch_size, dtype=dt, device=dev)
        self.prompts = RegressionPrompts(
            tokens=self._out[:, :L], queries=self._out[:, L:], targets=self._targets, tasks=self._tasks
        )

    def sample(self, generator=None):
        """Refill the buffers with a fresh batch and return it (a :class:`RegressionPrompts` of views)."""
        check_generator(generator)
        d = self.d
        torch.randn(self._tasks.shape, generator=generator, out=self._tasks)
        self._tasks.mul_(math.sqrt(self.tau2))
        torch.randn(self._normals.shape, generator=generator, out=self._normals)
        torch.matmul(self._tasks, self._chol, out=self._mix[:, :d, d])  # C^T w as a row: w^T C
        torch.bmm(self._normals, self._mix, out=self._out)  # (B, L + 1, D): rows (x, w^T x + noise)
        self._targets.copy_(self._out[:, self.L, d])
        self._out[:, self.L, d] = 0.0  # the query token carries no label
        return self.prompts


def sample_prompts(Sigma, L, batch_size, *, tau2=1.0, noise_var=0.0, generator=None):
    """Draw a fresh batch of in-context regression prompts (new tensors; see :class:`PromptSampler`).

    Returns
    -------
    RegressionPrompts with tokens (B, L, d + 1), queries (B, 1, d + 1), targets (B,), tasks (B, d).
    """
    sampler = PromptSampler(Sigma, L, batch_size, tau2=tau2, noise_var=noise_var)
    return sampler.sample(generator)


# --------------------------------------------------------------------------------------------------
# reduced model


def reduced_attention_matrices(A, b):
    """The block matrices ``U = diag(A, 0)`` (D x D) and ``V = b e_D e_D^T`` (D x D) of section 5.2.

    With these, :func:`softlin.softmax_attention` returns ``(0, ..., 0, y_hat_L)`` for each query.
    """
    A = as_tensor_arg("A", A)
    if A.dim() != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix (d, d), got shape {tuple(A.shape)}")
    d = A.shape[0]
    A, b = _check_A_b(A, b, d)
    U = torch.zeros(d + 1, d + 1, dtype=A.dtype, device=A.device)
    U[:d, :d] = A
    V = torch.zeros_like(U)
    V[d, d] = b
    return U, V


def _reduced_weights(A, x, x_query, kind):
    """Attention weights over the prompt, shape (B, L): softmax of x_i^T A x_q, or (x_i^T A x_q) / L."""
    a = x_query @ A.T  # (B, d): A x_q
    scores = torch.bmm(x, a.unsqueeze(-1)).squeeze(-1)  # (B, L): x_i^T A x_q
    if kind == "softmax":
        return torch.softmax(scores, dim=-1)
    return scores / x.shape[1]


def reduced_prediction(A, b, tokens, queries, *, kind="softmax"):
    """Prediction of the reduced model, ``b sum_i p_i y_i`` (section 5.2).

    ``p_i = softmax_i(x_i^T A x_q)`` for ``kind="softmax"``; ``p_i = x_i^T A x_q / L`` for ``"linear"``.

    Parameters
    ----------
    A : Tensor (d, d); b : scalar Tensor.
    tokens : Tensor (B, L, d + 1); queries : Tensor (B, 1, d + 1).

    Returns
    -------
    Tensor, shape (B,).
    """
    _check_kind(kind)
    tokens, queries = _check_prompts_tensors(tokens, queries)
    d = tokens.shape[-1] - 1
    A, b = _check_A_b(A, b, d)
    check_same_dtype_device({"tokens": tokens, "A": A, "b": b})
    p = _reduced_weights(A, tokens[..., :d], queries[:, 0, :d], kind)
    return b * (p * tokens[..., d]).sum(-1)


def infinite_prompt_prediction(A, b, Sigma, tasks, x_query):
    """Infinite-prompt prediction ``b w^T Sigma A x_q`` (Lemma 2.1 with the token covariance Gamma_w).

    Parameters
    ----------
    A : (d, d); b : scalar; Sigma : (d, d); tasks : (B, d); x_query : (B, d).

    Returns
    -------
    Tensor, shape (B,).
    """
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    A, b = _check_A_b(A, b, d)
    tasks = as_tensor_arg("tasks", tasks)
    x_query = as_tensor_arg("x_query", x_query)
    check_matrix("tasks", tasks, None, d)
    check_matrix("x_query", x_query, tasks.shape[0], d)
    check_same_dtype_device({"A": A, "b": b, "Sigma": Sigma, "tasks": tasks, "x_query": x_query})
    return b * ((tasks @ Sigma) * (x_query @ A.T)).sum(-1)


def _check_task_query(task, x_query, d):
    """One fixed task ``(d,)`` and one query input ``(d,)``, validated together."""
    task = as_tensor_arg("task", task)
    x_query = as_tensor_arg("x_query", x_query)
    if tuple(task.shape) != (d,) or tuple(x_query.shape) != (d,):
        raise ValueError(
            f"task and x_query must have shape ({d},), got {tuple(task.shape)} and {tuple(x_query.shape)}"
        )
    return task, x_query


def prediction_fluctuation_constant(A, b, Sigma, task, x_query):
    """Limit of ``L E(y_hat_L - y_hat_inf)^2`` for a fixed task and query (softmax, no noise).

    Delta method for the self-normalised softmax average (paper-notes claim 5) with ``a = A x_q``:
    ``exp(a^T Sigma a) b^2 (w^T Sigma w + (w^T Sigma a)^2)``.

    Parameters
    ----------
    A : (d, d); b : scalar; Sigma : (d, d); task : (d,); x_query : (d,).

    Returns
    -------
    float
    """
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    A, b = _check_A_b(A, b, d)
    task, x_query = _check_task_query(task, x_query, d)
    a = A @ x_query
    Sw = Sigma @ task
    return float(torch.exp(a @ Sigma @ a) * b**2 * (task @ Sw + (Sw @ a) ** 2))


def prediction_fluctuation(A, b, Sigma, task, x_query, L, *, n_prompts, generator=None, kind="softmax",
                           dtype=None, batch_size=None):
    """Monte Carlo ``E (y_hat_L - y_hat_inf)^2`` for one fixed task and query (noiseless prompts).

    Draws ``n_prompts`` prompts ``x_1..x_L ~ N(0, Sigma)`` with labels ``task^T x_i`` and compares the
    reduced model's prediction with the infinite-prompt prediction ``b task^T Sigma A x_q``. For softmax,
    ``L`` times the result tends to :func:`prediction_fluctuation_constant` (error ~ 1/L).

    Parameters
    ----------
    A : (d, d); b : scalar; Sigma : (d, d); task : (d,); x_query : (d,); L, n_prompts : int.
    dtype : simulation dtype (default that of ``Sigma``); batch_size : prompts per batch (default: as
        many as keep about 4 million token coordinates in memory).

    Returns
    -------
    (mean_squared_difference, standard_error) : floats.
    """
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    A, b = _check_A_b(A, b, d)
    task, x_query = _check_task_query(task, x_query, d)
    check_positive_int("L", L)
    check_positive_int("n_prompts", n_prompts)
    if n_prompts < 2:
        raise ValueError(f"n_prompts must be at least 2 to estimate a standard error, got {n_prompts}")
    _check_kind(kind)
    check_generator(generator)
    dtype = Sigma.dtype if dtype is None else dtype
    batch_size = max(1, 4_000_000 // (L * d)) if batch_size is None else batch_size
    check_positive_int("batch_size", batch_size)
    Sig, A_, b_, w, xq = (t.detach().to(dtype) for t in (Sigma, A, b, task, x_query))
    C = torch.linalg.cholesky(Sig)
    target = float(b_ * (w @ Sig @ (A_ @ xq)))
    errs = []
    done = 0
    with torch.no_grad():
        while done < n_prompts:
            n = min(batch_size, n_prompts - done)
            x = torch.randn(n, L, d, generator=generator, dtype=dtype, device=Sigma.device) @ C.T
            p = _reduced_weights(A_, x, xq.expand(n, d), kind)  # (n, L)
            pred = b_ * (p * (x @ w)).sum(-1)
            errs.append(((pred - target) ** 2).double())
            done += n
    e = torch.cat(errs)
    return float(e.mean()), float(e.std() / math.sqrt(n_prompts))


def risk_fluctuation_constant(A, b, Sigma, *, tau2=1.0):
    """Task- and query-average of :func:`prediction_fluctuation_constant`, halved (noiseless prompts).

    ``C = 1/2 E_{w, x_q}[exp(a^T Sigma a) b^2 (w^T Sigma w + (w^T Sigma a)^2)]``, ``a = A x_q``, in closed form:
    with ``M = A^T Sigma A``, ``N = A^T Sigma^2 A`` and the tilted covariance ``S = (Sigma^-1 - 2 M)^-1``,

        C = 1/2 tau2 b^2 det(I - 2 M Sigma)^(-1/2) (tr Sigma + tr(N S)),

    finite if and only if ``Sigma^-1 - 2 M`` is positive definite (``+inf`` otherwise). At a zero-risk
    point such as :func:`bayes_optimal_parameters` the infinite-prompt prediction equals the target, so
    ``L R_L -> C`` (delta method); there ``C = 1/2 c^2 tr(Sigma) (1 - 2/c^2)^(-d/2) (c^2 - 1)/(c^2 - 2)`` with
    ``c^2 = b*^2``, finite iff ``b*^2 > 2``.

    Returns
    -------
    float (``math.inf`` when the exponential moment diverges).
    """
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    A, b = _check_A_b(A, b, d)
    _check_nonneg_float("tau2", tau2, positive=True)
    check_same_dtype_device({"A": A, "b": b, "Sigma": Sigma})
    M = A.T @ Sigma @ A
    prec = torch.linalg.inv(Sigma) - 2 * M
    prec = 0.5 * (prec + prec.T)
    if float(torch.linalg.eigvalsh(prec).min()) <= 0:
        return math.inf
    S = torch.linalg.inv(prec)
    det = torch.linalg.det(torch.eye(d, dtype=A.dtype, device=A.device) - 2 * M @ Sigma)
    N = A.T @ Sigma @ Sigma @ A
    return float(0.5 * tau2 * b**2 * det ** -0.5 * (torch.trace(Sigma) + torch.trace(N @ S)))


# --------------------------------------------------------------------------------------------------
# risks


def infinite_prompt_risk(A, b, Sigma, *, tau2=1.0, noise_var=0.0):
    """Infinite-prompt risk ``R_inf(A, b) = 1/2 tr((b Sigma A - I) Sigma (b Sigma A - I)^T)`` (section 5.3).

    With a task prior ``N(0, tau2 I)`` the trace is multiplied by ``tau2``; label noise on the target adds
    ``noise_var / 2`` (noise on the prompt labels does not change the infinite-prompt prediction).
    Differentiable in ``A`` and ``b`` (torch autograd).

    Parameters
    ----------
    A : Tensor (d, d); b : scalar Tensor; Sigma : Tensor (d, d) positive definite.

    Returns
    -------
    Tensor, scalar (half mean squared error).
    """
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    A, b = _check_A_b(A, b, d)
    _check_nonneg_float("tau2", tau2, positive=True)
    _check_nonneg_float("noise_var", noise_var)
    check_same_dtype_device({"A": A, "b": b, "Sigma": Sigma})
    M = b * Sigma @ A - torch.eye(d, dtype=A.dtype, device=A.device)
    return 0.5 * tau2 * torch.trace(M @ Sigma @ M.T) + 0.5 * noise_var


def infinite_prompt_risk_grad(A, b, Sigma, *, tau2=1.0):
    """Closed-form gradient of :func:`infinite_prompt_risk` (section 5.3).

    ``dR/dA = tau2 (b^2 Sigma^2 A Sigma - b Sigma^2)``,
    ``dR/db = tau2 (b tr(A^T Sigma^2 A Sigma) - tr(A^T Sigma^2))``; the gradient flow is minus these.

    Returns
    -------
    (Tensor (d, d), Tensor scalar)
    """
    Sigma = _check_sigma(Sigma)
    A, b = _check_A_b(A, b, Sigma.shape[0])
    _check_nonneg_float("tau2", tau2, positive=True)
    check_same_dtype_device({"A": A, "b": b, "Sigma": Sigma})
    return _grad_closed_form(A, b, Sigma, Sigma @ Sigma, tau2)


def _grad_closed_form(A, b, Sigma, Sigma2, tau2):
    S2A = Sigma2 @ A
    gA = tau2 * (b * b * S2A @ Sigma - b * Sigma2)
    gb = tau2 * (b * torch.trace(A.T @ S2A @ Sigma) - torch.trace(S2A))
    return gA, gb


def linear_finite_prompt_risk(A, b, Sigma, L, *, tau2=1.0, noise_var=0.0):
    """Exact finite-prompt risk of the reduced *linear* attention model (Gaussian fourth moments).

    With ``C_L = (1/L) sum_i x_i x_i^T``, ``E[C_L^2] = (1 + 1/L) Sigma^2 + tr(Sigma) Sigma / L`` (the
    effective covariance of Zhang, Frei and Bartlett), so

        R_L^lin(A, b) = 1/2 [tau2 (b^2 tr(A^T E[C_L^2] A Sigma) - 2 b tr(Sigma A Sigma) + tr Sigma)
                             + noise_var (b^2 tr(A^T Sigma A Sigma) / L + 1)],

    which tends to :func:`infinite_prompt_risk` (plus ``noise_var / 2``) as ``L -> infinity``.

    Returns
    -------
    Tensor, scalar (half MSE), differentiable in ``A`` and ``b``.
    """
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    A, b = _check_A_b(A, b, d)
    check_positive_int("L", L)
    _check_nonneg_float("tau2", tau2, positive=True)
    _check_nonneg_float("noise_var", noise_var)
    check_same_dtype_device({"A": A, "b": b, "Sigma": Sigma})
    S2 = Sigma @ Sigma
    G = (1 + 1 / L) * S2 + torch.trace(Sigma) * Sigma / L
    signal = (b * b * torch.trace(A.T @ G @ A @ Sigma) - 2 * b * torch.trace(Sigma @ A @ Sigma)
              + torch.trace(Sigma))
    noise = b * b * torch.trace(A.T @ Sigma @ A @ Sigma) / L + 1.0
    return 0.5 * (tau2 * signal + noise_var * noise)


def bayes_optimal_parameters(Sigma):
    """Limit of the balanced gradient flow: ``b* = tr(Sigma^-2)^(1/4)``, ``A* = Sigma^-1 / b*`` (section 5.3).

    ``b* Sigma A* = I`` (zero infinite-prompt risk) and ``||A*||_F = b*`` (balanced).

    Returns
    -------
    (A* Tensor (d, d), b* scalar Tensor), in the dtype and device of ``Sigma``.
    """
    Sigma = _check_sigma(Sigma)
    Sinv = torch.linalg.inv(Sigma)
    Sinv = 0.5 * (Sinv + Sinv.T)
    b_star = torch.trace(Sinv @ Sinv) ** 0.25
    return Sinv / b_star, b_star


def conditional_risk(A, b, x, x_query, *, kind="softmax", tau2=1.0, noise_var=0.0):
    """Per-prompt risk of the reduced model with the task and the noise integrated out exactly.

    The scores ``x_i^T A x_q`` do not involve the labels, so given the inputs the prediction is
    ``w^T v + b p^T eps`` with ``v = b sum_i p_i x_i``; hence

        E[1/2 (y_hat - y_q)^2 | x] = 1/2 (tau2 ||v - x_q||^2 + noise_var b^2 ||p||^2 + noise_var).

    Averaging over prompts gives ``R_L(A, b)`` (Rao-Blackwellised Monte Carlo). Differentiable in A, b.

    Parameters
    ----------
    A : (d, d); b : scalar; x : (B, L, d) prompt inputs; x_query : (B, d).

    Returns
    -------
    Tensor, shape (B,).
    """
    _check_kind(kind)
    x = as_tensor_arg("x", x)
    x_query = as_tensor_arg("x_query", x_query)
    if x.dim() != 3 or x.shape[1] == 0:
        raise ValueError(f"x must have shape (B, L, d) with L >= 1, got {tuple(x.shape)}")
    B, L, d = x.shape
    check_matrix("x_query", x_query, B, d)
    A, b = _check_A_b(A, b, d)
    _check_nonneg_float("tau2", tau2, positive=True)
    _check_nonneg_float("noise_var", noise_var)
    check_same_dtype_device({"x": x, "x_query": x_query, "A": A, "b": b})
    return _conditional_risk(A, b, x, x_query, kind, tau2, noise_var)


def _conditional_risk(A, b, x, x_query, kind, tau2, noise_var):
    p = _reduced_weights(A, x, x_query, kind)  # (B, L)
    v = b * torch.bmm(p.unsqueeze(1), x).squeeze(1)  # (B, d)
    risk = tau2 * ((v - x_query) ** 2).sum(-1)
    if noise_var:
        risk = risk + noise_var * (b * b * (p * p).sum(-1) + 1.0)
    return 0.5 * risk


def finite_prompt_risk(A, b, Sigma, L, *, n_prompts, generator=None, kind="softmax", tau2=1.0,
                       noise_var=0.0, batch_size=4096, dtype=None):
    """Monte Carlo estimate of the finite-prompt risk ``R_L(A, b)`` of the reduced model.

    Averages :func:`conditional_risk` (task and noise integrated exactly) over ``n_prompts`` prompts
    ``(x_1..x_L, x_q)`` drawn in batches of ``batch_size``. Several parameter sets can be evaluated at
    once (``A`` of shape (n, d, d), ``b`` of shape (n,)): they then share the same prompts (common
    random numbers), which makes differences between them much more precise than each value.

    Parameters
    ----------
    A : (d, d) or (n, d, d); b : scalar or (n,); Sigma : (d, d) positive definite.
    L : int, prompt length.
    n_prompts : int, number of prompts (at least 2).
    dtype : torch dtype for the simulation (default: that of ``Sigma``); float32 costs a quarter of
        float64 for the draws, with no visible effect at Monte Carlo precision.

    Returns
    -------
    (estimate, standard_error) : floats, or two float64 tensors of shape (n,) for batched parameters.
    The per-prompt risks are heavy-tailed when ``A`` is large, so the standard error is itself
    uncertain; use many prompts.
    """
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    batched = isinstance(A, torch.Tensor) and A.dim() == 3
    if batched:
        A = as_tensor_arg("A", A)
        b = as_tensor_arg("b", b)
        if A.shape[1:] != (d, d) or tuple(b.shape) != (A.shape[0],):
            raise ValueError(f"batched A must have shape (n, {d}, {d}) and b shape (n,), got "
                             f"{tuple(A.shape)} and {tuple(b.shape)}")
        As, bs = A, b
    else:
        A, b = _check_A_b(A, b, d)
        As, bs = A[None], b[None]
    check_positive_int("L", L)
    check_positive_int("n_prompts", n_prompts)
    check_positive_int("batch_size", batch_size)
    if n_prompts < 2:
        raise ValueError(f"n_prompts must be at least 2 to estimate a standard error, got {n_prompts}")
    _check_kind(kind)
    check_generator(generator)
    _check_nonneg_float("tau2", tau2, positive=True)
    _check_nonneg_float("noise_var", noise_var)
    dtype = Sigma.dtype if dtype is None else dtype
    Sig = Sigma.to(dtype)
    As = As.detach().to(dtype=dtype, device=Sigma.device)
    bs = bs.detach().to(dtype=dtype, device=Sigma.device)
    C = torch.linalg.cholesky(Sig)
    n_par = As.shape[0]
    total = torch.zeros(n_par, dtype=torch.float64)
    total_sq = torch.zeros(n_par, dtype=torch.float64)
    done = 0
    with torch.no_grad():
        while done < n_prompts:
            n = min(batch_size, n_prompts - done)
            g = torch.randn(n, L + 1, d, generator=generator, dtype=dtype, device=Sigma.device)
            xs = g @ C.T  # (n, L + 1, d)
            for k in range(n_par):
                r = _conditional_risk(As[k], bs[k], xs[:, :L], xs[:, L], kind, tau2, noise_var).double().cpu()
                total[k] += r.sum()
                total_sq[k] += (r * r).sum()
            done += n
    mean = total / n_prompts
    var = (total_sq / n_prompts - mean * mean).clamp(min=0.0) * n_prompts / (n_prompts - 1)
    se = torch.sqrt(var / n_prompts)
    if batched:
        return mean, se
    return float(mean[0]), float(se[0])


# --------------------------------------------------------------------------------------------------
# dynamics


@dataclass
class Trajectory:
    """Parameters and risk along a training run or a gradient flow.

    Attributes
    ----------
    t : Tensor (n,)        flow time (``step * lr`` for discrete training)
    A : Tensor (n, d, d)
    b : Tensor (n,)
    risk : Tensor (n,)     ``R_inf`` for :func:`infinite_prompt_flow`; the training objective at the
                           recorded parameters for :func:`train_reduced` (sample average, half MSE)
    """

    t: torch.Tensor
    A: torch.Tensor
    b: torch.Tensor
    risk: torch.Tensor

    def invariant(self):
        """The balance ``||A||_F^2 - b^2`` at every recorded time, shape (n,)."""
        return (self.A**2).sum((-1, -2)) - self.b**2

    def distance_to(self, A, b):
        """``sqrt(||A(t) - A||_F^2 + (b(t) - b)^2)`` at every recorded time, shape (n,)."""
        return torch.sqrt(((self.A - A) ** 2).sum((-1, -2)) + (self.b - b) ** 2)


def balanced_initialisation(d, alpha, *, rank=None, generator=None, dtype=torch.float64, device=None):
    """Balanced start of Eq. (9): ``A(0) = alpha Theta Theta^T`` (unit Frobenius norm), ``b(0) = alpha``.

    ``Theta`` is a standard Gaussian ``(d, rank)`` matrix, rescaled; the start satisfies
    ``||A(0)||_F^2 - b(0)^2 = 0``.

    Parameters
    ----------
    d : int; alpha : float > 0; rank : int in 1..d (default d).

    Returns
    -------
    (A0 Tensor (d, d), b0 scalar Tensor)
    """
    check_positive_int("d", d)
    _check_nonneg_float("alpha", alpha, positive=True)
    rank = d if rank is None else rank
    check_positive_int("rank", rank)
    if rank > d:
        raise ValueError(f"rank must be at most d = {d}, got {rank}")
    check_generator(generator)
    theta = torch.randn(d, rank, generator=generator, dtype=dtype, device=device)
    P = theta @ theta.T
    return alpha * P / torch.linalg.matrix_norm(P), torch.tensor(float(alpha), dtype=dtype, device=device)


def initialisation_bound(Sigma):
    """The displayed sufficient range of Eq. (9): ``alpha < sqrt(2) / (d^(1/4) ||Sigma||_op)``.

    About 0.418 for ``d = 5``, KMS 0.5. The flow converges for every ``alpha > 0`` (see the chapter).
    """
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    return math.sqrt(2) / (d**0.25 * float(torch.linalg.eigvalsh(Sigma).max()))


def infinite_prompt_flow(A0, b0, Sigma, t_eval, *, tau2=1.0, rtol=1e-10, atol=1e-12, method="LSODA"):
    """Gradient flow of ``R_inf`` from ``(A0, b0)``, integrated with ``scipy.integrate.solve_ivp``.

    ``dA/dt = b Sigma^2 - b^2 Sigma^2 A Sigma``, ``db/dt = tr(A^T Sigma^2) - b tr(A^T Sigma^2 A Sigma)``
    (times ``tau2``). The balance ``||A||_F^2 - b^2`` is conserved exactly by the flow; the solver keeps it
    to about ``rtol``.

    Parameters
    ----------
    A0 : (d, d); b0 : scalar; Sigma : (d, d).
    t_eval : 1-D increasing array-like of times >= 0 (the first is the start, usually 0).
    rtol, atol, method : passed to ``solve_ivp``.

    Returns
    -------
    Trajectory (float64, on the CPU) with ``risk = R_inf`` at each time.

    Raises
    ------
    RuntimeError if the solver fails.
    """
    from scipy.integrate import solve_ivp

    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    A0, b0 = _check_A_b(A0, b0, d)
    _check_nonneg_float("tau2", tau2, positive=True)
    t_eval = np.asarray(t_eval, dtype=np.float64)
    if t_eval.ndim != 1 or t_eval.size == 0 or np.any(np.diff(t_eval) <= 0) or t_eval[0] < 0:
        raise ValueError(f"t_eval must be a non-empty increasing 1-D array of times >= 0, got {t_eval!r}")
    S = Sigma.detach().cpu().double().numpy()
    S2 = S @ S

    def rhs(_t, y):
        A = y[:-1].reshape(d, d)
        b = y[-1]
        S2A = S2 @ A
        dA = tau2 * (b * S2 - b * b * S2A @ S)
        db = tau2 * (np.trace(S2A) - b * np.sum((S2A @ S) * A))
        return np.concatenate([dA.ravel(), [db]])

    y0 = np.concatenate([A0.detach().cpu().double().numpy().ravel(), [float(b0)]])
    sol = solve_ivp(rhs, (0.0, float(t_eval[-1])), y0, method=method, t_eval=t_eval, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    A = torch.from_numpy(sol.y[:-1].T.reshape(-1, d, d).copy())
    b = torch.from_numpy(sol.y[-1].copy())
    S_t = torch.from_numpy(S)
    eye = torch.eye(d, dtype=torch.float64)
    M = b[:, None, None] * (S_t @ A) - eye
    risk = 0.5 * tau2 * torch.einsum("nij,jk,nik->n", M, S_t, M)
    return Trajectory(t=torch.from_numpy(sol.t.copy()), A=A, b=b, risk=risk)


def train_reduced(A0, b0, Sigma, L, *, steps, lr, batch_size, method="sgd", kind="softmax", tau2=1.0,
                  noise_var=0.0, generator=None, record_every=1, progress=False, dtype=None):
    """Train the reduced ``(A, b)`` model at prompt length ``L`` by gradient descent.

    The objective is the average of :func:`conditional_risk` (task and noise integrated out) over a batch
    of prompts. ``method="gd"`` draws ``batch_size`` prompts once and runs full-batch gradient descent on
    them (a discretisation of the gradient flow of the empirical ``R_L``); ``method="sgd"`` draws a fresh
    batch at every step (online SGD on ``R_L``).

    Parameters
    ----------
    A0, b0 : start; Sigma : (d, d); L : prompt length.
    steps : int; lr : float (time step; flow time is ``step * lr``); batch_size : int.
    record_every : int, record parameters and objective every this many steps (and at the end).
    progress : bool, show a ``tqdm.auto`` progress bar.
    dtype : simulation dtype (default: that of ``Sigma``).

    Returns
    -------
    Trajectory with ``t = step * lr`` and ``risk`` the objective on the batch at the recorded parameters.
    """
    from tqdm.auto import tqdm

    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    A0, b0 = _check_A_b(A0, b0, d)
    check_positive_int("L", L)
    check_positive_int("steps", steps)
    check_positive_int("batch_size", batch_size)
    check_positive_int("record_every", record_every)
    _check_nonneg_float("lr", lr, positive=True)
    if method not in ("gd", "sgd"):
        raise ValueError(f"method must be 'gd' or 'sgd', got {method!r}")
    _check_kind(kind)
    check_generator(generator)
    dtype = Sigma.dtype if dtype is None else dtype
    Sig = Sigma.to(dtype)
    C = torch.linalg.cholesky(Sig)
    A = A0.detach().to(dtype).clone().requires_grad_(True)
    b = b0.detach().to(dtype).clone().requires_grad_(True)
    g = torch.empty(batch_size, L + 1, d, dtype=dtype, device=Sigma.device)
    xs = torch.empty_like(g)

    def draw():
        torch.randn(g.shape, generator=generator, out=g)
        torch.matmul(g, C.T, out=xs)

    draw()
    ts, As, bs, risks = [], [], [], []
    for step in tqdm(range(steps + 1), disable=not progress, desc=f"{method} L={L}", leave=False):
        if method == "sgd" and step > 0:
            draw()
        loss = _conditional_risk(A, b, xs[:, :L], xs[:, L], kind, tau2, noise_var).mean()
        if step % record_every == 0 or step == steps:
            ts.append(step * lr)
            As.append(A.detach().clone())
            bs.append(b.detach().clone())
            risks.append(loss.detach().clone())
        if step == steps:
            break
        gA, gb = torch.autograd.grad(loss, (A, b))
        with torch.no_grad():
            A -= lr * gA
            b -= lr * gb
    return Trajectory(
        t=torch.tensor(ts, dtype=torch.float64), A=torch.stack(As), b=torch.stack(bs), risk=torch.stack(risks)
    )


# --------------------------------------------------------------------------------------------------
# full single-head model of the experiment


@dataclass
class FullAttention:
    """Single-head attention of the paper's experiment, as plain tensors (no ``nn.Module``).

    ``y_hat = o^T V sum_i p_i z_i`` with ``p_i = softmax_i(s_i)`` (``kind="softmax"``) or ``p_i = s_i / L``
    (``kind="linear"``), ``s_i = (K z_i)^T (Q z_q) / sqrt(D)``. The effective matrices are the merged
    key-query matrix ``K^T Q`` (:meth:`key_query`) and the value read-out ``o^T V``
    (:meth:`output_value`); the raw weights have symmetries (``K -> M K, Q -> M^-T Q``; ``V -> c V``,
    ``o -> o / c``) that these remove.

    Attributes
    ----------
    Q, K, V : Tensor (D, D); o : Tensor (D,); kind : "softmax" or "linear".
    """

    Q: torch.Tensor
    K: torch.Tensor
    V: torch.Tensor
    o: torch.Tensor
    kind: str = "softmax"

    def __post_init__(self):
        _check_kind(self.kind)
        for name in ("Q", "K", "V"):
            as_tensor_arg(name, getattr(self, name))
        D = self.Q.shape[0] if self.Q.dim() == 2 else -1
        for name in ("Q", "K", "V"):
            check_matrix(name, getattr(self, name), D, D)
        as_tensor_arg("o", self.o)
        if tuple(self.o.shape) != (D,):
            raise ValueError(f"o must have shape ({D},), got {tuple(self.o.shape)}")
        check_same_dtype_device({"Q": self.Q, "K": self.K, "V": self.V, "o": self.o})

    @classmethod
    def _trusted(cls, Q, K, V, o, kind):
        """Build without validation (for gradients and copies made inside this class)."""
        obj = object.__new__(cls)
        obj.Q, obj.K, obj.V, obj.o, obj.kind = Q, K, V, o, kind
        return obj

    @classmethod
    def initialise(cls, d, *, kind="softmax", generator=None, dtype=torch.float32, device=None):
        """PyTorch's default ``nn.Linear`` start: every entry uniform on ``(-1/sqrt(D), 1/sqrt(D))``.

        Draw order: Q, K, V, o (each as ``nn.Linear`` would store it, ``(out, in)``).
        """
        check_positive_int("d", d)
        check_generator(generator)
        D = d + 1
        bound = 1.0 / math.sqrt(D)

        def unif(*shape):
            return (torch.rand(*shape, generator=generator, dtype=dtype, device=device) * 2 - 1) * bound

        return cls(Q=unif(D, D), K=unif(D, D), V=unif(D, D), o=unif(D), kind=kind)

    @property
    def D(self):
        return self.Q.shape[0]

    def clone(self, kind=None):
        """A deep copy, optionally of the other kind (same weights: the shared start of the experiment)."""
        if kind is not None:
            _check_kind(kind)
        return FullAttention._trusted(self.Q.clone(), self.K.clone(), self.V.clone(), self.o.clone(),
                                      self.kind if kind is None else kind)

    def to(self, dtype=None, device=None):
        """A copy in another dtype and/or on another device."""
        return FullAttention(*(t.to(dtype=dtype, device=device) for t in (self.Q, self.K, self.V, self.o)),
                             self.kind)

    def parameters(self):
        """``(Q, K, V, o)``."""
        return self.Q, self.K, self.V, self.o

    def key_query(self):
        """The merged key-query matrix ``K^T Q``, shape (D, D); the paper's ``U`` is this over ``sqrt(D)``."""
        return self.K.T @ self.Q

    def output_value(self):
        """The value read-out ``o^T V``, shape (D,): the row of the paper's ``V`` read by the prediction."""
        return self.o @ self.V

    def _check_batch(self, tokens, queries, *, values=True):
        """Shapes, dtypes and devices; with ``values=True`` also that every entry is finite (a full pass)."""
        if values:
            tokens, queries = _check_prompts_tensors(tokens, queries)
        else:
            for name, x in (("tokens", tokens), ("queries", queries)):
                if not isinstance(x, torch.Tensor):
                    raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
            B_, L_, D_ = tokens.shape if tokens.dim() == 3 else (None, 0, None)
            if L_ == 0 or tuple(queries.shape) != (B_, 1, D_):
                raise ValueError(f"tokens must have shape (B, L, D) with L >= 1 and queries (B, 1, D), got "
                                 f"{tuple(tokens.shape)} and {tuple(queries.shape)}")
        if tokens.shape[-1] != self.D:
            raise ValueError(f"tokens must have D = {self.D} coordinates, got shape {tuple(tokens.shape)}")
        check_same_dtype_device({"tokens": tokens, "queries": queries, "Q": self.Q})
        return tokens, queries

    def _forward(self, tokens, zq):
        """Shared forward pass; returns the prediction and what the backward pass needs."""
        scale = 1.0 / math.sqrt(self.D)
        q = zq @ self.Q.T  # (B, D): Q z_q
        u = q @ self.K  # (B, D): K^T Q z_q, once per prompt
        s = torch.bmm(tokens, u.unsqueeze(-1)).squeeze(-1) * scale  # (B, L): (K z_i)^T (Q z_q) / sqrt(D)
        p = torch.softmax(s, dim=-1) if self.kind == "softmax" else s / tokens.shape[1]
        m = torch.bmm(p.unsqueeze(1), tokens).squeeze(1)  # (B, D): weighted token mean
        h = m @ self.V.T  # (B, D): V m
        return h @ self.o, (q, u, p, m, h)

    def predict(self, tokens, queries):
        """Predictions for a batch, shape (B,). Accepts tokens (B, L, D) and queries (B, 1, D)."""
        tokens, queries = self._check_batch(tokens, queries)
        return self._forward(tokens, queries[:, 0])[0]

    def mse(self, prompts):
        """Mean squared error ``mean_b (y_hat_b - y_b)^2`` on a batch of :class:`RegressionPrompts`."""
        with torch.no_grad():
            return float(((self.predict(prompts.tokens, prompts.queries) - prompts.targets) ** 2).mean())

    def loss_and_grad(self, prompts):
        """Batch MSE and its gradient in ``(Q, K, V, o)``, by a hand-written backward pass.

        Only shapes, dtypes and devices are checked up front (a full finiteness pass over the batch would
        cost as much as the step); a non-finite loss raises instead.

        Returns
        -------
        (loss : scalar Tensor, grads : FullAttention holding dQ, dK, dV, do)

        Raises
        ------
        ValueError on mismatched shapes, or if the loss is not finite (NaN/inf in the batch or divergence).
        """
        tokens, queries = self._check_batch(prompts.tokens, prompts.queries, values=False)
        targets = prompts.targets
        if tuple(targets.shape) != (tokens.shape[0],):
            raise ValueError(f"targets must have shape ({tokens.shape[0]},), got {tuple(targets.shape)}")
        loss, grads = self._loss_and_grad(tokens, queries[:, 0], targets)
        if not bool(torch.isfinite(loss)):
            raise ValueError(f"the batch loss is {float(loss)}: the batch holds NaN/inf or training diverged "
                             f"(lower lr)")
        return loss, grads

    def _loss_and_grad(self, tokens, zq, targets):
        """Loss and gradients in two passes over the tokens, without (B, L)-sized temporaries.

        Pass 1 computes, for every token, its score ``s_i = z_i . u / sqrt(D)`` (``u = K^T Q z_q``) and its
        read-out ``y_i = z_i . c`` (``c = V^T o``, so that the prediction is ``sum_i p_i y_i``) as one
        (B, 2, D) x (B, D, L) product into a buffer kept between steps; pass 2 multiplies the weights
        ``[e; e y]`` (softmax) or ``[s; y]`` (linear) by the tokens, which gives the weighted token mean
        and the one other token sum the backward pass needs:

        - softmax: ``p_i = e_i / Z``, ``ds_i = g p_i (y_i - y_hat)``, so ``du = g (sum p_i y_i z_i - y_hat m)``;
        - linear: ``p_i = s_i / L``, ``ds_i = g y_i / L``, so ``du = g sum y_i z_i / L``;

        with ``g = d loss / d y_hat`` and ``m = sum_i p_i z_i`` (then divided by ``sqrt(D)``). Reusing the
        buffer matters: fresh memory costs a page fault per 4 KiB on first touch, more than the arithmetic.
        """
        B, L, D = tokens.shape
        scale = 1.0 / math.sqrt(D)
        q = zq @ self.Q.T  # (B, D): Q z_q
        u = q @ self.K  # (B, D): K^T Q z_q, once per prompt
        c = self.o @ self.V  # (D,): V^T o
        X = torch.stack([u * scale, c.expand(B, D)], dim=1)  # (B, 2, D)
        work = getattr(self, "_work", None)
        if work is None or work.shape != (B, 2, L) or work.dtype != tokens.dtype or work.device != tokens.device:
            work = self._work = torch.empty(B, 2, L, dtype=tokens.dtype, device=tokens.device)
        S = torch.matmul(X, tokens.mT, out=work)  # rows: scores s_i and read-outs y_i
        s, y = S[:, 0], S[:, 1]
        if self.kind == "softmax":
            s.sub_(s.amax(-1, keepdim=True)).exp_()  # e_i, the unnormalised softmax weights
            y.mul_(s)  # e_i y_i
            W = torch.bmm(S, tokens) / s.sum(-1, keepdim=True).unsqueeze(-1)  # (B, 2, D): m, sum p_i y_i z_i
        else:
            W = torch.bmm(S, tokens) / L  # (B, 2, D): m, sum y_i z_i / L
        m = W[:, 0]
        pred = m @ c  # (B,)
        r = pred - targets
        loss = (r * r).mean()
        g = r * (2.0 / B)  # d loss / d pred
        if self.kind == "softmax":
            du = (W[:, 1] - pred[:, None] * m) * (g * scale)[:, None]
        else:
            du = W[:, 1] * (g * scale)[:, None]
        d_o = g @ (m @ self.V.T)  # (D,)
        dV = torch.outer(self.o, g @ m)  # (D, D): sum_b g_b o m_b^T
        dK = q.T @ du  # u = K^T q
        dQ = (du @ self.K.T).T @ zq
        return loss, FullAttention._trusted(dQ, dK, dV, d_o, self.kind)

    def sgd_step(self, prompts, lr):
        """One plain SGD step on the batch MSE, in place. Returns the batch loss before the step (float).

        Raises ValueError (weights untouched) if the loss is not finite.
        """
        _check_nonneg_float("lr", lr, positive=True)
        loss, grads = self.loss_and_grad(prompts)
        self._apply(grads, lr)
        return float(loss)

    def _apply(self, grads, lr):
        for w, gw in zip(self.parameters(), grads.parameters()):
            w.sub_(gw, alpha=lr)


@dataclass
class FullTrainingHistory:
    """What :func:`train_full_attention` records for each model kind.

    Attributes
    ----------
    steps : list of int                 the recorded step numbers (0 = start)
    train_loss : dict kind -> list      running mean of the batch MSE since the previous record
    test_mse : dict kind -> list        MSE on the fixed test batch at each recorded step
    models : dict kind -> FullAttention the final models
    snapshots : dict kind -> list of (key_query, output_value) at each recorded step
    """

    steps: list
    train_loss: dict
    test_mse: dict
    models: dict
    snapshots: dict

    def effective_distance(self):
        """``(||dK^TQ||_F, ||d(o^T V)||)`` between the softmax and linear models at each record, two lists."""
        kq = [float(torch.linalg.matrix_norm(a[0] - b[0])) for a, b in zip(self.snapshots["softmax"],
                                                                          self.snapshots["linear"])]
        ov = [float(torch.linalg.vector_norm(a[1] - b[1])) for a, b in zip(self.snapshots["softmax"],
                                                                          self.snapshots["linear"])]
        return kq, ov


def train_full_attention(init, Sigma, L, *, steps, lr, batch_size, tau2, noise_var, generator=None,
                         kinds=KINDS, test_prompts=None, record_every=1000, progress=False):
    """Train the full model of the experiment by online SGD, one copy per ``kind``, on one data stream.

    Every step draws one batch (in place, :class:`PromptSampler`) and takes one SGD step of every model
    on it, so the softmax and linear models see identical data from the identical start ``init``.

    Parameters
    ----------
    init : FullAttention, the common start (not modified); its dtype and device are used.
    Sigma : (d, d); L, steps, batch_size : int; lr : float; tau2, noise_var : floats (1/d and 0.1 in
        the paper).
    generator : the data stream's generator (on the device of ``init``).
    kinds : which models to train (default both).
    test_prompts : RegressionPrompts for the test MSE (optional; none recorded if absent).
    record_every : record losses and effective matrices every this many steps (and at the end).

    Returns
    -------
    FullTrainingHistory
    """
    from tqdm.auto import tqdm

    if not isinstance(init, FullAttention):
        raise TypeError(f"init must be a FullAttention, got {type(init).__name__}")
    check_positive_int("steps", steps)
    check_positive_int("record_every", record_every)
    _check_nonneg_float("lr", lr, positive=True)
    check_generator(generator)
    if test_prompts is not None and not isinstance(test_prompts, RegressionPrompts):
        raise TypeError(f"test_prompts must be RegressionPrompts or None, got {type(test_prompts).__name__}")
    for k in kinds:
        _check_kind(k)
    Sigma = _check_sigma(Sigma)
    if Sigma.shape[0] + 1 != init.D:
        raise ValueError(f"Sigma must be ({init.D - 1}, {init.D - 1}) for a model with D = {init.D}, "
                         f"got {tuple(Sigma.shape)}")
    sampler = PromptSampler(Sigma.to(dtype=init.Q.dtype, device=init.Q.device), L, batch_size,
                            tau2=tau2, noise_var=noise_var)
    models = {k: init.clone(kind=k) for k in kinds}
    hist = FullTrainingHistory(steps=[], train_loss={k: [] for k in kinds}, test_mse={k: [] for k in kinds},
                               models=models, snapshots={k: [] for k in kinds})
    # Sampled batches are finite by construction, so the hot loop skips validation and keeps the running
    # losses on the device (no host synchronisation per step); divergence is caught at each record.
    running = {k: torch.zeros((), dtype=init.Q.dtype, device=init.Q.device) for k in kinds}
    count = 0

    def record(step):
        hist.steps.append(step)
        for k, mdl in models.items():
            mean = float(running[k]) / count if count else float("nan")
            if count and not math.isfinite(mean):
                raise ValueError(
                    f"training of the {k} model diverged before step {step} (loss {mean}); lower lr"
                )
            hist.train_loss[k].append(mean)
            if test_prompts is not None:
                hist.test_mse[k].append(mdl.mse(test_prompts))
            hist.snapshots[k].append((mdl.key_query().detach().clone(), mdl.output_value().detach().clone()))

    record(0)
    for step in tqdm(range(1, steps + 1), disable=not progress, desc=f"SGD L={L}", leave=False):
        prompts = sampler.sample(generator)
        tokens, zq = prompts.tokens, prompts.queries[:, 0]
        for k, mdl in models.items():
            loss, grads = mdl._loss_and_grad(tokens, zq, prompts.targets)
            mdl._apply(grads, lr)
            running[k] += loss
        count += 1
        if step % record_every == 0 or step == steps:
            record(step)
            running = {k: torch.zeros_like(v) for k, v in running.items()}
            count = 0
    return hist


# --------------------------------------------------------------------------------------------------
# baselines


def bayes_ridge_lambda(tau2, noise_var):
    """The Bayes regulariser ``lambda = noise_var / tau2``: ridge with it is the posterior mean.

    ``0.5`` in the paper's experiment (``tau2 = 1/5``, ``noise_var = 0.1``).
    """
    _check_nonneg_float("tau2", tau2, positive=True)
    _check_nonneg_float("noise_var", noise_var)
    return noise_var / tau2


def ridge_prediction(tokens, queries, lam):
    """Ridge regression on each prompt: solve ``(X^T X + lam I) beta = X^T y``, predict ``x_q^T beta``.

    Parameters
    ----------
    tokens : (B, L, d + 1); queries : (B, 1, d + 1); lam : float > 0.

    Returns
    -------
    Tensor, shape (B,).
    """
    tokens, queries = _check_prompts_tensors(tokens, queries)
    _check_nonneg_float("lam", lam, positive=True)
    d = tokens.shape[-1] - 1
    x, y = tokens[..., :d], tokens[..., d]
    gram = x.mT @ x + lam * torch.eye(d, dtype=x.dtype, device=x.device)  # (B, d, d)
    beta = torch.linalg.solve(gram, (x.mT @ y.unsqueeze(-1))).squeeze(-1)  # (B, d)
    return (beta * queries[:, 0, :d]).sum(-1)


def bayes_risk(Sigma, L, *, tau2, noise_var, n_prompts, generator=None, batch_size=4096):
    """Monte Carlo estimate of the Bayes (posterior-mean = ridge with :func:`bayes_ridge_lambda`) risk.

    Given the inputs, the posterior covariance of ``w`` is ``(X^T X / s2 + I / tau2)^-1``, so the mean
    squared error of the posterior mean on a noisy target is ``s2 + x_q^T (X^T X / s2 + I / tau2)^-1 x_q``;
    this is averaged over prompts (the task and the noise are integrated exactly).

    Returns
    -------
    (estimate, standard_error) of ``E (y_hat - y_q)^2`` (plain MSE, noise included).
    """
    Sigma = _check_sigma(Sigma)
    check_positive_int("L", L)
    check_positive_int("n_prompts", n_prompts)
    if n_prompts < 2:
        raise ValueError(f"n_prompts must be at least 2 to estimate a standard error, got {n_prompts}")
    _check_nonneg_float("tau2", tau2, positive=True)
    _check_nonneg_float("noise_var", noise_var, positive=True)
    check_generator(generator)
    d = Sigma.shape[0]
    C = torch.linalg.cholesky(Sigma)
    eye = torch.eye(d, dtype=Sigma.dtype, device=Sigma.device)
    vals = []
    done = 0
    while done < n_prompts:
        n = min(batch_size, n_prompts - done)
        xs = torch.randn(n, L + 1, d, generator=generator, dtype=Sigma.dtype, device=Sigma.device) @ C.T
        x, xq = xs[:, :L], xs[:, L]
        prec = x.mT @ x / noise_var + eye / tau2  # (n, d, d) posterior precision
        vals.append(noise_var + (xq * torch.linalg.solve(prec, xq.unsqueeze(-1)).squeeze(-1)).sum(-1))
        done += n
    v = torch.cat(vals).double()
    return float(v.mean()), float(v.std() / math.sqrt(n_prompts))


def asymptotic_ridge_risk(noise_var, xi):
    """Asymptotic test MSE of optimally tuned ridge, isotropic inputs, proportional limit ``d/L -> xi``.

    For ``x ~ N(0, I_d)``, ``w ~ N(0, I/d)`` (signal variance 1) and noise variance ``s2``:

        E (y_hat - y)^2 -> 1/2 (s2 + (xi - 1)/xi + sqrt(4 s2 + (s2 + (1 - xi)/xi)^2)),

    noise included, no factor 1/2 in the loss (paper-notes section 6.2). Here ``xi = d / L``. For a
    non-isotropic ``Sigma`` this is only a reference curve.

    Parameters
    ----------
    noise_var : float >= 0; xi : float > 0 (or array-like of them).

    Returns
    -------
    float, or a NumPy array for array input.
    """
    _check_nonneg_float("noise_var", noise_var)
    xi_arr = np.asarray(xi, dtype=np.float64)
    if xi_arr.size == 0 or not np.all(np.isfinite(xi_arr)) or np.any(xi_arr <= 0):
        raise ValueError(f"xi = d / L must be positive and finite, got {xi!r}")
    s2 = noise_var
    out = 0.5 * (s2 + (xi_arr - 1) / xi_arr + np.sqrt(4 * s2 + (s2 + (1 - xi_arr) / xi_arr) ** 2))
    return float(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------------------------------
# explorer


def plot_flow_at_prompt_length(ax, alpha=1.0, L=100, *, Sigma=None, n_prompts=300, t_max=20.0, n_times=9,
                               seed=0):
    """Explorer panel: the infinite-prompt flow from ``alpha`` and its risk under prompts of length ``L``.

    Draws ``R_inf(theta_inf(t))`` (a line) and a Monte Carlo estimate of ``R_L(theta_inf(t))`` (markers with
    standard-error bars) at ``n_times`` times, for the balanced start of scale ``alpha`` (rank-2 Theta,
    drawn with ``seed``). ``Sigma`` defaults to KMS(5, 0.5). Cheap: under a second.

    Returns
    -------
    dict with ``t``, ``risk_inf``, ``risk_L``, ``stderr_L`` (NumPy arrays), for tests.
    """
    if Sigma is None:
        Sigma = kms_covariance(5, 0.5)
    Sigma = _check_sigma(Sigma)
    check_positive_int("L", L)
    _check_nonneg_float("alpha", alpha, positive=True)
    d = Sigma.shape[0]
    gen = torch.Generator().manual_seed(seed)
    A0, b0 = balanced_initialisation(d, alpha, rank=min(2, d), generator=gen, dtype=Sigma.dtype)
    fine = np.linspace(0.0, t_max, 201)
    flow = infinite_prompt_flow(A0, b0, Sigma, fine, rtol=1e-8, atol=1e-10)
    idx = np.linspace(0, fine.size - 1, n_times).round().astype(int)
    rL, se = [], []
    for i in idx:
        m, s = finite_prompt_risk(flow.A[i].to(Sigma.dtype), flow.b[i].to(Sigma.dtype), Sigma, L,
                                  n_prompts=n_prompts, generator=gen, dtype=torch.float32)
        rL.append(m)
        se.append(s)
    t = flow.t.numpy()
    ax.plot(t, flow.risk.numpy(), color="#0072B2", linestyle="-", marker="",
            label=r"$R_\infty(\theta_\infty(t))$")
    ax.errorbar(t[idx], rL, yerr=se, color="#D55E00", linestyle="--", marker="s", capsize=2,
                label=rf"$R_L(\theta_\infty(t))$, $L={L}$")
    ax.set_yscale("log")
    ax.set_xlabel("flow time $t$")
    ax.set_ylabel("risk (half MSE)")
    ax.set_title(rf"$\alpha={alpha:g}$, $L={L}$")
    ax.legend(fontsize=8)
    return {"t": t[idx], "risk_inf": flow.risk.numpy()[idx], "risk_L": np.array(rL), "stderr_L": np.array(se)}
