"""In-context linear regression (softlin.icl): the prompt sampler, the reduced model and its risks, the
infinite-prompt flow; and the experiment's full model with its fused SGD step (softlin.experiment).

Monte Carlo tolerances are a few standard errors of the estimate they check (stated in each test); exact
identities are checked to rounding. The chapter's own experiment (training loops, baselines, figures) is
checked by the chapter's asserts, which ``make test`` runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import softlin as sl
import torch
from softlin import experiment, icl

pytestmark = pytest.mark.unit  # the library's unit tests: `make check` runs them

F64 = torch.float64
SIGMA = icl.kms_covariance(5, 0.5)


def _rand_params(gen, d=5, scale=0.3, b=1.2):
    A = scale * torch.randn(d, d, generator=gen, dtype=F64)
    return A, torch.tensor(b, dtype=F64)


def _infinite_prediction(A, b, w, xq):
    """Lemma 2.1 for the reduced model, written out: b w^T Sigma A x_q, for rows of w and x_q."""
    return b * ((w @ SIGMA) * (xq @ A.T)).sum(-1)


# --------------------------------------------------------------------------------------------------
# data


def test_kms_covariance_entries_and_spectrum():
    S = icl.kms_covariance(5, 0.5)
    for i in range(5):
        for j in range(5):
            assert S[i, j] == 0.5 ** abs(i - j)
    ev = torch.linalg.eigvalsh(S)
    # eigenvalues quoted in the paper notes (3 decimals)
    assert torch.allclose(
        ev, torch.tensor([0.360, 0.457, 0.690, 1.230, 2.262], dtype=F64), atol=1e-3
    )
    assert torch.equal(icl.kms_covariance(3, -0.5)[0], torch.tensor([1.0, -0.5, 0.25], dtype=F64))
    assert icl.kms_covariance(4, 0.0).equal(torch.eye(4, dtype=F64))


@pytest.mark.parametrize("bad", [1.0, -1.0, 1.5])
def test_kms_covariance_rejects_singular_rho(bad):
    with pytest.raises(ValueError, match="rho"):
        icl.kms_covariance(3, bad)
    with pytest.raises(ValueError, match="d must be a positive integer"):
        icl.kms_covariance(0, 0.5)


def test_sampler_layout_noiseless(gen):
    prompts = icl.PromptSampler(SIGMA, 7, 4).sample(gen)
    assert prompts.tokens.shape == (4, 7, 6) and prompts.queries.shape == (4, 1, 6)
    assert prompts.targets.shape == (4,) and prompts.tasks.shape == (4, 5)
    assert (
        prompts.tokens.mT.stride(-1) == 1
    )  # rows contiguous over the prompt (the fused step's layout)
    # labels are exactly w^T x (to rounding), the query carries no label, the target is w^T x_q
    assert torch.allclose(
        prompts.y, torch.einsum("bld,bd->bl", prompts.x, prompts.tasks), atol=1e-13
    )
    assert torch.all(prompts.queries[:, 0, -1] == 0)
    assert torch.allclose(prompts.targets, (prompts.x_query * prompts.tasks).sum(-1), atol=1e-13)


@pytest.mark.parametrize("released", [False, True])
def test_sampler_moments(gen, released):
    """x ~ N(0, Sigma) (released: (CC)(CC)^T), w ~ N(0, tau2 I), noise variance s2 (prompt and target);
    the query input N(0, Sigma) (released: N(0, I))."""
    tau2, s2 = 0.2, 0.1
    p = icl.sample_prompts(
        SIGMA, 50, 4000, tau2=tau2, noise_var=s2, generator=gen, released=released
    )
    C = torch.linalg.cholesky(SIGMA)
    prompt_cov = (C @ C) @ (C @ C).T if released else SIGMA
    query_cov = torch.eye(5, dtype=F64) if released else SIGMA
    x = p.x.reshape(-1, 5)
    n = x.shape[
        0
    ]  # 200 000 inputs: an entry of the sample covariance has SE <= sqrt(2/n) * max variance
    scale = float(prompt_cov.diagonal().max())
    assert torch.allclose(x.T @ x / n, prompt_cov, atol=5 * math.sqrt(2 / n) * scale)  # 5 SE
    # task coordinates: 20 000 draws of variance tau2, SE of the variance tau2 sqrt(2/20000)
    assert abs(float(p.tasks.var()) - tau2) < 5 * tau2 * math.sqrt(2 / p.tasks.numel())
    noise = p.y - torch.einsum("bld,bd->bl", p.x, p.tasks)
    assert abs(float(noise.var()) - s2) < 5 * s2 * math.sqrt(2 / noise.numel())
    xq = p.x_query  # 4000 queries: SE of an entry <= sqrt(2/4000) * max variance
    assert torch.allclose(
        xq.T @ xq / xq.shape[0], query_cov, atol=5 * math.sqrt(2 / xq.shape[0]) * 2.3
    )
    tnoise = p.targets - (p.x_query * p.tasks).sum(-1)
    assert abs(float(tnoise.var()) - s2) < 5 * s2 * math.sqrt(2 / tnoise.numel())


def test_sampler_refills_in_place_and_is_reproducible():
    sampler = icl.PromptSampler(SIGMA, 11, 3, noise_var=0.1)
    a = sampler.sample(torch.Generator().manual_seed(5))
    ptr = a.tokens.data_ptr()
    first = a.tokens.clone()
    b = sampler.sample(torch.Generator().manual_seed(6))
    assert b.tokens.data_ptr() == ptr  # same buffer
    assert not torch.equal(first, b.tokens)
    c = icl.sample_prompts(SIGMA, 11, 3, noise_var=0.1, generator=torch.Generator().manual_seed(5))
    assert torch.equal(c.tokens, first)


def test_sampler_validates():
    with pytest.raises(ValueError, match="Sigma must be positive definite"):
        icl.PromptSampler(torch.zeros(3, 3, dtype=F64), 5, 2)
    with pytest.raises(ValueError, match="L must be a positive integer"):
        icl.PromptSampler(SIGMA, 0, 2)
    with pytest.raises(ValueError, match="tau2 must be positive"):
        icl.PromptSampler(SIGMA, 5, 2, tau2=0.0)
    with pytest.raises(TypeError, match="generator"):
        icl.PromptSampler(SIGMA, 5, 2).sample(3)


# --------------------------------------------------------------------------------------------------
# reduced model


def test_infinite_prompt_prediction_is_lemma_2_1_with_singular_covariance(gen):
    """b w^T Sigma A x_q is the last coordinate of V Gamma_w U z_q, Gamma_w = Cov(x, w^T x) (rank d)."""
    A, b = _rand_params(gen)
    w = torch.randn(5, generator=gen, dtype=F64)
    xq = torch.randn(5, generator=gen, dtype=F64)
    J = torch.cat([torch.eye(5, dtype=F64), w[None]], 0)  # (D, d): z = J x
    Gamma = J @ SIGMA @ J.T
    U, V = icl.reduced_attention_matrices(A, b)
    assert torch.equal(U[:5, :5], A) and float(U[5].abs().sum() + U[:, 5].abs().sum()) == 0
    zq = torch.cat([xq, torch.zeros(1, dtype=F64)])
    lim = sl.gaussian_attention_limit(zq[None], U, V, torch.zeros(6, dtype=F64), Gamma)[0]
    assert torch.allclose(lim[:-1], torch.zeros(5, dtype=F64))
    assert torch.allclose(lim[-1], _infinite_prediction(A, b, w, xq), atol=1e-12)


def test_risk_fluctuation_constant_closed_form(gen):
    """Closed form against a Monte Carlo average of the fixed-pair delta-method constant."""

    def pair_constant(A, b, Sigma, w, xq):  # exp(a^T S a) b^2 (w^T S w + (w^T S a)^2), a = A x_q
        a = xq @ A.T
        Sw = w @ Sigma
        return (
            torch.exp((a @ Sigma * a).sum(-1)) * b**2 * ((Sw * w).sum(-1) + ((Sw * a).sum(-1)) ** 2)
        )

    Sigma = 0.5 * torch.eye(
        5, dtype=F64
    )  # b*^2 = sqrt(5)/0.5 > 4: e^{2 a^T Sigma a} integrable, MC is fine
    A, b = icl.bayes_optimal_parameters(Sigma)
    C = icl.risk_fluctuation_constant(A, b, Sigma)
    c2 = float(b) ** 2
    assert C == pytest.approx(
        0.5 * c2 * 2.5 * (1 - 2 / c2) ** -2.5 * (c2 - 1) / (c2 - 2), rel=1e-12
    )
    # a general (A, b) and tau2: compare with a direct average over w and x_q of the fixed-pair constant
    A2 = 0.1 * torch.randn(5, 5, generator=gen, dtype=F64)
    b2 = torch.tensor(0.7, dtype=F64)
    # Sigma^-1 - 4 A^T Sigma A > 0: the squared summand is integrable, so the Monte Carlo SE is meaningful
    assert float(torch.linalg.eigvalsh(torch.linalg.inv(SIGMA) - 4 * A2.T @ SIGMA @ A2).min()) > 0
    C2 = icl.risk_fluctuation_constant(A2, b2, SIGMA, tau2=0.5)
    m = 200_000
    ws = math.sqrt(0.5) * torch.randn(m, 5, generator=gen, dtype=F64)
    xs = torch.randn(m, 5, generator=gen, dtype=F64) @ torch.linalg.cholesky(SIGMA).T
    direct = 0.5 * pair_constant(A2, b2, SIGMA, ws, xs)
    assert abs(float(direct.mean()) - C2) < 5 * float(direct.std()) / math.sqrt(m)  # 5 SE
    # divergence: b*^2 < 2 (isotropic, d = 3) gives an infinite constant
    A3, b3 = icl.bayes_optimal_parameters(torch.eye(3, dtype=F64))
    with pytest.raises(ValueError, match="the fluctuation constant is infinite"):
        icl.risk_fluctuation_constant(A3, b3, torch.eye(3, dtype=F64))
    assert icl.risk_fluctuation_constant(A3, b3, torch.eye(3, dtype=F64), allow_infinite=True) == (
        math.inf
    )


# --------------------------------------------------------------------------------------------------
# risks


def _mc_infinite_risk(A, b, n, gen, tau2=1.0, noise_var=0.0):
    """Plain Monte Carlo of 1/2 E(y_inf - y)^2 over (w, x_q, target noise)."""
    C = torch.linalg.cholesky(SIGMA)
    w = math.sqrt(tau2) * torch.randn(n, 5, generator=gen, dtype=F64)
    xq = torch.randn(n, 5, generator=gen, dtype=F64) @ C.T
    y = (w * xq).sum(-1) + math.sqrt(noise_var) * torch.randn(n, generator=gen, dtype=F64)
    err = 0.5 * (_infinite_prediction(A, b, w, xq) - y) ** 2
    return float(err.mean()), float(err.std() / math.sqrt(n))


@pytest.mark.parametrize("tau2,noise_var", [(1.0, 0.0), (0.2, 0.1)])
def test_infinite_prompt_risk_formula_matches_monte_carlo(gen, tau2, noise_var):
    A, b = _rand_params(gen)
    mc, se = _mc_infinite_risk(A, b, 200_000, gen, tau2, noise_var)
    exact = float(icl.infinite_prompt_risk(A, b, SIGMA, tau2=tau2, noise_var=noise_var))
    assert abs(mc - exact) < 4 * se  # 4 standard errors of the Monte Carlo mean


def test_a_wrong_risk_formula_is_rejected_by_the_monte_carlo_check(gen):
    """The check above has power: dropping the middle Sigma (a plausible slip) is > 10 SE away."""
    A, b = _rand_params(gen)
    mc, se = _mc_infinite_risk(A, b, 200_000, gen)
    M = b * SIGMA @ A - torch.eye(5, dtype=F64)
    wrong = float(0.5 * torch.trace(M @ M.T))
    assert abs(mc - wrong) > 10 * se


def test_risk_gradient_closed_form_equals_autograd(gen):
    A, b = _rand_params(gen)
    A.requires_grad_(True)
    b.requires_grad_(True)
    gA, gb = torch.autograd.grad(icl.infinite_prompt_risk(A, b, SIGMA, tau2=0.7), (A, b))
    cA, cb = icl.infinite_prompt_risk_grad(A.detach(), b.detach(), SIGMA, tau2=0.7)
    assert torch.allclose(gA, cA, rtol=1e-12, atol=1e-12) and torch.allclose(
        gb, cb, rtol=1e-12, atol=1e-12
    )


def test_bayes_optimal_parameters():
    A, b = icl.bayes_optimal_parameters(SIGMA)
    assert abs(float(b) - 1.9824081418) < 1e-9  # tr(Sigma^-2)^(1/4), value in the paper notes
    assert float(icl.infinite_prompt_risk(A, b, SIGMA)) < 1e-28
    assert abs(float(torch.linalg.matrix_norm(A)) - float(b)) < 1e-12  # balanced
    assert torch.allclose(b * SIGMA @ A, torch.eye(5, dtype=F64), atol=1e-13)
    Ai, bi = icl.bayes_optimal_parameters(torch.eye(5, dtype=F64))
    assert abs(float(bi) - 5**0.25) < 1e-12 and torch.allclose(
        Ai, torch.eye(5, dtype=F64) / 5**0.25
    )


def test_zero_risk_identity(gen):
    """Gamma_w U* (x, 0) = (x, w^T x) / b*, hence V* Gamma_w U* z_q = (0, ..., 0, w^T x_q)."""
    Sigma = torch.randn(4, 4, generator=gen, dtype=F64)
    Sigma = Sigma @ Sigma.T + 0.5 * torch.eye(4, dtype=F64)
    A, b = icl.bayes_optimal_parameters(Sigma)
    U, V = icl.reduced_attention_matrices(A, b)
    w = torch.randn(4, generator=gen, dtype=F64)
    x = torch.randn(4, generator=gen, dtype=F64)
    J = torch.cat([torch.eye(4, dtype=F64), w[None]], 0)
    Gamma = J @ Sigma @ J.T
    zq = torch.cat([x, torch.zeros(1, dtype=F64)])
    assert torch.allclose(Gamma @ U @ zq, torch.cat([x, (w @ x)[None]]) / b, atol=1e-12)
    out = V @ Gamma @ U @ zq
    assert torch.allclose(out, torch.cat([torch.zeros(4, dtype=F64), (w @ x)[None]]), atol=1e-12)


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_conditional_risk_integrates_task_and_noise(gen, kind):
    """Per-prompt risk = E over (w, noise) of 1/2 (y_hat - y)^2 with the inputs held fixed, y_hat from the
    general attention layer with the block matrices (an independent route to the prediction)."""
    A, b = _rand_params(gen)
    U, V = icl.reduced_attention_matrices(A, b)
    attention = sl.softmax_attention if kind == "softmax" else sl.linear_attention
    tau2, s2 = 0.5, 0.2
    base = icl.sample_prompts(SIGMA, 9, 3, generator=gen)
    exact = icl.conditional_risk(A, b, base.x, base.x_query, kind=kind, tau2=tau2, noise_var=s2)
    n = 100_000
    for k in range(3):
        x = base.x[k].expand(n, 9, 5)
        xq = base.x_query[k].expand(n, 5)
        w = math.sqrt(tau2) * torch.randn(n, 5, generator=gen, dtype=F64)
        y = (x @ w.unsqueeze(-1)).squeeze(-1) + math.sqrt(s2) * torch.randn(
            n, 9, generator=gen, dtype=F64
        )
        tokens = torch.cat([x, y.unsqueeze(-1)], -1)
        queries = torch.cat([xq, torch.zeros(n, 1, dtype=F64)], -1).unsqueeze(1)
        target = (w * xq).sum(-1) + math.sqrt(s2) * torch.randn(n, generator=gen, dtype=F64)
        err = 0.5 * (attention(tokens, queries, U, V)[:, 0, -1] - target) ** 2
        assert abs(float(err.mean()) - float(exact[k])) < 4 * float(err.std()) / math.sqrt(
            n
        )  # 4 SE


def test_finite_prompt_risk_at_the_optimum_matches_reference_table():
    """R_L(A*, b*) at L = 100: 0.408 +- 0.001 (paper notes, 3e5 tasks)."""
    A, b = icl.bayes_optimal_parameters(SIGMA)
    est, se = icl.finite_prompt_risk(
        A,
        b,
        SIGMA,
        100,
        n_prompts=40_000,
        generator=torch.Generator().manual_seed(3),
        dtype=torch.float32,
    )
    assert abs(est - 0.408) < 5 * math.hypot(
        se, 0.001
    )  # 5 combined SE (heavy-tailed per-prompt risks)


def test_finite_prompt_risk_batched_uses_common_prompts(gen):
    A, b = icl.bayes_optimal_parameters(SIGMA)
    As = torch.stack([A, 0.8 * A])
    bs = torch.stack([b, b])
    for kw in ({}, {"noise_var": 0.1}, {"kind": "linear"}):
        m, s = icl.finite_prompt_risk(
            As, bs, SIGMA, 20, n_prompts=500, generator=torch.Generator().manual_seed(1), **kw
        )
        m0, s0 = icl.finite_prompt_risk(
            A, b, SIGMA, 20, n_prompts=500, generator=torch.Generator().manual_seed(1), **kw
        )
        assert m.shape == (2,) and abs(float(m[0]) - m0) < 1e-12 and abs(float(s[0]) - s0) < 1e-12


@pytest.mark.parametrize("L", [3, 20])
def test_linear_finite_prompt_risk_closed_form_matches_monte_carlo(gen, L):
    A, b = icl.bayes_optimal_parameters(SIGMA)
    A = A + 0.1 * torch.randn(5, 5, generator=gen, dtype=F64)
    exact = float(icl.linear_finite_prompt_risk(A, b, SIGMA, L, noise_var=0.3))
    mc, se = icl.finite_prompt_risk(
        A, b, SIGMA, L, n_prompts=100_000, generator=gen, kind="linear", noise_var=0.3
    )
    assert abs(mc - exact) < 4 * se  # 4 standard errors
    # and it tends to the infinite-prompt risk (+ noise/2) as L grows (the 1/L terms vanish)
    far = float(icl.linear_finite_prompt_risk(A, b, SIGMA, 10**9, noise_var=0.3))
    assert abs(far - float(icl.infinite_prompt_risk(A, b, SIGMA, noise_var=0.3))) < 1e-7


def test_softmax_conditional_risk_with_noise_uses_the_effective_sample_size(gen):
    """The noise term b^2 sum_i p_i^2 (1 / ESS of the engine's TiltedSums) against the weights squared."""
    A, b = _rand_params(gen)
    p = icl.sample_prompts(SIGMA, 15, 4, generator=gen)
    a = (p.x_query @ A.T).unsqueeze(1)
    weights = torch.softmax(a @ p.x.mT, -1)[:, 0]  # (B, L)
    quiet = icl.conditional_risk(A, b, p.x, p.x_query)
    noisy = icl.conditional_risk(A, b, p.x, p.x_query, noise_var=0.3)
    assert torch.allclose(noisy - quiet, 0.15 * (b * b * (weights**2).sum(-1) + 1), atol=1e-12)


def test_risk_functions_validate():
    A, b = icl.bayes_optimal_parameters(SIGMA)
    with pytest.raises(ValueError, match="A must have shape"):
        icl.infinite_prompt_risk(A[:4, :4], b, SIGMA)
    with pytest.raises(ValueError, match="b must be a scalar"):
        icl.infinite_prompt_risk(A, b.reshape(1), SIGMA)
    with pytest.raises(ValueError, match="Sigma must be symmetric"):
        icl.infinite_prompt_risk(A, b, SIGMA + torch.triu(torch.ones(5, 5, dtype=F64), 1))
    with pytest.raises(ValueError, match="kind must be one of"):
        icl.finite_prompt_risk(A, b, SIGMA, 5, n_prompts=10, kind="relu")
    with pytest.raises(TypeError, match=r"A must be a torch\.Tensor"):
        icl.infinite_prompt_risk(A.numpy(), b, SIGMA)
    with pytest.raises(TypeError, match="tau2 must be a finite real"):
        icl.infinite_prompt_risk(A, b, SIGMA, tau2="1")


# --------------------------------------------------------------------------------------------------
# dynamics


def test_balanced_initialisation(gen):
    A0, b0 = icl.balanced_initialisation(5, 0.7, rank=2, generator=gen)
    assert abs(float(torch.linalg.matrix_norm(A0)) - 0.7) < 1e-14 and float(b0) == 0.7
    assert int(torch.linalg.matrix_rank(A0)) == 2 and torch.allclose(A0, A0.T)
    assert abs(icl.initialisation_bound(SIGMA) - 0.418) < 1e-3  # value in the paper notes


@pytest.mark.parametrize("seed", range(20))
def test_a_small_balanced_start_has_risk_below_the_origin(seed):
    """Lesson 5's proof sketch of Theorem 5.2: alpha^2 ||Sigma||_op < 2 puts R_inf(A(0), b(0)) below
    R_inf(0, 0) = tr(Sigma) / 2, for any covariance and any rank of Theta; and the bound is sharp in
    scale (a start far above it is not below the origin)."""
    g = torch.Generator().manual_seed(seed)
    d = int(torch.randint(1, 7, (1,), generator=g))
    rank = int(torch.randint(1, d + 1, (1,), generator=g))
    M = torch.randn(d, d, generator=g, dtype=torch.float64)
    Sigma = M @ M.T + 0.05 * torch.eye(d, dtype=torch.float64)
    norm = float(torch.linalg.eigvalsh(Sigma).max())
    origin = icl.infinite_prompt_risk(
        torch.zeros(d, d, dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64), Sigma
    )
    assert abs(float(origin) - 0.5 * float(Sigma.trace())) < 1e-12 * float(Sigma.trace())
    for frac in (0.05, 0.5, 0.999):
        A0, b0 = icl.balanced_initialisation(d, math.sqrt(2 * frac / norm), rank=rank, generator=g)
        risk0 = float(icl.infinite_prompt_risk(A0, b0, Sigma))
        assert risk0 < float(origin), (
            f"seed {seed}: alpha^2 ||Sigma|| = {2 * frac:.3f} < 2 but R(start) {risk0:.6g} >= "
            f"R(origin) {float(origin):.6g}"
        )
    A0, b0 = icl.balanced_initialisation(d, 10 * math.sqrt(2 / norm), rank=rank, generator=g)
    assert float(icl.infinite_prompt_risk(A0, b0, Sigma)) > float(origin)


@pytest.mark.slow  # 3 s of CPU per start: left to `make test`
@pytest.mark.parametrize("alpha", [0.1, 0.5, 1.0, 3.0, 10.0])
def test_infinite_flow_converges_to_bayes_optimum_and_keeps_balance(gen, alpha):
    A0, b0 = icl.balanced_initialisation(5, alpha, rank=2, generator=gen)
    traj = icl.infinite_prompt_flow(A0, b0, SIGMA, np.linspace(0, 150, 61))
    A_star, b_star = icl.bayes_optimal_parameters(SIGMA)
    # the slowest rate at the optimum is ~0.23 (Hessian), so by t = 150 the error is far below 1e-8
    assert float(traj.distance_to(A_star, b_star)[-1]) < 1e-8
    assert float(traj.risk[-1]) < 1e-16
    # conserved exactly by the flow; the solver (rtol 1e-10) keeps it to ~1e-9 of the scale b^2 ~ 4
    assert float(traj.invariant().abs().max()) < 1e-8
    assert torch.all(
        traj.risk[1:] <= traj.risk[:-1] + 1e-14
    )  # a gradient flow never increases the risk


def test_flow_vector_field_is_minus_the_gradient(gen):
    """A few tiny explicit Euler steps with the closed-form gradient agree with the solver."""
    A0, b0 = _rand_params(gen, scale=0.2, b=0.5)
    h = 1e-4
    gA, gb = icl.infinite_prompt_risk_grad(A0, b0, SIGMA)
    traj = icl.infinite_prompt_flow(A0, b0, SIGMA, [0.0, h])
    # one Euler step has local error O(h^2 * |second derivative|) ~ 1e-8 * O(10)
    assert (
        torch.allclose(traj.A[1], A0 - h * gA, atol=1e-6)
        and abs(float(traj.b[1] - (b0 - h * gb))) < 1e-6
    )


# --------------------------------------------------------------------------------------------------
# the experiment's full model


class _Reference(torch.nn.Module):
    """Plain single-head attention with separate nn.Linear layers (the experiment's layout)."""

    def __init__(self, Q, K, V, o, linear=False):
        super().__init__()
        D = Q.shape[-1]
        self.q, self.k, self.v = (torch.nn.Linear(D, D, bias=False, dtype=F64) for _ in range(3))
        self.o = torch.nn.Linear(D, 1, bias=False, dtype=F64)
        self.linear = linear
        with torch.no_grad():
            self.q.weight.copy_(Q)
            self.k.weight.copy_(K)
            self.v.weight.copy_(V)
            self.o.weight.copy_(o[None])

    def forward(self, tokens, queries):
        s = self.q(queries) @ self.k(tokens).mT / math.sqrt(tokens.shape[-1])  # (B, 1, L)
        p = s / tokens.shape[1] if self.linear else torch.softmax(s, -1)
        return self.o(p @ self.v(tokens))[:, 0, 0]


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_full_model_gradients_equal_an_nn_module_reference(gen, kind):
    """Both paths of sgd_step (fused, and autograd of the plain forward) take the SGD step of a plain
    nn.Module with separate nn.Linear layers, for every start of a stack (float64: rounding only)."""
    model = experiment.FullAttention.initialise(5, kind=kind, generator=gen, dtype=F64, starts=3)
    p = icl.sample_prompts(SIGMA, 40, 16, tau2=0.2, noise_var=0.1, generator=gen)
    for fused in (True, False):
        trained = model.clone()
        losses = experiment.sgd_step([trained], p, 0.3, fused=fused)[0]
        for s in range(3):
            ref = _Reference(*(w[s] for w in model.parameters()), linear=kind == "linear")
            loss_ref = ((ref(p.tokens, p.queries) - p.targets) ** 2).mean()
            loss_ref.backward()
            assert abs(float(losses[s]) - loss_ref.item()) < 1e-13
            ref_grads = (
                ref.q.weight.grad,
                ref.k.weight.grad,
                ref.v.weight.grad,
                ref.o.weight.grad[0],
            )
            for new, old, grad in zip(trained.parameters(), model.parameters(), ref_grads):
                assert torch.allclose((old[s] - new[s]) / 0.3, grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "n_lin", [1, 5]
)  # 5 linear models: the Gram-matrix branch of the fused step
def test_fused_step_equals_autograd_of_the_plain_forward(gen, n_lin):
    """The fast path against the readable one: losses, and the updates (lr times the gradients), agree to
    float64 rounding for a mixed list (a softmax stack, a linear stack, an unbatched model), on the
    sampler's layout and on contiguous tokens."""
    soft = experiment.FullAttention.initialise(5, generator=gen, dtype=F64, starts=3)
    lin = experiment.FullAttention.initialise(5, generator=gen, dtype=F64, starts=n_lin).clone(
        kind="linear"
    )
    one = experiment.FullAttention.initialise(5, generator=gen, dtype=F64)
    p = icl.sample_prompts(SIGMA, 37, 16, tau2=0.2, noise_var=0.1, generator=gen)
    for tokens in (p.tokens, p.tokens.contiguous()):
        batch = icl.RegressionPrompts(tokens, p.queries, p.targets, p.tasks)
        fast, plain = [[m.clone() for m in (lin, soft, one)] for _ in range(2)]
        l_fast = experiment.sgd_step(fast, batch, 0.7, fused=True)
        l_plain = experiment.sgd_step(plain, batch, 0.7, fused=False)
        for a, b in zip(l_fast, l_plain):
            assert a.shape == b.shape and torch.allclose(a, b, rtol=1e-12, atol=1e-14)
        for ma, mb, m0 in zip(fast, plain, (lin, soft, one)):
            for wa, wb, w0 in zip(ma.parameters(), mb.parameters(), m0.parameters()):
                assert torch.allclose(wa - w0, wb - w0, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_full_model_is_attention_with_merged_matrices(gen, kind):
    model = experiment.FullAttention.initialise(5, kind=kind, generator=gen, dtype=F64)
    p = icl.sample_prompts(SIGMA, 25, 8, generator=gen)
    U = model.key_query() / math.sqrt(6)
    V = model.readout()[None]  # (1, D)
    attn = sl.softmax_attention if kind == "softmax" else sl.linear_attention
    expected = attn(p.tokens, p.queries, U, V)[:, 0, 0]
    assert torch.allclose(expected, model.predict(p.tokens, p.queries), atol=1e-12)


def test_full_model_starts_are_independent_models(gen):
    stack = experiment.FullAttention.initialise(
        5, generator=torch.Generator().manual_seed(3), dtype=F64, starts=4
    )
    first = experiment.FullAttention.initialise(
        5, generator=torch.Generator().manual_seed(3), dtype=F64, starts=2
    )
    # start s does not depend on S
    assert torch.equal(stack.Q[:2], first.Q) and torch.equal(stack.o[:2], first.o)
    p = icl.sample_prompts(SIGMA, 12, 6, generator=gen)
    pred = stack.predict(p.tokens, p.queries)
    assert pred.shape == (4, 6)
    for s in range(4):
        single = experiment.FullAttention(*(w[s] for w in stack.parameters()))
        assert torch.allclose(pred[s], single.predict(p.tokens, p.queries), atol=1e-13)
    assert stack.loss(p).shape == (4,) and stack.key_query().shape == (4, 6, 6)


def test_full_model_init_is_pytorch_linear_default(gen):
    m = experiment.FullAttention.initialise(5, generator=gen)
    assert m.Q.dtype == torch.float32 and m.Q.shape == (6, 6) and m.o.shape == (6,)
    bound = 1 / math.sqrt(6)
    for w in m.parameters():
        assert float(w.abs().max()) <= bound


def test_sgd_step_and_full_model_errors(gen):
    model = experiment.FullAttention.initialise(5, generator=gen, dtype=F64)
    p = icl.sample_prompts(SIGMA, 30, 8, tau2=0.2, noise_var=0.1, generator=gen)
    with pytest.raises(ValueError, match="o must have shape"):
        experiment.FullAttention(model.Q, model.K, model.V, model.o[:3])
    with pytest.raises(ValueError, match="kind must be one of"):
        experiment.FullAttention(*model.parameters(), kind="relu")
    with pytest.raises(ValueError, match="tokens must have shape"):
        model.predict(p.tokens[..., :5], p.queries[..., :5])
    with pytest.raises(TypeError, match="models must be a non-empty sequence"):
        experiment.sgd_step(model, p, 0.1)
    with pytest.raises(ValueError, match="lr must be positive"):
        experiment.sgd_step([model], p, 0.0)
    with pytest.raises(ValueError, match="dtype"):
        experiment.sgd_step(
            [experiment.FullAttention(*(w.float() for w in model.parameters()))], p, 0.1
        )
    bad = icl.RegressionPrompts(p.tokens.clone(), p.queries, p.targets, p.tasks)
    bad.tokens[0, 0, 0] = float("nan")  # no value pass per step: the loss shows it
    assert not math.isfinite(float(experiment.sgd_step([model.clone()], bad, 0.1)[0]))
    with pytest.raises(ValueError, match="tokens must be finite"):
        model.predict(bad.tokens, bad.queries)


@pytest.mark.slow  # 4 s of CPU: left to `make test`
@pytest.mark.parametrize("released", [False, True])
@pytest.mark.parametrize("L", [4, 30])
def test_linear_class_optimum_is_the_least_error_of_linear_attention(gen, L, released):
    """Monte Carlo on sampled prompts (the experiment's sampler, float64), independent of the algebra:
    the error of h^T P* x_q (h = mean of y_i x_i) is the closed form within 4 standard errors, and
    moving P off P* in random directions raises the error by tr(S_q D^T H D) (the first-order
    term vanishes at the optimum), the paired difference within 4 of its standard errors."""
    tau2, noise_var, n = 0.2, 0.1, 200_000
    P, mse = icl.linear_class_optimum(SIGMA, L, tau2=tau2, noise_var=noise_var, released=released)
    p = icl.sample_prompts(
        SIGMA, L, n, tau2=tau2, noise_var=noise_var, generator=gen, released=released
    )
    h = (p.y.unsqueeze(-1) * p.x).mean(1)  # (n, d)

    def errors(G):
        return ((h @ G * p.x_query).sum(-1) - p.targets) ** 2

    best = errors(P)
    se = float(best.std()) / math.sqrt(n)
    assert abs(float(best.mean()) - mse) < 4 * se, (float(best.mean()), mse, se)
    S_p, S_q = icl.input_covariances(SIGMA, released=released)
    # E[h h^T] as the docstring states it (what is tested: with it the rise is the quadratic alone)
    H = tau2 * ((1 + 1 / L) * S_p @ S_p + torch.trace(S_p) * S_p / L) + noise_var * S_p / L
    for _ in range(3):
        step = 0.3 * torch.randn(5, 5, generator=gen, dtype=F64) / math.sqrt(L)
        rise = errors(P + step) - best
        rise_se = float(rise.std()) / math.sqrt(n)
        expected = float(torch.trace(S_q @ step.T @ H @ step))
        assert float(rise.mean()) > 0
        assert abs(float(rise.mean()) - expected) < 4 * rise_se, (
            float(rise.mean()),
            expected,
            rise_se,
        )
    if not released:  # the limit: the Bayes risk of the infinite prompt, the label noise alone
        far = icl.linear_class_optimum(SIGMA, 10**9, tau2=tau2, noise_var=noise_var)[1]
        assert abs(far - noise_var) < 1e-7  # the 1/L terms, times 1e-9


def test_zero_block_size_is_zero_for_the_reduced_model_and_scale_free(gen):
    A, b = icl.bayes_optimal_parameters(SIGMA)
    U, V = icl.reduced_attention_matrices(A, b)
    assert (
        float(experiment.zero_block_size(U, V[-1])) == 0.0
    )  # the reduced read-out: the label row of V
    U2, c2 = (
        torch.randn(3, 6, 6, generator=gen, dtype=F64),
        torch.randn(3, 6, generator=gen, dtype=F64),
    )
    size = experiment.zero_block_size(U2, c2)
    assert size.shape == (3,) and bool((size > 0).all())
    assert torch.allclose(experiment.zero_block_size(-2.5 * U2, 0.1 * c2), size, rtol=1e-14)
    with pytest.raises(ValueError, match=r"v must have shape|and v"):
        experiment.zero_block_size(U2, c2[:, :5])


@pytest.mark.parametrize("seed", range(5))
def test_large_prompt_constants_see_the_covariance_only_through_its_trace(seed):
    """Lesson 6 (the large-prompt constants and the solution of ex-ch6-tilt): in c = r^2 / b*^2 the closed form of
    C_1-bar (the averaged C_1) involves Sigma only through tr Sigma, so C_soft, C_lin and the best c agree for covariances of one
    trace, while the best scale r* itself moves with b*. Both routes minimise numerically, so they agree to
    the optimiser's tolerance (1e-6 relative is far above it and far below any real difference)."""
    g = torch.Generator().manual_seed(seed)
    d = 5
    M = torch.randn(d, d, generator=g, dtype=torch.float64)
    Sigma = M @ M.T + 0.1 * torch.eye(d, dtype=torch.float64)
    Sigma = Sigma * (d / float(Sigma.trace()))  # trace d, like the KMS covariance
    ref = icl.large_prompt_constants(icl.kms_covariance(d, 0.5), tau2=0.2, noise_var=0.1)
    got = icl.large_prompt_constants(Sigma, tau2=0.2, noise_var=0.1)
    for name in ("softmax", "linear", "ratio"):
        a, b = getattr(got, name), getattr(ref, name)
        assert abs(a / b - 1) < 1e-6, f"seed {seed}: {name} {a:.8g} vs KMS {b:.8g} at equal trace"
    c_got = got.scale**2 / float(icl.bayes_optimal_parameters(Sigma)[1]) ** 2
    c_ref = ref.scale**2 / float(icl.bayes_optimal_parameters(icl.kms_covariance(d, 0.5))[1]) ** 2
    assert abs(c_got / c_ref - 1) < 1e-4, f"seed {seed}: best c {c_got:.6g} vs {c_ref:.6g}"
    assert abs(got.scale - ref.scale) > 1e-3, "the best scale r* should move with b*"
