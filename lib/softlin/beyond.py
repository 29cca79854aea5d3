"""Beyond the paper: where the large-prompt picture of softmax attention bends or breaks (chapter 6).

The paper's results assume centred, sub-Gaussian tokens, and its cleanest statements (Lemma 2.1, the
in-context regression theorem) assume Gaussian ones. This module computes what happens when each
assumption is dropped in turn.

* **Sub-Gaussian, not Gaussian.** :class:`RegressionTokenMeasure` builds regression tokens
  ``z = (x, w^T x)`` from *any* input law, so :func:`softlin.attention_limit` gives the infinite-prompt
  prediction ``b w^T grad Lambda_x(A x_q)``, which is not linear in the query. :func:`softmax_limit_risk`
  and :func:`isotropic_scale_profile` evaluate the resulting infinite-prompt risk,
  :func:`quartic_bias_coefficient` its small-``A`` expansion, and :func:`train_reduced_pair` /
  :func:`reduced_risks` train and evaluate the reduced softmax and linear models on such inputs.
* **Heavy tails.** :func:`softmax_weight_statistics` measures the effective sample size, the largest
  weight and the output of softmax attention over prompts from laws without a moment generating
  function; :func:`ess_ratio_limit` is the large-``L`` value of ``ESS / L`` when the MGF exists.
* **Temperature.** :func:`temperature_risk` computes the finite-prompt risk of the regression model at
  ``(s A*, b* / s)`` (same infinite-prompt prediction, temperature ``1/s``) through an exact reduction to
  a one-dimensional tilt and a Gauss-Laguerre rule over the query radius; :func:`critical_scale` is the
  scale beyond which the query-averaged fluctuation constant is infinite.
* **Non-centred tokens.** :func:`linear_attention_limit` is ``V E[z z^T] U z`` for any law;
  :func:`noncentred_limit_risks` and :func:`noncentred_softmax_floor` give the infinite-prompt risks of
  the reduced models when ``x ~ N(m, Sigma)``, and the floor ``b^2 |m|^2 / (2 (1 + m^T Sigma^-1 m))``
  below which the softmax model cannot go at output scale ``b``.

Risks are half mean squared errors with the task ``w ~ N(0, tau2 I)`` integrated out, as in
:mod:`softlin.icl`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from . import icl
from ._checks import (
    as_tensor_arg,
    check_generator,
    check_matrix,
    check_positive_int,
    check_psd,
    check_same_dtype_device,
)
from .measures import (
    GaussianMeasure,
    GaussianMixtureMeasure,
    LogNormalMeasure,
    RademacherMeasure,
    StudentTMeasure,
    TokenMeasure,
    UniformMeasure,
)

__all__ = [
    # sub-Gaussian, non-Gaussian inputs
    "unit_variance_input_laws",
    "RegressionTokenMeasure",
    "fluctuation_constant",
    "softmax_limit_prediction",
    "softmax_limit_risk",
    "isotropic_scale_profile",
    "quartic_bias_coefficient",
    "PairedTraining",
    "train_reduced_pair",
    "reduced_risks",
    "TrainedComparison",
    "train_and_compare",
    # heavy tails
    "ess_ratio_limit",
    "WeightStatistics",
    "softmax_weight_statistics",
    "summarise_weight_statistics",
    "HEAVY_TAIL_LAWS",
    "plot_sorted_weights",
    # temperature
    "critical_scale",
    "temperature_fluctuation_constant",
    "temperature_risk",
    # non-centred tokens
    "linear_attention_limit",
    "noncentred_limit_risks",
    "noncentred_softmax_floor",
]

KINDS = ("softmax", "linear")


def _check_measure(name, measure, *, finite_mgf=False):
    if not isinstance(measure, TokenMeasure):
        raise TypeError(f"{name} must be a softlin TokenMeasure, got {type(measure).__name__}")
    if finite_mgf and not measure.has_finite_mgf:
        raise ValueError(
            f"{name} ({type(measure).__name__}) has no finite moment generating function, so the "
            "infinite-prompt softmax limit does not exist"
        )


def _check_float(name, value, *, positive=False, nonneg=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    if nonneg and value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return float(value)


def _check_A_b(A, b, d):
    A = as_tensor_arg("A", A)
    b = as_tensor_arg("b", b)
    check_matrix("A", A, d, d)
    if b.dim() != 0:
        raise ValueError(f"b must be a scalar tensor, got shape {tuple(b.shape)}")
    check_same_dtype_device({"A": A, "b": b})
    return A, b


# ---------------------------------------------------------------------------------------------------
# 1. Sub-Gaussian but not Gaussian inputs
# ---------------------------------------------------------------------------------------------------
def unit_variance_input_laws(d=2, *, dtype=torch.float64):
    """Four input laws on R^d with independent, centred, unit-variance coordinates (covariance I).

    ``"Gaussian"`` N(0, I); ``"Rademacher"`` uniform signs; ``"uniform"`` on ``[-sqrt 3, sqrt 3]``;
    ``"mixture"``: each coordinate ``+-0.9`` plus ``N(0, 0.19)`` noise, i.e. the mixture of the ``2^d``
    Gaussians ``N(0.9 s, 0.19 I)``, ``s`` in ``{-1, 1}^d``, with equal weights (a blurred Rademacher law).
    All are sub-Gaussian; only the first has a linear ``grad Lambda``.

    Returns
    -------
    dict name -> TokenMeasure
    """
    check_positive_int("d", d)
    if d > 8:
        raise ValueError(f"d must be at most 8 (the mixture has 2^d components), got {d}")
    signs = torch.tensor([[1.0 if (k >> j) & 1 else -1.0 for j in range(d)] for k in range(2**d)], dtype=dtype)
    eye = torch.eye(d, dtype=dtype)
    return {
        "Gaussian": GaussianMeasure(torch.zeros(d, dtype=dtype), eye),
        "Rademacher": RademacherMeasure(d, dtype=dtype),
        "uniform": UniformMeasure(d, dtype=dtype),
        "mixture": GaussianMixtureMeasure(0.9 * signs, 0.19 * eye.expand(2**d, d, d).clone(),
                                          torch.full((2**d,), 2.0**-d, dtype=dtype)),
    }


class RegressionTokenMeasure(TokenMeasure):
    """Regression tokens ``z = (x, w^T x)`` in R^{d+1} for a fixed task ``w`` and any input law.

    Given the task, the token is a linear image of the input, so its log-MGF is that of the input,

        Lambda_z(a) = Lambda_x(a_x + a_y w),     a = (a_x, a_y),

    and :func:`softlin.attention_limit` with the reduced matrices ``U = diag(A, 0)``,
    ``V = b e_D e_D^T`` returns ``(0, ..., 0, b w^T grad Lambda_x(A x_q))``: the infinite-prompt prediction
    for any input law with a finite MGF. For Gaussian inputs it is chapter 5's ``b w^T Sigma A x_q``.

    Parameters
    ----------
    x_measure : TokenMeasure on R^d, the law of the inputs.
    task : Tensor, shape (d,), with the dtype and device of the measure.
    """

    def __init__(self, x_measure, task):
        _check_measure("x_measure", x_measure)
        task = as_tensor_arg("task", task)
        if tuple(task.shape) != (x_measure.dim,):
            raise ValueError(f"task must have shape (d,) = ({x_measure.dim},), got {tuple(task.shape)}")
        if task.dtype != x_measure.dtype or task.device != x_measure.device:
            raise ValueError(
                f"task has dtype {task.dtype} on {task.device}, but x_measure samples {x_measure.dtype} "
                f"on {x_measure.device}"
            )
        self.x_measure, self.task = x_measure, task
        self.dim, self.dtype, self.device = x_measure.dim + 1, x_measure.dtype, x_measure.device
        self.has_finite_mgf = x_measure.has_finite_mgf

    def sample(self, n, *, generator=None):
        x = self.x_measure.sample(n, generator=generator)  # (n, d)
        return torch.cat([x, (x @ self.task)[:, None]], dim=-1)

    def log_mgf(self, a):
        d = self.x_measure.dim
        return self.x_measure.log_mgf(a[..., :d] + a[..., d:] * self.task)

    def __repr__(self):
        return f"RegressionTokenMeasure({self.x_measure!r}, d={self.x_measure.dim})"


def fluctuation_constant(measure, queries, U, V):
    """Delta-method limit of ``L E|T[mu_hat_L](z) - T[mu](z)|^2`` for a fixed query, any law with an MGF.

    Softmax attention is a self-normalised average with weights ``w = e^{a^T z}``, ``a = U z``; the delta
    method gives ``L * MSE -> E[w^2 |V(z - m(a))|^2] / (E w)^2``. Writing the squared weight as a tilt
    by ``2a``:

        C(z) = exp(Lambda(2a) - 2 Lambda(a)) (tr(V C(2a) V^T) + |V (m(2a) - m(a))|^2),

    with ``m`` and ``C`` the tilted mean and covariance (gradient and Hessian of ``Lambda``). For Gaussian
    tokens ``N(m, Gamma)`` this is chapter 3's ``e^{a^T Gamma a}(tr(V Gamma V^T) + |V Gamma a|^2)``.

    Parameters
    ----------
    measure : TokenMeasure with a finite MGF; queries : (Q, D); U : (D, D); V : (D_out, D).

    Returns
    -------
    Tensor, shape (Q,).
    """
    _check_measure("measure", measure, finite_mgf=True)
    queries = as_tensor_arg("queries", queries)
    D = measure.dim
    check_matrix("queries", queries, None, D)
    U, V = as_tensor_arg("U", U), as_tensor_arg("V", V)
    check_matrix("U", U, D, D)
    check_matrix("V", V, None, D)
    check_same_dtype_device({"queries": queries, "U": U, "V": V})
    a = queries @ U.mT
    ratio = torch.exp(measure.log_mgf(2 * a) - 2 * measure.log_mgf(a))
    m1, m2 = measure.tilted_mean(a), measure.tilted_mean(2 * a)
    C2 = measure.tilted_covariance(2 * a)
    spread = torch.einsum("ij,qjk,ik->q", V, C2, V)
    return ratio * (spread + (((m2 - m1) @ V.mT) ** 2).sum(-1))


def _tilted_input_mean(x_measure, a):
    if isinstance(x_measure, GaussianMeasure):  # Lemma 2.1, closed form
        return x_measure.mean + a @ x_measure.cov.mT
    return x_measure.tilted_mean(a)


def _check_queries(x_measure, x_query):
    x_query = as_tensor_arg("x_query", x_query)
    check_matrix("x_query", x_query, None, x_measure.dim)
    if x_query.dtype != x_measure.dtype:
        raise ValueError(f"x_query has dtype {x_query.dtype} but x_measure samples {x_measure.dtype}")
    return x_query


def softmax_limit_prediction(x_measure, A, b, tasks, x_query):
    """Infinite-prompt prediction of the reduced softmax model, ``b w^T grad Lambda_x(A x_q)``.

    Parameters
    ----------
    x_measure : TokenMeasure on R^d with a finite MGF (the input law).
    A : (d, d); b : scalar; tasks : (B, d); x_query : (B, d).

    Returns
    -------
    Tensor, shape (B,).
    """
    _check_measure("x_measure", x_measure, finite_mgf=True)
    d = x_measure.dim
    A, b = _check_A_b(A, b, d)
    x_query = _check_queries(x_measure, x_query)
    tasks = as_tensor_arg("tasks", tasks)
    check_matrix("tasks", tasks, x_query.shape[0], d)
    check_same_dtype_device({"A": A, "b": b, "tasks": tasks, "x_query": x_query})
    return b * (tasks * _tilted_input_mean(x_measure, x_query @ A.mT)).sum(-1)


def softmax_limit_risk(x_measure, A, b, x_query, *, tau2=1.0):
    """Infinite-prompt risk of the reduced softmax model for any input law, by Monte Carlo over queries.

    With the task ``w ~ N(0, tau2 I)`` integrated out, ``R_inf(A, b) = tau2/2 E |b grad Lambda_x(A x_q) -
    x_q|^2``; the average is taken over the given queries (draw them from ``x_measure``).

    Returns
    -------
    (estimate, standard_error) : floats.
    """
    _check_measure("x_measure", x_measure, finite_mgf=True)
    d = x_measure.dim
    A, b = _check_A_b(A, b, d)
    x_query = _check_queries(x_measure, x_query)
    if x_query.shape[0] < 2:
        raise ValueError(f"x_query must hold at least 2 queries, got {x_query.shape[0]}")
    tau2 = _check_float("tau2", tau2, positive=True)
    m = _tilted_input_mean(x_measure, x_query @ A.mT)
    r = 0.5 * tau2 * ((b * m - x_query) ** 2).sum(-1)
    return float(r.mean()), float(r.std() / math.sqrt(r.shape[0]))


def isotropic_scale_profile(x_measure, alphas, x_query):
    """Best infinite-prompt softmax risk along ``A = alpha I``, the output scale ``b`` chosen optimally.

    For each ``alpha``, ``v = grad Lambda_x(alpha x_q)`` and the best ``b = E[v^T x_q] / E|v|^2`` (least
    squares), so ``R(alpha) = 1/2 (E|x_q|^2 - E[v^T x_q]^2 / E|v|^2)`` (``tau2 = 1``), all averages over the
    given queries. Zero for Gaussian inputs (``v`` is linear in ``x_q``) and for Rademacher inputs
    (``tanh(alpha x) = tanh(alpha) x`` on ``{-1, 1}``); positive for every other law with independent
    coordinates.

    Parameters
    ----------
    x_measure : TokenMeasure on R^d with a finite MGF.
    alphas : 1-D sequence of positive floats.
    x_query : Tensor (n, d), queries drawn from ``x_measure``.

    Returns
    -------
    (b_best, risk) : two float64 numpy arrays of shape (len(alphas),).
    """
    _check_measure("x_measure", x_measure, finite_mgf=True)
    x_query = _check_queries(x_measure, x_query)
    alphas = np.asarray(alphas, dtype=float)
    if alphas.ndim != 1 or alphas.size == 0 or np.any(~np.isfinite(alphas)) or np.any(alphas <= 0):
        raise ValueError(f"alphas must be a non-empty 1-D sequence of positive numbers, got {alphas!r}")
    xx = float((x_query**2).sum(-1).mean())
    b_best, risk = [], []
    for alpha in alphas:
        v = _tilted_input_mean(x_measure, float(alpha) * x_query)
        vx, vv = float((v * x_query).sum(-1).mean()), float((v * v).sum(-1).mean())
        b_best.append(vx / vv)
        risk.append(max(0.5 * (xx - vx * vx / vv), 0.0))
    return np.array(b_best), np.array(risk)


def _axis_cumulants(x_measure, j, orders):
    """Cumulants of coordinate j: derivatives of t -> Lambda(t e_j) at t = 0, by nested autograd."""
    e = torch.zeros(x_measure.dim, dtype=x_measure.dtype, device=x_measure.device)
    e[j] = 1.0

    def f(t):
        return x_measure.log_mgf(t * e)

    out, g = {}, f
    for k in range(1, max(orders) + 1):
        g = torch.func.grad(g)
        if k in orders:
            out[k] = float(g(torch.zeros((), dtype=x_measure.dtype, device=x_measure.device)))
    return out


def quartic_bias_coefficient(x_measure, *, tol=1e-8):
    """Small-``alpha`` constant ``k`` in :func:`isotropic_scale_profile`'s ``R(alpha) = k alpha^4 + O(alpha^6)``.

    For inputs with independent, identically distributed, symmetric, unit-variance coordinates, the
    cumulant expansion ``Lambda(a) = sum_j (a_j^2 / 2 + kappa_4 a_j^4 / 24 + ...)`` gives
    ``grad Lambda(alpha x) = alpha (x + kappa_4 alpha^2 x^3 / 6 + ...)`` coordinate-wise; the best output
    scale removes the part of ``x^3`` along ``x``, leaving

        k = d/2 (kappa_4 / 6)^2 (m_6 - m_4^2),    m_4 = kappa_4 + 3,  m_6 = kappa_6 + 15 kappa_4 + 15.

    ``k = 0`` for Gaussian (``kappa_4 = 0``) and Rademacher (``x^3 = x``, ``m_6 = m_4^2 = 1``) inputs.

    Returns
    -------
    float. Raises ``ValueError`` when the coordinates are not symmetric with unit variance and equal
    cumulants (to ``tol``), where the formula does not apply.
    """
    _check_measure("x_measure", x_measure, finite_mgf=True)
    cums = [_axis_cumulants(x_measure, j, (1, 2, 3, 4, 6)) for j in range(x_measure.dim)]
    for j, c in enumerate(cums):
        if abs(c[1]) > tol or abs(c[3]) > tol or abs(c[2] - 1) > tol:
            raise ValueError(
                f"coordinate {j} of x_measure must be symmetric with unit variance (cumulants 1..3 = 0, 1, 0), "
                f"got {c[1]:.3g}, {c[2]:.3g}, {c[3]:.3g}"
            )
        for k in (4, 6):
            if abs(c[k] - cums[0][k]) > tol * max(1.0, abs(cums[0][k])):
                raise ValueError(f"the coordinates of x_measure must share their cumulants; kappa_{k} differs")
    k4, k6 = cums[0][4], cums[0][6]
    m4, m6 = k4 + 3, k6 + 15 * k4 + 15
    return 0.5 * x_measure.dim * (k4 / 6) ** 2 * (m6 - m4 * m4)


@dataclass
class PairedTraining:
    """Softmax and linear reduced models trained on the same batches from the same start.

    Attributes
    ----------
    step : Tensor (n,)                      recorded steps (0, record_every, ..., steps)
    A : dict kind -> Tensor (n, d, d)
    b : dict kind -> Tensor (n,)
    loss : dict kind -> Tensor (n,)         training objective (half MSE, task integrated) on the batch
    """

    step: torch.Tensor
    A: dict
    b: dict
    loss: dict

    def final(self, kind):
        """``(A, b)`` at the last recorded step."""
        return self.A[kind][-1], self.b[kind][-1]

    def averaged(self, kind, fraction=0.5):
        """``(A, b)`` averaged over the last ``fraction`` of the recorded steps (Polyak-Ruppert averaging).

        Averaging the iterates of constant-step SGD removes most of their stationary noise around the
        point the dynamics settles at, without changing that point.
        """
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise ValueError(f"fraction must be a number in (0, 1], got {fraction!r}")
        n = max(1, int(round(fraction * len(self.step))))
        return self.A[kind][-n:].mean(0), self.b[kind][-n:].mean(0)


def train_reduced_pair(x_measure, A0, b0, L, *, steps, lr, batch_size, generator, record_every=None,
                       tau2=1.0):
    """Online SGD on ``R_L`` for the reduced softmax *and* linear models, inputs from any law.

    At every step a fresh batch of ``batch_size`` prompts ``(x_1..x_L, x_q)`` is drawn from ``x_measure``
    (the query input from the same law) and each model takes one step of size ``lr`` on the average of
    :func:`softlin.icl.conditional_risk` (task integrated out exactly, no label noise). Both models see the
    same batches (common random numbers), so their difference is not sampling noise.

    Parameters
    ----------
    x_measure : TokenMeasure on R^d (anything with ``sample``; no MGF needed).
    A0 : (d, d); b0 : scalar, the common start (dtype of ``x_measure``).
    L, steps, batch_size : positive ints; lr : float > 0.
    record_every : int, default ``max(1, steps // 50)``.

    Returns
    -------
    PairedTraining
    """
    _check_measure("x_measure", x_measure)
    d = x_measure.dim
    A0, b0 = _check_A_b(A0, b0, d)
    if A0.dtype != x_measure.dtype:
        raise ValueError(f"A0 has dtype {A0.dtype} but x_measure samples {x_measure.dtype}")
    for name, v in (("L", L), ("steps", steps), ("batch_size", batch_size)):
        check_positive_int(name, v)
    lr = _check_float("lr", lr, positive=True)
    tau2 = _check_float("tau2", tau2, positive=True)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    record_every = max(1, steps // 50) if record_every is None else record_every
    check_positive_int("record_every", record_every)
    params = {k: (A0.detach().clone().requires_grad_(True), b0.detach().clone().requires_grad_(True))
              for k in KINDS}
    rec = {"step": [], **{(k, f): [] for k in KINDS for f in ("A", "b", "loss")}}
    for step in range(steps + 1):
        x = x_measure.sample(batch_size * (L + 1), generator=generator).reshape(batch_size, L + 1, d)
        record = step % record_every == 0 or step == steps
        if record:
            rec["step"].append(step)
        for kind, (A, b) in params.items():
            loss = icl.conditional_risk(A, b, x[:, :L], x[:, L], kind=kind, tau2=tau2).mean()
            if record:
                rec[kind, "A"].append(A.detach().clone())
                rec[kind, "b"].append(b.detach().clone())
                rec[kind, "loss"].append(loss.detach().clone())
            if step == steps:
                continue
            gA, gb = torch.autograd.grad(loss, (A, b))
            with torch.no_grad():
                A -= lr * gA
                b -= lr * gb
    return PairedTraining(
        step=torch.tensor(rec["step"]),
        A={k: torch.stack(rec[k, "A"]) for k in KINDS},
        b={k: torch.stack(rec[k, "b"]) for k in KINDS},
        loss={k: torch.stack(rec[k, "loss"]) for k in KINDS},
    )


def reduced_risks(x_measure, models, L, *, n_prompts, generator, batch_size=2048, tau2=1.0):
    """Finite-prompt risks ``R_L`` of several reduced models on the *same* prompts (inputs from any law).

    Parameters
    ----------
    x_measure : TokenMeasure on R^d.
    models : list of ``(A, b, kind)`` with ``kind`` in ``("softmax", "linear")``.
    L, n_prompts : positive ints (n_prompts >= 2).

    Returns
    -------
    (mean, stderr, diff_cov) : float64 tensors of shapes (n,), (n,) and (n, n); ``diff_cov`` is the
    covariance of the estimates (shared prompts), for standard errors of differences:
    ``se(R_i - R_j)^2 = C_ii + C_jj - 2 C_ij``.
    """
    _check_measure("x_measure", x_measure)
    d = x_measure.dim
    if not models:
        raise ValueError("models must hold at least one (A, b, kind) triple")
    checked = []
    for i, model in enumerate(models):
        if not (isinstance(model, tuple) and len(model) == 3):
            raise TypeError(f"models[{i}] must be a tuple (A, b, kind), got {model!r}")
        A, b, kind = model
        A, b = _check_A_b(A, b, d)
        if kind not in KINDS:
            raise ValueError(f"models[{i}] kind must be one of {KINDS}, got {kind!r}")
        checked.append((A.detach().to(x_measure.dtype), b.detach().to(x_measure.dtype), kind))
    check_positive_int("L", L)
    check_positive_int("n_prompts", n_prompts)
    check_positive_int("batch_size", batch_size)
    if n_prompts < 2:
        raise ValueError(f"n_prompts must be at least 2, got {n_prompts}")
    tau2 = _check_float("tau2", tau2, positive=True)
    check_generator(generator)
    rows, done = [], 0
    with torch.no_grad():
        while done < n_prompts:
            n = min(batch_size, n_prompts - done)
            x = x_measure.sample(n * (L + 1), generator=generator).reshape(n, L + 1, d)
            rows.append(torch.stack([icl.conditional_risk(A, b, x[:, :L], x[:, L], kind=k, tau2=tau2)
                                     for A, b, k in checked], dim=-1).double())
            done += n
    r = torch.cat(rows)  # (n_prompts, n_models)
    cov = torch.cov(r.T).reshape(len(checked), len(checked)) / n_prompts
    return r.mean(0), cov.diagonal().sqrt(), cov


@dataclass
class TrainedComparison:
    """Softmax and linear reduced models trained together and evaluated on common prompts.

    Attributes
    ----------
    L : int
    run : PairedTraining                 the training record
    A, b : dict kind -> Tensor           parameters averaged over the second half of the run
    risk, risk_se : dict kind -> float   ``R_L`` at those parameters and its standard error
    diff_se : float                      standard error of ``risk["softmax"] - risk["linear"]`` (paired)
    """

    L: int
    run: PairedTraining
    A: dict
    b: dict
    risk: dict
    risk_se: dict
    diff_se: float


def train_and_compare(x_measure, A0, b0, L, *, steps, lr, batch_size, eval_prompts, generator,
                      fraction=0.5):
    """:func:`train_reduced_pair`, Polyak-Ruppert averaging, then :func:`reduced_risks` on common prompts.

    Parameters
    ----------
    x_measure, A0, b0, L, steps, lr, batch_size, generator : as :func:`train_reduced_pair`.
    eval_prompts : int, test prompts shared by the two models.
    fraction : float in (0, 1], share of the recorded iterates that is averaged (default: second half).

    Returns
    -------
    TrainedComparison
    """
    run = train_reduced_pair(x_measure, A0, b0, L, steps=steps, lr=lr, batch_size=batch_size,
                             generator=generator)
    params = {k: run.averaged(k, fraction) for k in KINDS}
    models = [(*params[k], k) for k in KINDS]
    mean, se, cov = reduced_risks(x_measure, models, L, n_prompts=eval_prompts, generator=generator)
    diff_se = math.sqrt(max(float(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]), 0.0))
    return TrainedComparison(
        L=L, run=run, A={k: params[k][0] for k in KINDS}, b={k: params[k][1] for k in KINDS},
        risk={k: float(mean[i]) for i, k in enumerate(KINDS)},
        risk_se={k: float(se[i]) for i, k in enumerate(KINDS)}, diff_se=diff_se,
    )


# ---------------------------------------------------------------------------------------------------
# 2. Heavy tails
# ---------------------------------------------------------------------------------------------------
def ess_ratio_limit(measure, a):
    """Large-``L`` limit of ``ESS / L`` for softmax weights ``p_i ∝ exp(a^T z_i)``: ``M(a)^2 / M(2a)``.

    ``ESS = (sum w_i)^2 / sum w_i^2`` with ``w_i = e^{a^T z_i}``, so by the law of large numbers
    ``ESS / L -> (E w)^2 / E w^2 = exp(2 Lambda(a) - Lambda(2a))``: ``exp(-a^T Gamma a)`` for Gaussian tokens,
    ``prod_j cosh(a_j)^2 / cosh(2 a_j)`` for Rademacher signs, and 0 when the MGF is infinite (heavy tails:
    the ESS then stays bounded while L grows).

    Parameters
    ----------
    measure : TokenMeasure; a : Tensor (D,).

    Returns
    -------
    float in [0, 1].
    """
    _check_measure("measure", measure)
    a = as_tensor_arg("a", a)
    if tuple(a.shape) != (measure.dim,):
        raise ValueError(f"a must have shape (D,) = ({measure.dim},), got {tuple(a.shape)}")
    if not measure.has_finite_mgf:
        return 0.0 if bool((a != 0).any()) else 1.0
    return float(torch.exp(2 * measure.log_mgf(a) - measure.log_mgf(2 * a)))


@dataclass
class WeightStatistics:
    """Per-prompt statistics of softmax attention ``p_i ∝ exp(a^T z_i)`` over ``n_prompts`` prompts.

    Attributes
    ----------
    L : int
    ess : Tensor (n_prompts,)          effective sample size ``1 / sum_i p_i^2``
    max_weight : Tensor (n_prompts,)   ``max_i p_i``
    output : Tensor (n_prompts, D)     ``sum_i p_i z_i`` (attention with ``V = I``)
    """

    L: int
    ess: torch.Tensor
    max_weight: torch.Tensor
    output: torch.Tensor

    def quantiles(self, what, q=(0.25, 0.5, 0.75)):
        """Quantiles over prompts of ``ess / L``, ``max_weight`` or the output's first coordinate."""
        vals = {"ess_ratio": self.ess / self.L, "max_weight": self.max_weight,
                "output": self.output[:, 0]}
        if what not in vals:
            raise ValueError(f"what must be one of {sorted(vals)}, got {what!r}")
        v = vals[what].double()
        return torch.quantile(v, torch.tensor(q, dtype=torch.float64)).numpy()


def softmax_weight_statistics(measure, a, L, n_prompts, *, generator, max_batch_tokens=2**21):
    """Softmax weights of a fixed tilt ``a`` (the query's ``U z``) over prompts of ``L`` tokens from ``measure``.

    Works for any law, with or without a moment generating function: nothing here needs the limit.

    Parameters
    ----------
    measure : TokenMeasure on R^D; a : Tensor (D,), the tilt; L, n_prompts : positive ints.
    generator : torch.Generator; max_batch_tokens : tokens held in memory at once.

    Returns
    -------
    WeightStatistics
    """
    _check_measure("measure", measure)
    a = as_tensor_arg("a", a)
    if tuple(a.shape) != (measure.dim,):
        raise ValueError(f"a must have shape (D,) = ({measure.dim},), got {tuple(a.shape)}")
    check_positive_int("L", L)
    check_positive_int("n_prompts", n_prompts)
    check_positive_int("max_batch_tokens", max_batch_tokens)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    a = a.to(measure.dtype)
    batch = max(1, max_batch_tokens // L)
    ess, pmax, out = [], [], []
    for start in range(0, n_prompts, batch):
        n = min(batch, n_prompts - start)
        z = measure.sample(n * L, generator=generator).reshape(n, L, measure.dim)
        p = torch.softmax(z @ a, dim=-1)  # (n, L)
        ess.append(1.0 / (p * p).sum(-1))
        pmax.append(p.amax(-1))
        out.append(torch.bmm(p[:, None, :], z)[:, 0])
    return WeightStatistics(L, torch.cat(ess), torch.cat(pmax), torch.cat(out))


def summarise_weight_statistics(stats):
    """Robust summaries of :func:`softmax_weight_statistics` over a sequence of prompt lengths.

    Parameters
    ----------
    stats : sequence of WeightStatistics with increasing ``L`` (at least 2).

    Returns
    -------
    dict of numpy arrays over the lengths: ``L``, ``ess_ratio`` (median ESS / L), ``ess`` (median ESS),
    ``max_weight`` (median), ``median`` and ``iqr`` (median and interquartile range of the output's first
    coordinate), and the float ``iqr_slope``, the least-squares slope of ``log iqr`` against ``log L``
    (``-1/2`` when the output concentrates at the parametric rate).
    """
    stats = list(stats)
    if len(stats) < 2 or not all(isinstance(s, WeightStatistics) for s in stats):
        raise ValueError("stats must hold at least two WeightStatistics (one per prompt length)")
    L = np.array([s.L for s in stats], dtype=float)
    if np.any(np.diff(L) <= 0):
        raise ValueError(f"stats must have increasing prompt lengths, got {L.tolist()}")
    ess_ratio = np.array([s.quantiles("ess_ratio")[1] for s in stats])
    q = np.array([s.quantiles("output") for s in stats])  # (n_L, 3) quartiles
    iqr = q[:, 2] - q[:, 0]
    return {
        "L": L, "ess_ratio": ess_ratio, "ess": ess_ratio * L,
        "max_weight": np.array([s.quantiles("max_weight")[1] for s in stats]),
        "median": q[:, 1], "iqr": iqr,
        "iqr_slope": float(np.polyfit(np.log(L), np.log(iqr), 1)[0]),
    }


#: The four one-dimensional token laws of the heavy-tail comparison (name -> measure), float64.
HEAVY_TAIL_LAWS = {
    "Gaussian": lambda: GaussianMeasure(torch.zeros(1, dtype=torch.float64), torch.eye(1, dtype=torch.float64)),
    "Rademacher": lambda: RademacherMeasure(1),
    "Student-t (3 dof)": lambda: StudentTMeasure(1, 3.0),
    "log-normal": lambda: LogNormalMeasure(1, 1.0),
}


def plot_sorted_weights(ax, law="Student-t (3 dof)", L=1000, *, a=1.0, n_show=30, seed=0):
    """Draw the ``n_show`` largest softmax weights of one prompt of ``L`` tokens, sorted (log-log).

    Tokens follow ``HEAVY_TAIL_LAWS[law]`` in D = 1 and the weights are ``p_i ∝ exp(a x_i)``. A dashed
    line marks ``1 / ESS`` and a dotted one the uniform weight ``1 / L``. For sub-Gaussian laws the top
    weights are all of order ``1 / L``; for heavy tails the first one is close to 1.

    Returns
    -------
    dict with ``weights`` (the top ``n_show``, numpy) and ``ess`` (float), for tests and captions.
    """
    if law not in HEAVY_TAIL_LAWS:
        raise ValueError(f"law must be one of {list(HEAVY_TAIL_LAWS)}, got {law!r}")
    check_positive_int("L", L)
    check_positive_int("n_show", n_show)
    a = _check_float("a", a)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    gen = torch.Generator().manual_seed(seed)
    x = HEAVY_TAIL_LAWS[law]().sample(L, generator=gen)[:, 0]
    p = torch.softmax(a * x, dim=0)
    top = torch.sort(p, descending=True).values[: min(n_show, L)].numpy()
    ess = float(1.0 / (p * p).sum())
    ranks = np.arange(1, top.size + 1)
    ax.plot(ranks, top, marker="o", linestyle="-", color="#0072B2", label="largest weights")
    ax.axhline(1.0 / ess, color="#D55E00", linestyle="--", marker="", label="1 / ESS")
    ax.axhline(1.0 / L, color="0.3", linestyle=":", marker="", label="1 / L")
    ax.set(xscale="log", yscale="log", ylim=(min(0.3 / L, top.min() / 2), 1.5), xlabel="rank",
           ylabel="softmax weight")
    ax.set_title(f"{law}, L = {L}\nESS = {ess:.3g}, top weight {top[0]:.2f}", fontsize=9)
    return {"weights": top, "ess": ess}


# ---------------------------------------------------------------------------------------------------
# 3. Temperature
# ---------------------------------------------------------------------------------------------------
def _check_sigma(Sigma):
    Sigma = as_tensor_arg("Sigma", Sigma)
    if Sigma.dim() != 2 or Sigma.shape[0] != Sigma.shape[1]:
        raise ValueError(f"Sigma must be a square matrix (d, d), got shape {tuple(Sigma.shape)}")
    check_psd("Sigma", Sigma)
    if float(torch.linalg.eigvalsh(Sigma).min()) <= 0:
        raise ValueError("Sigma must be positive definite")
    return Sigma


def critical_scale(Sigma):
    """The scale ``s_c = c / sqrt(2)``, ``c^2 = tr(Sigma^-2)^(1/2) = b*^2``, of the regression model.

    At ``(s A*, b* / s)`` the query-averaged fluctuation constant involves ``E exp((s/c)^2 chi^2_d)``,
    finite if and only if ``(s/c)^2 < 1/2``. About 1.402 for d = 5, KMS 0.5 (``c^2 ≈ 3.93``).
    """
    Sigma = _check_sigma(Sigma)
    _, b_star = icl.bayes_optimal_parameters(Sigma)
    return float(b_star) / math.sqrt(2.0)


def temperature_fluctuation_constant(Sigma, s):
    """``lim L R_L(s A*, b*/s)`` (delta method): :func:`softlin.icl.risk_fluctuation_constant` at that point.

    ``inf`` for ``s >= critical_scale(Sigma)``.
    """
    Sigma = _check_sigma(Sigma)
    s = _check_float("s", s, positive=True)
    A_star, b_star = icl.bayes_optimal_parameters(Sigma)
    return icl.risk_fluctuation_constant(s * A_star, b_star / s, Sigma)


def temperature_risk(Sigma, s_values, L, n_prompts, *, generator, n_nodes=16, dtype=torch.float32,
                     max_batch_elements=2**22):
    """Finite-prompt risk ``R_L(s A*, b*/s)`` of the regression model, for several scales ``s`` at once.

    All these points have the infinite-prompt prediction ``w^T x_q`` (zero infinite-prompt risk); ``s``
    only sets the temperature. Writing ``x = Sigma^{1/2} g``, the scores are ``u g_i^T g_q`` with
    ``u = s / c`` and ``c = b*``, and the risk is ``1/2 (b v - x_q)^T Sigma (b v - x_q)``. By rotation
    invariance of ``g`` it depends on the query only through ``r = |g_q|`` (``r^2 ~ chi^2_d``), and, with
    ``g_q = r e_1``, only the first coordinates of the tokens enter the weights:

        R_L = tr(Sigma)/d * 1/2 E_r E[(sum_i p_i g_i1 / u - r)^2 + (d - 1) sum_i p_i^2 / u^2],
        p_i ∝ exp(u r g_i1),  g_i1 ~ N(0, 1).

    This is exact (no approximation beyond Monte Carlo): the expectation over ``r`` is a generalized
    Gauss-Laguerre rule in ``r^2 / 2`` with ``n_nodes`` nodes, and the expectation over prompts is Monte
    Carlo over ``n_prompts`` prompts of ``L`` scalar tokens shared by all ``s`` (common random numbers).

    Parameters
    ----------
    Sigma : (d, d) positive definite; s_values : 1-D sequence of positive scales.
    L, n_prompts : ints (n_prompts >= 2); generator : torch.Generator.
    n_nodes : int, Gauss-Laguerre nodes over the query radius (12-16 suffice: the integrand is smooth).
    dtype : simulation dtype (float32 by default; sums are accumulated in float64).

    Returns
    -------
    (mean, stderr) : float64 numpy arrays of shape (len(s_values),).
    """
    from scipy.special import gammaln, roots_genlaguerre

    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    s_values = np.asarray(s_values, dtype=float)
    if s_values.ndim != 1 or s_values.size == 0 or np.any(~np.isfinite(s_values)) or np.any(s_values <= 0):
        raise ValueError(f"s_values must be a non-empty 1-D sequence of positive numbers, got {s_values!r}")
    check_positive_int("L", L)
    check_positive_int("n_prompts", n_prompts)
    check_positive_int("n_nodes", n_nodes)
    check_positive_int("max_batch_elements", max_batch_elements)
    if n_prompts < 2:
        raise ValueError(f"n_prompts must be at least 2, got {n_prompts}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    _, b_star = icl.bayes_optimal_parameters(Sigma)
    c = float(b_star)
    t, w = roots_genlaguerre(n_nodes, d / 2 - 1)
    r = torch.tensor(np.sqrt(2 * t), dtype=dtype)  # (n_nodes,) query radii
    w = torch.tensor(w / math.exp(gammaln(d / 2)), dtype=torch.float64)  # weights sum to 1
    scale = float(torch.trace(Sigma)) / d
    per_prompt = torch.zeros(n_prompts, s_values.size, dtype=torch.float64)
    batch = max(1, max_batch_elements // (L * n_nodes))
    with torch.no_grad():
        for start in range(0, n_prompts, batch):
            n = min(batch, n_prompts - start)
            g = torch.randn(n, 1, L, generator=generator, dtype=dtype)  # first token coordinates
            for k, s in enumerate(s_values):
                u = s / c
                p = torch.softmax((u * r)[None, :, None] * g, dim=-1)  # (n, n_nodes, L)
                m1 = (p * g).sum(-1)
                p2 = (p * p).sum(-1)
                val = ((m1 / u - r) ** 2 + (d - 1) * p2 / u**2).double()  # (n, n_nodes)
                per_prompt[start : start + n, k] = 0.5 * scale * (val @ w)
    mean = per_prompt.mean(0)
    se = per_prompt.std(0) / math.sqrt(n_prompts)
    return mean.numpy(), se.numpy()


# ---------------------------------------------------------------------------------------------------
# 4. Non-centred tokens
# ---------------------------------------------------------------------------------------------------
def linear_attention_limit(measure, queries, U, V):
    """Infinite-prompt normalised linear attention ``V E_mu[z z^T] U z`` for any law with second moments.

    ``E[z z^T] = Cov + m m^T``; for a law with a finite MGF both come from ``Lambda_mu`` at 0 (its gradient
    and Hessian), for a Gaussian from its parameters. Compare :func:`softlin.attention_limit`: for
    ``N(m, Gamma)`` the two differ by ``V(m - m m^T U z)``.

    Parameters
    ----------
    measure : TokenMeasure with a finite MGF; queries : (..., Q, D); U : (D, D); V : (D_out, D).

    Returns
    -------
    Tensor, shape (..., Q, D_out).
    """
    _check_measure("measure", measure, finite_mgf=True)
    queries = as_tensor_arg("queries", queries, min_dim=1)
    U, V = as_tensor_arg("U", U), as_tensor_arg("V", V)
    D = measure.dim
    if queries.shape[-1] != D:
        raise ValueError(f"queries must have last dimension D = {D}, got shape {tuple(queries.shape)}")
    check_matrix("U", U, D, D)
    check_matrix("V", V, None, D)
    check_same_dtype_device({"queries": queries, "U": U, "V": V})
    if isinstance(measure, GaussianMeasure):
        m, C = measure.mean, measure.cov
    else:
        zero = torch.zeros(D, dtype=measure.dtype, device=measure.device)
        m, C = measure.tilted_mean(zero), measure.tilted_covariance(zero)
    second = C + torch.outer(m, m)
    return queries @ U.mT @ second @ V.mT


def _noncentred_args(A, b, mean, Sigma, tau2):
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    A, b = _check_A_b(A, b, d)
    mean = as_tensor_arg("mean", mean)
    if tuple(mean.shape) != (d,):
        raise ValueError(f"mean must have shape (d,) = ({d},), got {tuple(mean.shape)}")
    check_same_dtype_device({"A": A, "b": b, "mean": mean, "Sigma": Sigma})
    return A, b, mean, Sigma, _check_float("tau2", tau2, positive=True)


def noncentred_limit_risks(A, b, mean, Sigma, *, tau2=1.0):
    """Infinite-prompt risks of the reduced softmax and linear models for inputs ``x ~ N(m, Sigma)``.

    The prompt inputs and the query input are ``N(m, Sigma)``, the task ``w ~ N(0, tau2 I)``, no noise. By
    Lemma 2.1 the softmax prediction is ``b w^T (m + Sigma A x_q)`` and the linear one
    ``b w^T (Sigma + m m^T) A x_q``. With ``K = b Sigma A`` and ``K' = b (Sigma + m m^T) A``:

        R_soft = tau2/2 (|(K - I) m + b m|^2 + tr((K - I) Sigma (K - I)^T)),
        R_lin  = tau2/2 tr((K' - I)(Sigma + m m^T)(K' - I)^T).

    Returns
    -------
    (R_soft, R_lin) : floats.
    """
    A, b, m, Sigma, tau2 = _noncentred_args(A, b, mean, Sigma, tau2)
    eye = torch.eye(Sigma.shape[0], dtype=Sigma.dtype, device=Sigma.device)
    J = b * Sigma @ A - eye
    soft = ((J @ m + b * m) ** 2).sum() + torch.trace(J @ Sigma @ J.mT)
    second = Sigma + torch.outer(m, m)
    Jl = b * second @ A - eye
    lin = torch.trace(Jl @ second @ Jl.mT)
    return float(0.5 * tau2 * soft), float(0.5 * tau2 * lin)


def noncentred_softmax_floor(b, mean, Sigma, *, tau2=1.0):
    """The smallest infinite-prompt softmax risk at output scale ``b``, and where it is reached.

    Minimising :func:`noncentred_limit_risks`' ``R_soft`` over ``K = b Sigma A`` (row by row, a ridge
    problem) gives ``K(b) = I - b m m^T (Sigma + m m^T)^{-1}`` and

        min_A R_soft(A, b) = tau2/2 * b^2 |m|^2 / (1 + m^T Sigma^{-1} m),

    positive for every ``b != 0`` when ``m != 0``: the reduced softmax model cannot fit non-centred inputs
    at any finite temperature; the floor vanishes only as ``b -> 0`` with ``A = Sigma^{-1} K / b``
    unbounded.

    Returns
    -------
    (floor, K) : float and Tensor (d, d).
    """
    Sigma = _check_sigma(Sigma)
    d = Sigma.shape[0]
    b = as_tensor_arg("b", b)
    if b.dim() != 0:
        raise ValueError(f"b must be a scalar tensor, got shape {tuple(b.shape)}")
    mean = as_tensor_arg("mean", mean)
    if tuple(mean.shape) != (d,):
        raise ValueError(f"mean must have shape (d,) = ({d},), got {tuple(mean.shape)}")
    check_same_dtype_device({"b": b, "mean": mean, "Sigma": Sigma})
    tau2 = _check_float("tau2", tau2, positive=True)
    kappa = mean @ torch.linalg.solve(Sigma, mean)
    second = Sigma + torch.outer(mean, mean)
    K = torch.eye(d, dtype=Sigma.dtype, device=Sigma.device) - b * torch.outer(mean, mean) @ torch.linalg.inv(second)
    floor = 0.5 * tau2 * b**2 * (mean @ mean) / (1 + kappa)
    return float(floor), K
