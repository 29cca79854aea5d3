"""Stability along the training trajectory (Section 4, Appendix D) on the reduced regression model of
Section 5: ``theta = (A, b)``, ``U = diag(A, 0)``, ``V = b e_D e_D^T``, noiseless labels, task ``N(0, I)``,
inputs ``x_i, x_q ~ N(0, Sigma)``. With the task integrated out a prompt contributes ``c_L = 1/2 ||b m -
x_q||^2`` to ``R_L``, ``m`` the mean of its inputs tilted towards ``A x_q`` (softlin.attention), and on the
same query ``c_inf = 1/2 ||b Sigma A x_q - x_q||^2`` has mean ``R_inf`` (Lemma 2.1): the control variate
``c_L - c_inf = b^2 delta2 - b delta1`` (:func:`gap_terms`, :func:`risk_gap`) has lost the query's own fluctuation.
"""

from __future__ import annotations

import numpy as np
import torch

from . import icl
from ._checks import (
    as_real_array,
    as_tensor_arg,
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
    validated_by,
)
from ._progress import progress
from .attention import linear_mean, tilted_mean
from .measures import GaussianMeasure
from .montecarlo import mean_and_stderr, prompt_batches

__all__ = [
    "EmpiricalRisk",
    "gap_terms",
    "gronwall_envelope",
    "infinite_risk_hessian",
    "risk_gap",
    "trajectory_distance",
]

KINDS = icl.KINDS
SCORES_PER_BATCH = 2**22  # (prompt, token, matrix) scores held at once when prompts are drawn


def _check_A(A, d):  # A (d, d), or a batch (K, d, d) of matrices on the same prompts
    A = as_tensor_arg("A", A)
    check_matrix("A[k]", A[0], d, d) if A.dim() == 3 and len(A) else check_matrix("A", A, d, d)
    return A


