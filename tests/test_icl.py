"""In-context linear regression (softlin.icl): data, reduced and full models, risks and their gradients,
the infinite-prompt gradient flow, finite-prompt training, and the ridge/Bayes baselines.

Monte Carlo tolerances are a few standard errors of the estimate they check (stated in each test); exact
identities are checked to rounding."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import softlin as sl  # noqa: E402
import softlin.icl as icl  # noqa: E402

F64 = torch.float64
SIGMA = icl.kms_covariance(5, 0.5)


def _rand_params(gen, d=5, scale=0.3, b=1.2):
    A = scale * torch.randn(d, d, generator=gen, dtype=F64)
    return A, torch.tensor(b, dtype=F64)


# --------------------------------------------------------------------------------------------------
# data


def test_kms_covariance_entries_and_spectrum():
    S = icl.kms_covariance(5, 0.5)
    for i in range(5):
        for j in range(5):
            assert S[i, j] == 0.5 ** abs(i - j)
    ev = torch.linalg.eigvalsh(S)
    # eigenvalues quoted in the paper notes (3 decimals)
    assert torch.allclose(ev, torch.tensor([0.360, 0.457, 0.690, 1.230, 2.262], dtype=F64), atol=1e-3)
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
    # labels are exactly w^T x (to rounding), the query carries no label, the target is w^T x_q
    assert torch.allclose(prompts.y, torch.einsum("bld,bd->bl", prompts.x, prompts.tasks), atol=1e-13)
    assert torch.all(prompts.queries[:, 0, -1] == 0)
    assert torch.allclose(prompts.targets, (prompts.x_query * prompts.tasks).sum(-1), atol=1e-13)


def test_sampler_moments(gen):
    """x ~ N(0, Sigma), w ~ N(0, tau2 I), label noise variance s2 (prompt and target)."""
    tau2, s2 = 0.2, 0.1
    p = icl.sample_prompts(SIGMA, 50, 4000, tau2=tau2, noise_var=s2, generator=gen)
    x = p.x.reshape(-1, 5)
    n = x.shape[0]  # 200 000 inputs: entries of the sample covariance have standard error <= sqrt(2/n)
    assert torch.allclose(x.T @ x / n, SIGMA, atol=5 * math.sqrt(2 / n))
    # task coordinates: 20 000 draws of variance tau2, SE of the variance ~ tau2 sqrt(2/20000) = 0.002
    assert abs(float(p.tasks.var()) - tau2) < 5 * tau2 * math.sqrt(2 / p.tasks.numel())
    noise = p.y - torch.einsum("bld,bd->bl", p.x, p.tasks)
    assert abs(float(noise.var()) - s2) < 5 * s2 * math.sqrt(2 / noise.numel())
    # the query input has covariance Sigma as well (the intended model, not the authors' quirk)
    xq = p.x_query
    assert torch.allclose(xq.T @ xq / xq.shape[0], SIGMA, atol=5 * math.sqrt(2 / xq.shape[0]) * 2)
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


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_reduced_prediction_is_attention_with_block_matrices(gen, kind):
    A, b = _rand_params(gen)
    p = icl.sample_prompts(SIGMA, 13, 6, generator=gen)
    U, V = icl.reduced_attention_matrices(A, b)
    attn = sl.softmax_attention if kind == "softmax" else sl.linear_attention
    out = attn(p.tokens, p.queries, U, V)  # (B, 1, D)
    assert torch.allclose(out[:, 0, :-1], torch.zeros(6, 5, dtype=F64))
    ours = icl.reduced_prediction(A, b, p.tokens, p.queries, kind=kind)
    assert torch.allclose(out[:, 0, -1], ours, atol=1e-12)


def test_infinite_prompt_prediction_is_lemma_2_1_with_singular_covariance(gen):
    """b w^T Sigma A x_q is the last coordinate of V Gamma_w U z_q, Gamma_w = Cov(x, w^T x) (rank d)."""
    A, b = _rand_params(gen)
    w = torch.randn(5, generator=gen, dtype=F64)
    xq = torch.randn(5, generator=gen, dtype=F64)
    J = torch.cat([torch.eye(5, dtype=F64), w[None]], 0)  # (D, d): z = J x
    Gamma = J @ SIGMA @ J.T
    U, V = icl.reduced_attention_matrices(A, b)
    zq = torch.cat([xq, torch.zeros(1, dtype=F64)])
    lim = sl.gaussian_attention_limit(zq[None], U, V, torch.zeros(6, dtype=F64), Gamma)[0]
    ours = icl.infinite_prompt_prediction(A, b, SIGMA, w[None], xq[None])[0]
    assert torch.allclose(lim[-1], ours, atol=1e-12)


def test_finite_prediction_converges_at_rate_one_over_L(gen):
    """L E(y_L - y_inf)^2 -> exp(a^T Sigma a) b^2 (w^T Sigma w + (w^T Sigma a)^2) (delta method)."""
    A, b = icl.bayes_optimal_parameters(SIGMA)
    w = torch.tensor([0.5, -1.0, 0.3, 0.8, -0.2], dtype=F64)
    xq = torch.tensor([0.4, 0.1, -0.6, 0.2, 0.3], dtype=F64)
    C = icl.prediction_fluctuation_constant(A, b, SIGMA, w, xq)
    mse, se = icl.prediction_fluctuation(A, b, SIGMA, w, xq, 2000, n_prompts=2000, generator=gen)
    # MC relative error ~ se/mse (~3-4 %) plus an O(1/L) bias that is below 2 % here (a^T Sigma a ~ 0.1)
    assert abs(2000 * mse / C - 1) < 4 * se / mse + 0.03


def test_risk_fluctuation_constant_closed_form(gen):
    """Closed form against a Monte Carlo average of the fixed-query constant (finite variance here)."""
    Sigma = 0.5 * torch.eye(5, dtype=F64)  # b*^2 = sqrt(5)/0.5 > 4: e^{2 a^T Sigma a} integrable, MC is fine
    A, b = icl.bayes_optimal_parameters(Sigma)
    C = icl.risk_fluctuation_constant(A, b, Sigma)
    c2 = float(b) ** 2
    assert C == pytest.approx(0.5 * c2 * 2.5 * (1 - 2 / c2) ** -2.5 * (c2 - 1) / (c2 - 2), rel=1e-12)
    n = 200_000
    xq = math.sqrt(0.5) * torch.randn(n, 5, generator=gen, dtype=F64)
    a = xq @ A.T
    vals = 0.5 * torch.exp((a @ Sigma * a).sum(-1)) * b**2 * (torch.trace(Sigma) + ((a @ Sigma) ** 2).sum(-1))
    assert abs(float(vals.mean()) - C) < 5 * float(vals.std()) / math.sqrt(n)  # 5 SE
    # a general (A, b): compare with a direct average over w and x_q of the fixed-pair constant
    A2 = 0.1 * torch.randn(5, 5, generator=gen, dtype=F64)
    b2 = torch.tensor(0.7, dtype=F64)
    # Sigma^-1 - 4 A^T Sigma A > 0: the squared summand is integrable, so the Monte Carlo SE is meaningful
    assert float(torch.linalg.eigvalsh(torch.linalg.inv(SIGMA) - 4 * A2.T @ SIGMA @ A2).min()) > 0
    C2 = icl.risk_fluctuation_constant(A2, b2, SIGMA, tau2=0.5)
    m = 3000
    ws = math.sqrt(0.5) * torch.randn(m, 5, generator=gen, dtype=F64)
    xs = torch.randn(m, 5, generator=gen, dtype=F64) @ torch.linalg.cholesky(SIGMA).T
    direct = [0.5 * icl.prediction_fluctuation_constant(A2, b2, SIGMA, w, x) for w, x in zip(ws, xs)]
    assert abs(float(np.mean(direct)) - C2) < 5 * float(np.std(direct)) / math.sqrt(m)  # 5 SE
    # divergence: b*^2 < 2 (isotropic, d = 3) gives an infinite constant
    A3, b3 = icl.bayes_optimal_parameters(torch.eye(3, dtype=F64))
    assert icl.risk_fluctuation_constant(A3, b3, torch.eye(3, dtype=F64)) == math.inf


# --------------------------------------------------------------------------------------------------
# risks


def _mc_infinite_risk(A, b, n, gen, tau2=1.0, noise_var=0.0):
    """Plain Monte Carlo of 1/2 E(y_inf - y)^2 over (w, x_q, target noise)."""
    C = torch.linalg.cholesky(SIGMA)
    w = math.sqrt(tau2) * torch.randn(n, 5, generator=gen, dtype=F64)
    xq = torch.randn(n, 5, generator=gen, dtype=F64) @ C.T
    y = (w * xq).sum(-1) + math.sqrt(noise_var) * torch.randn(n, generator=gen, dtype=F64)
    err = 0.5 * (icl.infinite_prompt_prediction(A, b, SIGMA, w, xq) - y) ** 2
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
    assert torch.allclose(gA, cA, rtol=1e-12, atol=1e-12) and torch.allclose(gb, cb, rtol=1e-12, atol=1e-12)


def test_bayes_optimal_parameters():
    A, b = icl.bayes_optimal_parameters(SIGMA)
    assert abs(float(b) - 1.9824081418) < 1e-9  # tr(Sigma^-2)^(1/4), value in the paper notes
    assert float(icl.infinite_prompt_risk(A, b, SIGMA)) < 1e-28
    assert abs(float(torch.linalg.matrix_norm(A)) - float(b)) < 1e-12  # balanced
    assert torch.allclose(b * SIGMA @ A, torch.eye(5, dtype=F64), atol=1e-13)
    Ai, bi = icl.bayes_optimal_parameters(torch.eye(5, dtype=F64))
    assert abs(float(bi) - 5**0.25) < 1e-12 and torch.allclose(Ai, torch.eye(5, dtype=F64) / 5**0.25)


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
    """Per-prompt risk = E over (w, noise) of 1/2 (y_hat - y)^2 with the inputs held fixed."""
    A, b = _rand_params(gen)
    tau2, s2 = 0.5, 0.2
    base = icl.sample_prompts(SIGMA, 9, 3, generator=gen)
    exact = icl.conditional_risk(A, b, base.x, base.x_query, kind=kind, tau2=tau2, noise_var=s2)
    n = 100_000
    for k in range(3):
        x = base.x[k].expand(n, 9, 5)
        xq = base.x_query[k].expand(n, 5)
        w = math.sqrt(tau2) * torch.randn(n, 5, generator=gen, dtype=F64)
        y = (x @ w.unsqueeze(-1)).squeeze(-1) + math.sqrt(s2) * torch.randn(n, 9, generator=gen, dtype=F64)
        tokens = torch.cat([x, y.unsqueeze(-1)], -1)
        queries = torch.cat([xq, torch.zeros(n, 1, dtype=F64)], -1).unsqueeze(1)
        target = (w * xq).sum(-1) + math.sqrt(s2) * torch.randn(n, generator=gen, dtype=F64)
        err = 0.5 * (icl.reduced_prediction(A, b, tokens, queries, kind=kind) - target) ** 2
        assert abs(float(err.mean()) - float(exact[k])) < 4 * float(err.std()) / math.sqrt(n)  # 4 SE


def test_finite_prompt_risk_at_the_optimum_matches_reference_table():
    """R_L(A*, b*) at L = 100: 0.408 +- 0.001 (paper notes, 3e5 tasks)."""
    A, b = icl.bayes_optimal_parameters(SIGMA)
    est, se = icl.finite_prompt_risk(A, b, SIGMA, 100, n_prompts=40_000,
                                     generator=torch.Generator().manual_seed(3), dtype=torch.float32)
    assert abs(est - 0.408) < 5 * math.hypot(se, 0.001)  # 5 combined SE (heavy-tailed per-prompt risks)


def test_finite_prompt_risk_batched_uses_common_prompts(gen):
    A, b = icl.bayes_optimal_parameters(SIGMA)
    As = torch.stack([A, 0.8 * A])
    bs = torch.stack([b, b])
    m, s = icl.finite_prompt_risk(As, bs, SIGMA, 20, n_prompts=500,
                                  generator=torch.Generator().manual_seed(1))
    m0, s0 = icl.finite_prompt_risk(A, b, SIGMA, 20, n_prompts=500,
                                    generator=torch.Generator().manual_seed(1))
    assert m.shape == (2,) and abs(float(m[0]) - m0) < 1e-12 and abs(float(s[0]) - s0) < 1e-12


@pytest.mark.parametrize("L", [3, 20])
def test_linear_finite_prompt_risk_closed_form_matches_monte_carlo(gen, L):
    A, b = icl.bayes_optimal_parameters(SIGMA)
    A = A + 0.1 * torch.randn(5, 5, generator=gen, dtype=F64)
    exact = float(icl.linear_finite_prompt_risk(A, b, SIGMA, L, noise_var=0.3))
    mc, se = icl.finite_prompt_risk(A, b, SIGMA, L, n_prompts=100_000, generator=gen, kind="linear",
                                    noise_var=0.3)
    assert abs(mc - exact) < 4 * se  # 4 standard errors
    # and it tends to the infinite-prompt risk (+ noise/2) as L grows (the 1/L terms vanish)
    far = float(icl.linear_finite_prompt_risk(A, b, SIGMA, 10**9, noise_var=0.3))
    assert abs(far - float(icl.infinite_prompt_risk(A, b, SIGMA, noise_var=0.3))) < 1e-7


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
    with pytest.raises(TypeError, match="A must be a torch.Tensor"):
        icl.infinite_prompt_risk(A.numpy(), b, SIGMA)


# --------------------------------------------------------------------------------------------------
# dynamics


def test_balanced_initialisation(gen):
    A0, b0 = icl.balanced_initialisation(5, 0.7, rank=2, generator=gen)
    assert abs(float(torch.linalg.matrix_norm(A0)) - 0.7) < 1e-14 and float(b0) == 0.7
    assert int(torch.linalg.matrix_rank(A0)) == 2 and torch.allclose(A0, A0.T)
    assert abs(icl.initialisation_bound(SIGMA) - 0.418) < 1e-3  # value in the paper notes


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
    assert torch.all(traj.risk[1:] <= traj.risk[:-1] + 1e-14)  # a gradient flow never increases the risk


def test_flow_vector_field_is_minus_the_gradient(gen):
    """A few tiny explicit Euler steps with the closed-form gradient agree with the solver."""
    A0, b0 = _rand_params(gen, scale=0.2, b=0.5)
    h = 1e-4
    gA, gb = icl.infinite_prompt_risk_grad(A0, b0, SIGMA)
    traj = icl.infinite_prompt_flow(A0, b0, SIGMA, [0.0, h])
    # one Euler step has local error O(h^2 * |second derivative|) ~ 1e-8 * O(10)
    assert torch.allclose(traj.A[1], A0 - h * gA, atol=1e-6) and abs(float(traj.b[1] - (b0 - h * gb))) < 1e-6


def test_train_reduced_gd_decreases_its_objective(gen):
    A0, b0 = icl.balanced_initialisation(5, 1.0, rank=2, generator=gen)
    tr = icl.train_reduced(A0, b0, SIGMA, 20, steps=60, lr=0.01, batch_size=256, method="gd", generator=gen)
    assert tr.t[-1] == pytest.approx(0.6) and tr.A.shape == (61, 5, 5)
    # full-batch GD with a step far below 2 / (largest curvature ~ 50) is monotone on its fixed sample
    assert torch.all(tr.risk[1:] <= tr.risk[:-1] + 1e-12)


def test_train_reduced_sgd_beats_the_infinite_prompt_optimum_at_its_own_L(gen):
    """At L = 30, R_L(A*, b*) ~ 1.05 while the softmax model trained at L = 30 reaches ~ 0.8."""
    A0, b0 = icl.balanced_initialisation(5, 1.0, rank=2, generator=gen)
    tr = icl.train_reduced(A0, b0, SIGMA, 30, steps=300, lr=0.05, batch_size=128, generator=gen,
                           record_every=100, dtype=torch.float32)
    A_star, b_star = icl.bayes_optimal_parameters(SIGMA)
    both_A = torch.stack([tr.A[-1].double(), A_star])
    both_b = torch.stack([tr.b[-1].double(), b_star])
    m, s = icl.finite_prompt_risk(both_A, both_b, SIGMA, 30, n_prompts=20_000,
                                  generator=torch.Generator().manual_seed(2))
    assert float(m[0]) < float(m[1]) - 4 * float(s.max())  # gap ~0.25 against SE ~0.01


# --------------------------------------------------------------------------------------------------
# full model


class _Reference(torch.nn.Module):
    """Plain single-head attention with separate nn.Linear layers (the experiment's layout)."""

    def __init__(self, model, linear=False):
        super().__init__()
        D = model.D
        self.q, self.k, self.v = (torch.nn.Linear(D, D, bias=False, dtype=F64) for _ in range(3))
        self.o = torch.nn.Linear(D, 1, bias=False, dtype=F64)
        self.linear = linear
        with torch.no_grad():
            self.q.weight.copy_(model.Q)
            self.k.weight.copy_(model.K)
            self.v.weight.copy_(model.V)
            self.o.weight.copy_(model.o[None])

    def forward(self, tokens, queries):
        s = self.q(queries) @ self.k(tokens).mT / math.sqrt(tokens.shape[-1])  # (B, 1, L)
        p = s / tokens.shape[1] if self.linear else torch.softmax(s, -1)
        return self.o(p @ self.v(tokens))[:, 0, 0]


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_full_model_gradient_equals_autograd_reference(gen, kind):
    model = icl.FullAttention.initialise(5, kind=kind, generator=gen, dtype=F64)
    p = icl.sample_prompts(SIGMA, 40, 16, tau2=0.2, noise_var=0.1, generator=gen)
    ref = _Reference(model, linear=kind == "linear")
    loss_ref = ((ref(p.tokens, p.queries) - p.targets) ** 2).mean()
    loss_ref.backward()
    loss, g = model.loss_and_grad(p)
    assert abs(loss.item() - loss_ref.item()) < 1e-13
    for ours, theirs in [(g.Q, ref.q.weight.grad), (g.K, ref.k.weight.grad), (g.V, ref.v.weight.grad),
                         (g.o, ref.o.weight.grad[0])]:
        assert torch.allclose(ours, theirs, rtol=1e-10, atol=1e-13)  # float64: rounding only


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_full_model_is_attention_with_merged_matrices(gen, kind):
    model = icl.FullAttention.initialise(5, kind=kind, generator=gen, dtype=F64)
    p = icl.sample_prompts(SIGMA, 25, 8, generator=gen)
    U = model.key_query() / math.sqrt(6)
    V = model.output_value()[None]  # (1, D)
    attn = sl.softmax_attention if kind == "softmax" else sl.linear_attention
    expected = attn(p.tokens, p.queries, U, V)[:, 0, 0]
    assert torch.allclose(expected, model.predict(p.tokens, p.queries), atol=1e-12)


def test_full_model_sgd_step_and_errors(gen):
    model = icl.FullAttention.initialise(5, generator=gen, dtype=F64)
    p = icl.sample_prompts(SIGMA, 30, 8, tau2=0.2, noise_var=0.1, generator=gen)
    before = model.clone()
    loss, g = before.loss_and_grad(p)
    assert model.sgd_step(p, 0.1) == pytest.approx(float(loss))
    assert torch.allclose(model.K, before.K - 0.1 * g.K) and torch.allclose(model.o, before.o - 0.1 * g.o)
    K_after = model.K.clone()
    p.tokens[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="loss is nan"):
        model.sgd_step(p, 0.1)
    assert torch.equal(model.K, K_after)  # a failed step leaves the weights untouched
    with pytest.raises(ValueError, match="tokens must be finite"):
        model.predict(p.tokens, p.queries)
    with pytest.raises(ValueError, match="o must have shape"):
        icl.FullAttention(model.Q, model.K, model.V, model.o[:3])
    with pytest.raises(ValueError, match="tokens must have D = 6"):
        model.predict(p.tokens[..., :5].nan_to_num(), p.queries[..., :5].contiguous())


def test_full_model_init_is_pytorch_linear_default(gen):
    m = icl.FullAttention.initialise(5, generator=gen)
    assert m.Q.dtype == torch.float32
    bound = 1 / math.sqrt(6)
    for w in m.parameters():
        assert float(w.abs().max()) <= bound


def test_train_full_attention_shares_start_and_stream(gen):
    init = icl.FullAttention.initialise(5, generator=torch.Generator().manual_seed(0), dtype=F64)
    test = icl.sample_prompts(SIGMA, 20, 500, tau2=0.2, noise_var=0.1,
                              generator=torch.Generator().manual_seed(9))
    kw = dict(steps=300, lr=0.05, batch_size=64, tau2=0.2, noise_var=0.1)
    h = icl.train_full_attention(init, SIGMA, 20, generator=torch.Generator().manual_seed(1), test_prompts=test,
                                 record_every=100, **kw)
    alone = icl.train_full_attention(init, SIGMA, 20, generator=torch.Generator().manual_seed(1),
                                     kinds=("linear",), record_every=300, **kw)
    assert h.steps == [0, 100, 200, 300]
    kq, ov = h.effective_distance()
    assert kq[0] == 0 and ov[0] == 0  # the same start
    # the linear model trained alone saw the same batches: identical weights
    assert torch.allclose(alone.models["linear"].K, h.models["linear"].K, atol=1e-12)
    fresh = icl.FullAttention.initialise(5, generator=torch.Generator().manual_seed(0), dtype=F64)
    assert torch.equal(init.K, fresh.K)  # the start is not modified
    for k in ("softmax", "linear"):  # training helps: test MSE drops from ~1.1, far beyond its SE (~0.05)
        assert h.test_mse[k][-1] < h.test_mse[k][0] - 0.2


# --------------------------------------------------------------------------------------------------
# baselines


def test_ridge_prediction_matches_explicit_solve(gen):
    p = icl.sample_prompts(SIGMA, 12, 4, noise_var=0.1, generator=gen)
    pred = icl.ridge_prediction(p.tokens, p.queries, 0.5)
    for k in range(4):
        X, y = p.x[k], p.y[k]
        beta = torch.linalg.solve(X.T @ X + 0.5 * torch.eye(5, dtype=F64), X.T @ y)
        assert abs(float(p.x_query[k] @ beta - pred[k])) < 1e-12
    assert icl.bayes_ridge_lambda(0.2, 0.1) == pytest.approx(0.5)


def test_bayes_risk_equals_simulated_ridge_error_and_beats_other_lambdas(gen):
    tau2, s2, L = 0.2, 0.1, 10
    p = icl.sample_prompts(SIGMA, L, 100_000, tau2=tau2, noise_var=s2, generator=gen)
    errs = {lam: (icl.ridge_prediction(p.tokens, p.queries, lam) - p.targets) ** 2
            for lam in (0.05, 0.5, 5.0)}
    exact, se = icl.bayes_risk(SIGMA, L, tau2=tau2, noise_var=s2, n_prompts=100_000, generator=gen)
    sim = errs[0.5]
    assert abs(float(sim.mean()) - exact) < 4 * math.hypot(float(sim.std()) / math.sqrt(sim.numel()), se)
    for lam in (0.05, 5.0):  # paired differences: the Bayes lambda is better by many paired SE
        diff = errs[lam] - sim
        assert float(diff.mean()) > 4 * float(diff.std()) / math.sqrt(diff.numel())


def test_asymptotic_ridge_risk_values_and_simulation():
    # values at xi = 2 and 0.5 (L/d = 0.5 and 2), noise 0.1, from the paper notes
    assert icl.asymptotic_ridge_risk(0.1, 2.0) == pytest.approx(0.6742, abs=1e-4)
    assert icl.asymptotic_ridge_risk(0.1, 0.5) == pytest.approx(0.1844, abs=1e-4)
    assert np.allclose(icl.asymptotic_ridge_risk(0.1, [2.0, 0.5]), [0.6742, 0.1844], atol=1e-4)
    d = 100
    I = torch.eye(d, dtype=F64)
    for L in (50, 200):
        sim, se = icl.bayes_risk(I, L, tau2=1 / d, noise_var=0.1, n_prompts=400,
                                 generator=torch.Generator().manual_seed(L))
        # finite-d corrections are O(1/d) ~ 1 %; Monte Carlo SE is ~0.3 %
        assert abs(sim - icl.asymptotic_ridge_risk(0.1, d / L)) < 0.02 * sim + 4 * se
    with pytest.raises(ValueError, match="xi"):
        icl.asymptotic_ridge_risk(0.1, 0.0)


# --------------------------------------------------------------------------------------------------
# explorer


def test_flow_explorer_panel():
    fig, ax = plt.subplots()
    out = icl.plot_flow_at_prompt_length(ax, alpha=1.0, L=30, n_prompts=200, t_max=10.0, n_times=4)
    assert set(out) == {"t", "risk_inf", "risk_L", "stderr_L"} and out["t"].shape == (4,)
    # near the end of the flow R_inf is ~1e-3 while R_L at L = 30 is ~1 (the finite-prompt penalty)
    assert out["risk_L"][-1] > 10 * out["risk_inf"][-1]
    assert ax.get_title() and ax.get_xlabel() and len(ax.get_legend().get_texts()) == 2
    plt.close(fig)