def _check_draw(Sigma, L, n_prompts, generator, kind, dtype, *, K=1, at_once=False):
    """Sizes of a sample of prompts: ``n_prompts >= 2`` prompts of ``L`` inputs, drawn in batches of
    about ``SCORES_PER_BATCH / K`` tokens (or ``at_once``), within the machine's memory and the draws a
    call makes."""
    check_positive_int("L", L)
    check_positive_int("n_prompts", n_prompts, minimum=2)
    check_generator(generator, required=True)
    check_choice("kind", kind, KINDS)
    check_dtype_device(dtype, None, optional_dtype=True)
    sizes, d = f"L = {L}, n_prompts = {n_prompts}", Sigma.shape[0]
    check_draws(sizes, (L + 1) * n_prompts, what="prompt tokens")
    per_batch = n_prompts if at_once else max(1, SCORES_PER_BATCH // K // (L + 1))
    n_bytes = 8 * (min(per_batch, n_prompts) * (L + 1) * (2 * d + 3 * K) + 4 * n_prompts * K)
    check_memory(sizes, n_bytes, device=Sigma.device, what="the prompts")


def _inputs(Sigma, L, n_prompts, generator, dtype, max_tokens):
    """Batches (x (n, L, d), x_query (n, d)) of i.i.d. N(0, Sigma) inputs, n (L + 1) <= max_tokens."""
    law = GaussianMeasure(
        torch.zeros(Sigma.shape[0], dtype=dtype, device=Sigma.device), Sigma.to(dtype)
    )
    for z in prompt_batches(law, L + 1, n_prompts, generator=generator, max_tokens=max_tokens):
        yield z[:, :L], z[:, L]


def _check_inputs(x, x_query, Sigma, kind, *, min_prompts=1):
    """Prompts' inputs x (n, L, d), n >= min_prompts, and queries x_query (n, d) for a checked Sigma
    (d, d)."""
    check_choice("kind", kind, KINDS)
    d = Sigma.shape[0]
    x = as_tensor_arg("x", x)
    x_query = as_tensor_arg("x_query", x_query)
    if x.dim() != 3 or x.shape[-1] != d or x.shape[0] < min_prompts:
        raise ValueError(
            f"x must have shape (n, L, {d}) with n >= {min_prompts}, got {tuple(x.shape)}"
        )
    check_matrix("x_query", x_query, x.shape[0], d)
    check_same_dtype_device({"x": x, "x_query": x_query, "Sigma": Sigma})


def _check_gap_terms(A, x, x_query, Sigma, *, kind="softmax"):
    Sigma = check_sigma(Sigma)
    check_same_dtype_device({"A": _check_A(A, Sigma.shape[0]), "Sigma": Sigma})
    _check_inputs(x, x_query, Sigma, kind)


@validated_by(_check_gap_terms)
def gap_terms(A, x, x_query, Sigma, *, kind="softmax"):
    """Per-prompt terms ``(delta2, delta1)`` of the risk gap: ``c_L - c_inf = b^2 delta2 - b delta1``
    (module docstring; lesson 4's delta_2 and delta_1).

    ``delta2 = 1/2 (||m||^2 - ||Sigma A x_q||^2)``, ``delta1 = (m - Sigma A x_q) . x_q``, ``m`` the inputs'
    mean tilted
    towards ``A x_q`` (``kind="linear"``: the linear-attention mean); differentiable.

    ``A`` (d, d), or (K, d, d) for K matrices on the same prompts (K more tilt directions); ``x`` (n, L, d)
    and ``x_query`` (n, d) the prompts' inputs and queries; ``Sigma`` (d, d) positive definite. Returns
    ``(delta2, delta1)``, Tensors (n,), or (n, K) for batched ``A``. TypeError or ValueError on non-tensors,
    mismatched shapes, dtypes or devices, a bad ``Sigma`` or ``kind``.
    """
    As = A if A.dim() == 3 else A[None]
    a = torch.einsum("kij,nj->nki", As, x_query)  # (n, K, d): tilt directions A_k x_q
    m = (tilted_mean if kind == "softmax" else linear_mean).kernel(x, a)  # (n, K, d)
    lim = a @ Sigma  # (n, K, d): the infinite-prompt mean Sigma A_k x_q (Sigma symmetric)
    delta2 = 0.5 * ((m * m).sum(-1) - (lim * lim).sum(-1))
    delta1 = ((m - lim) * x_query[:, None, :]).sum(-1)
    return (delta2, delta1) if A.dim() == 3 else (delta2[:, 0], delta1[:, 0])


def risk_gap(A, b, Sigma, L, *, n_prompts, generator, kind="softmax", dtype=None):
    """Monte Carlo ``R_L(A, b) - R_inf(A, b)`` by the control variate :func:`gap_terms`.

    ``A`` (d, d) with ``b`` a scalar tensor, or (K, d, d) with ``b`` (K,): K points on the same prompts;
    ``n_prompts >= 2`` prompts of length ``L`` from ``generator``, simulated in ``dtype`` (default that of
    ``Sigma``; float32 halves the cost). Returns a softlin.montecarlo.MonteCarloEstimate (floats, or
    float64 tensors (K,) for batched ``A``). Errors as :func:`gap_terms`.
    """
    Sigma = check_sigma(Sigma)
    As, b = _check_A(A, Sigma.shape[0]), as_tensor_arg("b", b)
    if tuple(b.shape) != tuple(As.shape[:-2]):
        raise ValueError(
            f"b must have shape {tuple(As.shape[:-2])} for A of shape {tuple(As.shape)}, "
            f"got {tuple(b.shape)}"
        )
    K = As.shape[0] if As.dim() == 3 else 1
    _check_draw(Sigma, L, n_prompts, generator, kind, dtype, K=K)
    dtype = Sigma.dtype if dtype is None else dtype
    As, bs = (t.detach().to(dtype=dtype, device=Sigma.device) for t in (As, b))
    parts, batches = [], _inputs(Sigma, L, n_prompts, generator, dtype, SCORES_PER_BATCH // K)
    with torch.no_grad():
        for x, xq in progress(batches, work=n_prompts * (L + 1) * Sigma.shape[0]):
            delta2, delta1 = gap_terms.kernel(As, x, xq, Sigma.to(dtype), kind=kind)
            parts.append((bs * bs * delta2 - bs * delta1).double().cpu())
    return mean_and_stderr(torch.cat(parts))


class EmpiricalRisk:
    """The finite-prompt risk ``R_hat_L = R_inf + gap`` on one fixed sample of prompts, and its flow.

    ``gap = mean_i (b^2 u_i - b v_i)`` (:func:`gap_terms`) on ``x`` (n, L, d), ``x_query`` (n, d) (n >= 2;
    they set the dtype) or on prompts from :meth:`draw`. Its gradient flow (:meth:`flow`, gradients by
    autograd through the attention engine) is full-batch training in continuous time, ``theta_L(t)``.
    The methods at a point ``(A (d, d), b scalar)`` check it; the flow checks its start once and its
    right-hand side (:meth:`velocity` unchecked, ``_velocity``) checks nothing.
    """

    def __init__(self, Sigma, x, x_query, *, kind="softmax"):
        Sigma = check_sigma(Sigma)
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        Sigma_x = Sigma.detach().to(dtype=x.dtype, device=x.device)  # the prompts set the dtype
        _check_inputs(x, x_query, Sigma_x, kind, min_prompts=2)
        self._start(Sigma, Sigma_x, x, x_query, kind)

    def _start(self, Sigma, Sigma_x, x, x_query, kind):
        self.Sigma64, self.Sigma = Sigma.detach().double().cpu(), Sigma_x
        self.x, self.x_query, self.kind, self.L = x, x_query, kind, x.shape[1]
        self.last_nfev = 0  # velocity evaluations of the last call to flow()
        return self

    @classmethod
    def draw(cls, Sigma, L, n_prompts, *, generator, kind="softmax", dtype=None):
        """The risk on ``n_prompts`` prompts of length ``L`` drawn from ``generator`` in ``dtype``."""
        Sigma = check_sigma(Sigma)
        _check_draw(Sigma, L, n_prompts, generator, kind, dtype, at_once=True)
        dtype = Sigma.dtype if dtype is None else dtype
        x, x_query = next(_inputs(Sigma, L, n_prompts, generator, dtype, n_prompts * (L + 1)))
        return cls.__new__(cls)._start(Sigma, Sigma.detach().to(dtype), x, x_query, kind)

    def _check_point(self, A, b, names=("A", "b")):
        icl._reduced_args(A, b, d=self.Sigma.shape[0], names=names)

    @validated_by(_check_point)
    def gap(self, A, b):
        """The sample risk gap at ``(A (d, d), b scalar)``: a scalar Tensor, differentiable."""
        delta2, delta1 = gap_terms.kernel(A, self.x, self.x_query, self.Sigma, kind=self.kind)
        return (b * b * delta2 - b * delta1).mean()

    @validated_by(_check_point)
    def value(self, A, b):
        """``R_hat_L(A, b) = R_inf(A, b) + gap(A, b)`` (float)."""
        A, b = (t.detach().double().cpu() for t in (A, b))
        with torch.no_grad():
            gap = float(self._gap(A.to(self.x.dtype), b.to(self.x.dtype)))
        return float(icl.infinite_prompt_risk.kernel(A, b, self.Sigma64)) + gap

    @validated_by(_check_point)
    def gap_gradient(self, A, b):
        """Gradient of :meth:`gap` at ``(A, b)`` by autograd: ``(dA (d, d), db scalar)``, float64."""
        A, b = (t.detach().to(self.x.dtype).requires_grad_(True) for t in (A, b))
        return tuple(g.double().cpu() for g in torch.autograd.grad(self._gap(A, b), (A, b)))

    @validated_by(_check_point)
    def velocity(self, A, b):
        """The flow's right-hand side ``-grad R_hat_L = -grad R_inf - grad gap`` at ``(A, b)`` (float64)."""
        A, b = (t.detach().double().cpu() for t in (A, b))
        # the infinite-prompt force, then the extra force of finite prompts
        inf_A, inf_b = icl.infinite_prompt_risk_grad.kernel(A, b, self.Sigma64)
        gap_A, gap_b = self._gap_gradient(A, b)
        return -(inf_A + gap_A), -(inf_b + gap_b)

    # the same formulas without the check of the point, for the flow
    _gap, _value, _gap_gradient, _velocity = (
        f.kernel for f in (gap, value, gap_gradient, velocity)
    )

    def flow(self, A0, b0, t_eval, *, rtol=1e-6, atol=1e-8, method="RK45"):
        """Gradient flow ``d theta / dt = velocity(theta)`` from ``(A0, b0)`` by ``solve_ivp``.

        ``t_eval``: increasing times >= 0 (the first is usually 0). Returns a softlin.icl.Trajectory
        (float64, CPU) with ``risk`` = :meth:`value` along the flow; the number of velocity evaluations is
        left in ``last_nfev``. Raises RuntimeError if the solver fails.
        """
        from scipy.integrate import solve_ivp

        d, t_eval = self.Sigma.shape[0], as_real_array("t_eval", t_eval)
        rtol, atol = (
            check_real("rtol", rtol, positive=True),
            check_real("atol", atol, positive=True),
        )
        check_choice("method", method, icl.ODE_METHODS)
        if t_eval.ndim != 1 or t_eval.size == 0 or np.any(np.diff(t_eval) <= 0) or t_eval[0] < 0:
            raise ValueError(
                f"t_eval must be a non-empty increasing 1-D array of times >= 0, got {t_eval!r}"
            )
        self._check_point(A0, b0, names=("A0", "b0"))
        # a start where the risk cannot be evaluated fails here, not in the solver
        self._value(A0, b0)

        def rhs(_t, y):
            vA, vb = self._velocity(torch.from_numpy(y[:-1]).reshape(d, d), torch.tensor(y[-1]))
            return np.append(vA.reshape(-1).numpy(), float(vb))

        y0 = np.append(A0.detach().double().cpu().reshape(-1).numpy(), float(b0))
        sol = solve_ivp(
            rhs, (0.0, t_eval[-1]), y0, method=method, t_eval=t_eval, rtol=rtol, atol=atol
        )
        if not sol.success:
            raise RuntimeError(
                f"solve_ivp stopped at t = {sol.t[-1]:.3g} (the flow may diverge): {sol.message}"
            )
        A = torch.from_numpy(sol.y[:-1].T.copy()).reshape(-1, d, d)
        b = torch.from_numpy(sol.y[-1].copy())
        risk = torch.tensor([self._value(a, bb) for a, bb in zip(A, b)], dtype=torch.float64)
        self.last_nfev = int(sol.nfev)
        return icl.Trajectory(t=torch.from_numpy(sol.t.copy()), A=A, b=b, risk=risk)


def infinite_risk_hessian(A, b, Sigma):
    """Hessian of ``R_inf`` in ``theta = (vec A, b)`` (row-major ``vec``), in closed form.

    ``R_inf = 1/2 b^2 tr(A^T Sigma^2 A Sigma) - b tr(Sigma^2 A) + 1/2 tr Sigma``, so
    ``d2R/dA2 = b^2 Sigma^2 kron Sigma``, ``d2R/dA db = 2 b Sigma^2 A Sigma - Sigma^2`` and
    ``d2R/db2 = tr(A^T Sigma^2 A Sigma)``. Its spectral norm is a local Lipschitz constant of
    ``grad R_inf`` (the ``beta_inf`` of Lemma D.1 is its maximum on a ball).

    ``A`` (..., d, d) and ``b`` (...) -> Tensor (..., d^2 + 1, d^2 + 1), symmetric.
    """
    Sigma = check_sigma(Sigma)
    d = Sigma.shape[0]
    A, b = as_tensor_arg("A", A, min_dim=2), as_tensor_arg("b", b)
    if A.shape[-2:] != (d, d) or tuple(b.shape) != tuple(A.shape[:-2]):
        raise ValueError(
            f"A must have shape (..., {d}, {d}) and b the shape (...) of its leading "
            f"dimensions, got {tuple(A.shape)} and {tuple(b.shape)}"
        )
    check_same_dtype_device({"A": A, "b": b, "Sigma": Sigma})
    S2, p, lead = Sigma @ Sigma, d * d + 1, A.shape[:-2]  # H is (..., p, p)
    H = torch.empty(*lead, p, p, dtype=A.dtype, device=A.device)
    H[..., :-1, :-1] = (b * b)[..., None, None] * torch.kron(S2, Sigma)
    mixed = (2 * b[..., None, None] * (S2 @ A @ Sigma) - S2).reshape(*lead, d * d)
    H[..., :-1, -1] = H[..., -1, :-1] = mixed
    H[..., -1, -1] = ((S2 @ A @ Sigma) * A).sum((-1, -2))
    return H


def gronwall_envelope(t, g, rate):
    """Solution ``E`` of ``E' = g(t) + rate(t) E``, ``E(0) = 0``, coefficients constant on each interval.

    If ``||e||' <= g + rate ||e||`` and ``e(0) = 0`` (proof of Lemma D.1), ``||e(t)|| <= E(t)``. On each
    ``[t_k, t_{k+1}]`` a coefficient is the larger of its end values and ``E_{k+1} = E_k e^{r h} + g (e^{r h}
    - 1) / r``; constant ``g``, ``rate = beta`` give ``g (e^{beta t} - 1) / beta <= g t e^{beta t}``.
    ``t`` increasing 1-D; ``g >= 0`` and ``rate``: floats or arrays like ``t``. Returns an array like ``t``.
    """
    t = as_real_array("t", t)
    if t.ndim != 1 or t.size == 0 or np.any(np.diff(t) <= 0):
        raise ValueError(f"t must be a non-empty increasing 1-D array, got {t!r}")
    g, rate = as_real_array("g", g), as_real_array("rate", rate)
    try:
        g, rate = np.broadcast_to(g, t.shape), np.broadcast_to(rate, t.shape)
    except ValueError as exc:
        raise ValueError(
            f"g {g.shape} and rate {rate.shape} must be numbers or arrays like t {t.shape}"
        ) from exc
    if np.any(g < 0):
        raise ValueError(f"g must be non-negative, got minimum {float(g.min()):.3g}")
    E = np.zeros_like(t)
    for k in range(t.size - 1):
        h, gk, rk = t[k + 1] - t[k], max(g[k], g[k + 1]), max(rate[k], rate[k + 1])
        with np.errstate(over="ignore"):  # past float64 the bound is infinite, as it should be
            x, ex = rk * h, np.exp(rk * h)
            growth = h * (np.expm1(x) / x if abs(x) > 1e-12 else 1.0 + x / 2)  # (e^{r h} - 1) / r
            E[k + 1] = (E[k] * ex if E[k] else 0.0) + gk * growth
    return E


def trajectory_distance(traj_a, traj_b):
    """``||theta_a(t) - theta_b(t)||`` (``||theta||^2 = ||A||_F^2 + b^2``) at the common times of two
    softlin.icl.Trajectory (TypeError otherwise; ValueError if the times differ): a Tensor (n,)."""
    for name, tr in (("traj_a", traj_a), ("traj_b", traj_b)):
        if not isinstance(tr, icl.Trajectory):
            raise TypeError(f"{name} must be a softlin.icl.Trajectory, got {type(tr).__name__}")
    ta, tb = traj_a.t.double(), traj_b.t.double()
    if ta.shape != tb.shape or not torch.allclose(ta, tb, rtol=0, atol=1e-9):
        raise ValueError("traj_a and traj_b must be recorded at the same times t")
    dA, db = traj_a.A.double() - traj_b.A.double(), traj_a.b.double() - traj_b.b.double()
    return torch.sqrt((dA**2).sum((-1, -2)) + db**2)
