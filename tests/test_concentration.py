"""Monte Carlo concentration estimators (softlin.concentration): analytic Jacobians against torch.func,
streamed estimators against direct computation, estimators against Gaussian closed forms, rate fits,
and the checks of chapter 3 failing when the formula they test is wrong.

Monte Carlo tolerances are 4 standard errors (a false alarm about once in 16 000 runs per check; the
seeds are fixed, so each test is deterministic) plus, where an estimate is taken at finite L, the
size of the first finite-L correction predicted by the delta method."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import softlin as sl  # noqa: E402
from softlin import concentration as cc  # noqa: E402

F64 = torch.float64


def _scalar_gaussian():
    return sl.GaussianMeasure(torch.zeros(1, dtype=F64), torch.ones(1, 1, dtype=F64))


def _one(x=1.0):
    return torch.full((1, 1), float(x), dtype=F64)


def _problem2d():
    cov = torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=F64)
    U = torch.tensor([[0.3, -0.1], [0.2, 0.25]], dtype=F64)
    V = torch.tensor([[1.0, 0.5], [-0.3, 0.8]], dtype=F64)
    mu = sl.GaussianMeasure(torch.tensor([0.5, -0.2], dtype=F64), cov)
    return mu, cov, U, V


# --- Jacobians -----------------------------------------------------------------------------------
def test_finite_prompt_jacobians_match_torch_func(gen):
    tokens = torch.randn(2, 7, 3, generator=gen, dtype=F64)
    queries = torch.randn(2, 4, 3, generator=gen, dtype=F64)
    U = 0.5 * torch.randn(3, 3, generator=gen, dtype=F64)
    V = torch.randn(2, 3, generator=gen, dtype=F64)
    jac_V, jac_U = cc.finite_prompt_jacobians(tokens, queries, U, V)
    auto_V = torch.func.jacrev(lambda V_: sl.softmax_attention(tokens, queries, U, V_))(V)
    auto_U = torch.func.jacrev(lambda U_: sl.softmax_attention(tokens, queries, U_, V))(U)
    assert jac_V.shape == (2, 4, 2, 2, 3) and jac_U.shape == (2, 4, 2, 3, 3)
    # Same function differentiated two ways: agreement to rounding (entries are O(1)).
    torch.testing.assert_close(jac_V, auto_V, rtol=1e-11, atol=1e-12)
    torch.testing.assert_close(jac_U, auto_U, rtol=1e-11, atol=1e-12)


def test_gaussian_limit_jacobians_match_torch_func(gen):
    mu, cov, U, V = _problem2d()
    queries = torch.randn(5, 2, generator=gen, dtype=F64)
    jac_V, jac_U = cc.attention_limit_jacobians(mu, queries, U, V)

    def limit(U_, V_):
        return sl.gaussian_attention_limit(queries[None], U_, V_, mu.mean[None], cov[None])[0]

    torch.testing.assert_close(jac_V, torch.func.jacrev(lambda V_: limit(U, V_))(V), rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(jac_U, torch.func.jacrev(lambda U_: limit(U_, V))(U), rtol=1e-12, atol=1e-13)


def test_non_gaussian_limit_jacobians_match_torch_func(gen):
    # Rademacher tokens: tilted mean tanh(a), tilted covariance diag(1 - tanh(a)^2), both by autograd.
    mu = sl.RademacherMeasure(3)
    queries = torch.randn(4, 3, generator=gen, dtype=F64)
    U = 0.7 * torch.randn(3, 3, generator=gen, dtype=F64)
    V = torch.randn(2, 3, generator=gen, dtype=F64)
    jac_V, jac_U = cc.attention_limit_jacobians(mu, queries, U, V)
    auto_V = torch.func.jacrev(lambda V_: sl.attention_limit(mu, queries, U, V_))(V)
    auto_U = torch.func.jacrev(lambda U_: sl.attention_limit(mu, queries, U_, V))(U)
    torch.testing.assert_close(jac_V, auto_V, rtol=1e-11, atol=1e-12)
    torch.testing.assert_close(jac_U, auto_U, rtol=1e-11, atol=1e-12)


# --- Streaming estimator against direct computation ----------------------------------------------
@pytest.mark.parametrize("chunk_size", [1, 5, 23, 100])  # one token, a non-divisor, exactly L, more than L
@pytest.mark.parametrize("shared_queries", [True, False])
def test_streamed_errors_equal_direct_computation(chunk_size, shared_queries):
    mu, cov, U, V = _problem2d()
    P, L, Q = 4, 23, 3
    qgen = torch.Generator().manual_seed(1)
    shape = (Q, 2) if shared_queries else (P, Q, 2)
    queries = torch.randn(*shape, generator=qgen, dtype=F64)
    errs = cc.sample_prompt_errors(mu, queries, U, V, L, P, generator=torch.Generator().manual_seed(5),
                                   chunk_size=chunk_size)
    # Rebuild the same prompts: chunk k draws P * c tokens, reshaped (P, c, D).
    g = torch.Generator().manual_seed(5)
    c = min(chunk_size, L)
    sizes = [min(c, L - s) for s in range(0, L, c)]
    tokens = torch.cat([mu.sample(P * n, generator=g).reshape(P, n, 2) for n in sizes], dim=1)
    q = queries.expand(P, Q, 2) if shared_queries else queries
    out = sl.softmax_attention(tokens, q, U, V)
    lim = sl.gaussian_attention_limit(q, U, V, mu.mean.expand(P, 2), cov.expand(P, 2, 2))
    jV, jU = cc.finite_prompt_jacobians(tokens, q, U, V)
    lV, lU = cc.attention_limit_jacobians(mu, q, U, V)
    ess = cc.effective_sample_size(sl.softmax_weights(tokens, q, U))
    # Running sums in another order, and the covariance from raw second moments: rounding only.
    kw = dict(rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(errs.output, ((out - lim) ** 2).sum(-1), **kw)
    torch.testing.assert_close(errs.grad_V, ((jV - lV) ** 2).sum((-1, -2, -3)), **kw)
    torch.testing.assert_close(errs.grad_U, ((jU - lU) ** 2).sum((-1, -2, -3)), **kw)
    torch.testing.assert_close(errs.ess, ess, **kw)


def test_sampling_is_reproducible_and_query_averaged_shapes():
    mu, cov, U, V = _problem2d()
    nu = sl.GaussianMeasure(torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64))
    a = cc.sample_query_averaged_errors(mu, nu, U, V, 50, 6, 3, generator=torch.Generator().manual_seed(2))
    b = cc.sample_query_averaged_errors(mu, nu, U, V, 50, 6, 3, generator=torch.Generator().manual_seed(2))
    assert a.output.shape == a.grad_U.shape == a.ess.shape == (6, 3)
    assert torch.equal(a.output, b.output) and torch.equal(a.grad_U, b.grad_U)
    est = a.estimate("grad_U")
    assert est.n == 6 and est.stderr > 0


# --- Effective sample size --------------------------------------------------------------------------
def test_effective_sample_size_extremes_and_scale_invariance(gen):
    assert float(cc.effective_sample_size(torch.ones(10, dtype=F64))) == pytest.approx(10.0, rel=1e-15)
    one_hot = torch.zeros(10, dtype=F64)
    one_hot[3] = 2.0
    assert float(cc.effective_sample_size(one_hot)) == pytest.approx(1.0, rel=1e-15)
    w = torch.rand(4, 9, generator=gen, dtype=F64)
    ess = cc.effective_sample_size(w)
    torch.testing.assert_close(cc.effective_sample_size(7.5 * w), ess, rtol=1e-14, atol=0)
    assert bool((ess <= 9 + 1e-12).all()) and bool((ess >= 1).all())


# --- Estimators against closed forms ----------------------------------------------------------------
def test_zero_tilt_error_is_the_sample_mean_variance():
    # U = 0: uniform weights, T[mu_hat_L] is the sample mean of V z_i, error tr(V Gamma V^T) / L exactly;
    # the expansion has A = tr(V Gamma V^T) and B = 0.
    mu, cov, _, V = _problem2d()
    U0 = torch.zeros(2, 2, dtype=F64)
    q = torch.tensor([[1.0, -2.0]], dtype=F64)
    A, B = cc.fixed_query_mse_expansion(q, U0, V, cov)
    t = float(torch.trace(V @ cov @ V.T))
    assert float(A) == pytest.approx(t, rel=1e-14) and float(B) == pytest.approx(0.0, abs=1e-12)
    errs = cc.sample_prompt_errors(mu, q, U0, V, 32, 4000, generator=torch.Generator().manual_seed(0))
    est = errs.estimate()
    assert abs(32 * est.mean - t) <= 4 * 32 * est.stderr  # exact expectation: Monte Carlo error only
    torch.testing.assert_close(errs.ess, torch.full_like(errs.ess, 32.0), rtol=1e-13, atol=0)


def test_L_equal_one_witness_error_is_one():
    # d = 1, U = 0, V = 1, standard Gaussian tokens: T[mu_hat_1] = z_1 and T[mu] = 0, so each error is z_1^2.
    errs = cc.sample_prompt_errors(_scalar_gaussian(), torch.zeros(1, 1, dtype=F64), _one(0.0), _one(), 1,
                                   20000, generator=torch.Generator().manual_seed(0))
    est = errs.estimate()
    assert abs(est.mean - 1.0) <= 4 * est.stderr  # E z^2 = 1; standard error sqrt(2 / n)
    assert math.log(1) == 0.0  # while the displayed bound c1 sigma^6 ln(L) / L^c2 vanishes at L = 1


@pytest.mark.parametrize("s", [0.25, 1.0])
def test_fixed_query_constant_matches_monte_carlo(s):
    mu, cov, U, V = _problem2d()
    z0 = torch.tensor([1.0, 1.0], dtype=F64)
    a0 = U @ z0
    q = (z0 * math.sqrt(s / float(a0 @ cov @ a0)))[None]
    A, B = cc.fixed_query_mse_expansion(q, U, V, cov)
    L = 2048
    est = cc.sample_prompt_errors(mu, q, U, V, L, 3000, generator=torch.Generator().manual_seed(1),
                                  jacobians=False).estimate()
    # 4 standard errors, plus the first finite-L correction |B| / L of the delta-method expansion.
    assert abs(L * est.mean - float(A)) <= 4 * L * est.stderr + abs(float(B)) / L


def test_error_approaches_its_constant_from_below():
    # s = 1, L = 64: the O(1/L^2) coefficient B is negative, and L * error is visibly below A.
    q = torch.ones(1, 1, dtype=F64)
    A, B = cc.fixed_query_mse_expansion(q, _one(), _one(), _one())
    assert float(B) < 0
    est = cc.sample_prompt_errors(_scalar_gaussian(), q, _one(), _one(), 64, 20000,
                                  generator=torch.Generator().manual_seed(2), jacobians=False).estimate()
    assert 64 * est.mean + 4 * 64 * est.stderr < float(A)


@pytest.mark.parametrize("s", [0.5, 1.5])
def test_ess_ratio_tends_to_exp_minus_s(s):
    q = torch.full((1, 1), math.sqrt(s), dtype=F64)
    limit, beta = cc.ess_ratio_expansion(q, _one(), _one())
    assert float(limit) == pytest.approx(math.exp(-s), rel=1e-14)
    L = 4096
    est = cc.sample_prompt_errors(_scalar_gaussian(), q, _one(), _one(), L, 400,
                                  generator=torch.Generator().manual_seed(3), jacobians=False).estimate("ess")
    assert abs(est.mean / L - float(limit)) <= 4 * est.stderr / L + abs(float(beta)) / L


def test_fixed_query_jacobian_constants_match_monte_carlo():
    # Small tilt (s = 0.1): the relative O(1/L) correction is of order s / L, far below the
    # Monte Carlo error; allow 4 standard errors plus 10 / L relative.
    mu, cov, U, V = _problem2d()
    z0 = torch.tensor([1.0, -0.5], dtype=F64)
    a0 = U @ z0
    q = (z0 * math.sqrt(0.1 / float(a0 @ cov @ a0)))[None]
    C_V, C_U = cc.fixed_query_jacobian_constants(q, U, V, cov)
    L = 1024
    errs = cc.sample_prompt_errors(mu, q, U, V, L, 3000, generator=torch.Generator().manual_seed(4))
    for kind, C in (("grad_V", float(C_V)), ("grad_U", float(C_U))):
        est = errs.estimate(kind)
        assert abs(L * est.mean - C) <= 4 * L * est.stderr + 10 * C / L, kind


def test_scalar_query_averaged_constant_closed_form():
    for u in (0.1, 0.3, 0.6):
        C, _ = cc.query_averaged_mse_expansion(_one(u), _one(), _one())
        r = 1 - 2 * u**2
        assert C == pytest.approx(r**-0.5 + u**2 * r**-1.5, rel=1e-13)
    for u in (1 / math.sqrt(2), 1.0, 1.5):  # E_z exp(u^2 z^2) diverges from u^2 = 1/2 on
        assert math.isinf(cc.query_averaged_mse_expansion(_one(u), _one(), _one())[0])


def test_query_averaged_expansion_equals_quadrature_of_fixed_query_expansion():
    # D = 2, small U: Gauss-Hermite (60 x 60 nodes) of A(z) and B(z) against the closed forms.
    _, cov, U, V = _problem2d()
    U = 0.5 * U  # 6 lambda_max(U^T Gamma U) < 1, so B_bar is finite
    nodes, w = cc.gauss_hermite_queries(60, 2)
    A, B = cc.fixed_query_mse_expansion(nodes, U, V, cov)
    C, B_bar = cc.query_averaged_mse_expansion(U, V, cov)
    assert C == pytest.approx(float(w @ A), rel=1e-9)
    assert B_bar == pytest.approx(float(w @ B), rel=1e-7)
    assert math.isnan(cc.query_averaged_mse_expansion(2 * U, V, cov)[1])


def test_query_averaged_jacobian_constants_equal_quadrature():
    _, cov, U, V = _problem2d()
    nodes, w = cc.gauss_hermite_queries(60, 2)
    C_V, C_U = cc.fixed_query_jacobian_constants(nodes, U, V, cov)
    avg_V, avg_U = cc.query_averaged_jacobian_constants(U, V, cov)
    # The closed form integrates a polynomial exactly; 60 nodes per axis resolve e^{s(z)} to ~1e-8.
    assert avg_V == pytest.approx(float(w @ C_V), rel=1e-7)
    assert avg_U == pytest.approx(float(w @ C_U), rel=1e-7)
    qc = torch.tensor([[0.5, 0.1], [0.1, 0.3]], dtype=F64)  # a non-standard query covariance
    S = torch.linalg.cholesky(qc)
    C_V2, _ = cc.fixed_query_jacobian_constants(nodes @ S.T, U, V, cov)
    assert cc.query_averaged_jacobian_constants(U, V, cov, qc)[0] == pytest.approx(float(w @ C_V2), rel=1e-7)


def test_gauss_hermite_queries_integrate_gaussian_moments():
    z, w = cc.gauss_hermite_queries(5)
    assert float(w.sum()) == pytest.approx(1.0, rel=1e-14)
    assert float(w @ z[:, 0] ** 2) == pytest.approx(1.0, rel=1e-13)
    assert float(w @ z[:, 0] ** 8) == pytest.approx(105.0, rel=1e-12)  # exact up to degree 2 * 5 - 1
    z2, w2 = cc.gauss_hermite_queries(4, 2)
    assert z2.shape == (16, 2)
    assert float(w2 @ (z2[:, 0] ** 2 * z2[:, 1] ** 2)) == pytest.approx(1.0, rel=1e-13)


def test_scalar_rate_sweep_equals_the_generic_estimator():
    # Same seed and chunk: the sweep's queries u z_j with U = 1 give the errors of U = u at nodes z_j.
    u, Ls, P, n = 0.8, [8, 40], 7, 6
    sweep = cc.scalar_rate_sweep([u], Ls, P, n_nodes=n, generator=torch.Generator().manual_seed(9),
                                 chunk_size=4)
    nodes, w = cc.gauss_hermite_queries(n)
    curve = cc.error_curve(_scalar_gaussian(), nodes, _one(u), _one(), Ls, P,
                           generator=torch.Generator().manual_seed(9), query_weights=w, jacobians=False,
                           chunk_size=4)
    np.testing.assert_allclose(sweep["mse"][0], curve["output"].mean, rtol=1e-12)
    np.testing.assert_allclose(sweep["stderr"][0], curve["output"].stderr, rtol=1e-9)


def test_scalar_rate_is_one_over_L_below_the_threshold():
    # u = 0.3 < 1/sqrt(2): L * error -> C(u) = 1.226...; allow 4 standard errors plus |B_bar| / L.
    C, B_bar = cc.query_averaged_mse_expansion(_one(0.3), _one(), _one())
    sweep = cc.scalar_rate_sweep([0.3], [1024], 1500, n_nodes=12, generator=torch.Generator().manual_seed(0))
    assert abs(1024 * sweep["mse"][0, 0] - C) <= 4 * 1024 * sweep["stderr"][0, 0] + abs(B_bar) / 1024


# --- Rate fits ----------------------------------------------------------------------------------------
def test_fit_power_law_recovers_an_exact_power():
    L = np.array([16, 64, 256, 1024])
    fit = cc.fit_power_law(L, 3.0 * L**-0.7)
    assert fit.slope == pytest.approx(-0.7, abs=1e-12) and fit.prefactor == pytest.approx(3.0, rel=1e-12)
    np.testing.assert_allclose(fit.predict(L), 3.0 * L**-0.7, rtol=1e-12)


def test_fit_power_law_standard_error_is_calibrated():
    # 4000 noisy data sets with known 5% errors: the spread of fitted slopes matches the reported standard
    # error (sampling error of a standard deviation from 4000 draws: ~1.1%; allow 5%).
    rng = np.random.default_rng(0)
    L = np.array([16, 32, 64, 128, 256, 512])
    truth = 2.0 * L**-0.8
    se = 0.05 * truth
    fits = [cc.fit_power_law(L, truth + se * rng.standard_normal(L.size), se) for _ in range(4000)]
    slopes = np.array([f.slope for f in fits])
    assert np.std(slopes) == pytest.approx(fits[0].slope_stderr, rel=0.05)
    # mean of 4000 slopes: 4 of its standard errors, plus 2e-3 for the log-transform bias (~1e-3)
    assert abs(slopes.mean() + 0.8) < 4 * fits[0].slope_stderr / math.sqrt(4000) + 2e-3


def test_heuristic_exponent():
    np.testing.assert_allclose(cc.heuristic_rate_exponent([0.3, 0.7, 1.0, 1.5]), [-1, -1, -0.5, -1 / 4.5])


# --- The chapter's key checks fail when the formula is wrong ------------------------------------------
def test_fixed_query_check_rejects_wrong_constants():
    # d = 1, Gamma = V = 1, s = 1: A = e (1 + 1). Three plausible wrong formulas must fail the chapter's test.
    q = torch.ones(1, 1, dtype=F64)
    A, B = (float(x) for x in cc.fixed_query_mse_expansion(q, _one(), _one(), _one()))
    L = 4096
    est = cc.sample_prompt_errors(_scalar_gaussian(), q, _one(), _one(), L, 2000,
                                  generator=torch.Generator().manual_seed(6), jacobians=False).estimate()
    tol = 4 * L * est.stderr + abs(B) / L

    def passes(C):
        return abs(L * est.mean - C) <= tol

    assert passes(A)
    assert not passes(2.0)  # the exponential factor e^{a^T Gamma a} forgotten
    assert not passes(math.e)  # the |V Gamma a|^2 term forgotten
    assert not passes(math.exp(0.5) * 2)  # e^{s/2}: the MGF at a instead of at 2a
    ess = cc.sample_prompt_errors(_scalar_gaussian(), q, _one(), _one(), L, 400,
                                  generator=torch.Generator().manual_seed(7), jacobians=False).estimate("ess")
    _, beta = cc.ess_ratio_expansion(q, _one(), _one())
    ess_tol = 4 * ess.stderr / L + float(beta) / L
    assert abs(ess.mean / L - math.exp(-1)) <= ess_tol
    assert abs(ess.mean / L - math.exp(-0.5)) > ess_tol


# --- Explorer panel ---------------------------------------------------------------------------------
def test_plot_query_integrand_draws_and_matches_delta_method_below_threshold():
    fig, ax = plt.subplots()
    mc = cc.plot_query_integrand(ax, u=0.4, L=512, n_prompts=400, n_z=9, z_max=2.0, seed=1)
    assert mc.shape == (9,) and np.all(mc > 0)
    assert ax.get_title() == "u = 0.4, L = 512" and ax.get_yscale() == "log"
    assert len(ax.get_lines()) >= 2
    # At z = 0 the fixed-query constant is 1 (no tilt) and the integrand phi(0) * 1; 400 prompts: ~7% error.
    assert mc[0] == pytest.approx(1 / math.sqrt(2 * math.pi), rel=0.3)
    plt.close(fig)


# --- Validation -------------------------------------------------------------------------------------
def test_bad_inputs_raise_with_the_argument_name():
    mu, cov, U, V = _problem2d()
    q = torch.zeros(3, 2, dtype=F64)
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="L must be a positive integer"):
        cc.sample_prompt_errors(mu, q, U, V, 0, 4, generator=g)
    with pytest.raises(TypeError, match="generator"):
        cc.sample_prompt_errors(mu, q, U, V, 8, 4, generator=None)
    with pytest.raises(ValueError, match="queries must have shape"):
        cc.sample_prompt_errors(mu, torch.zeros(3, 3, dtype=F64), U, V, 8, 4, generator=g)
    with pytest.raises(ValueError, match="queries must have shape"):
        cc.sample_prompt_errors(mu, torch.zeros(5, 3, 2, dtype=F64), U, V, 8, 4, generator=g)
    with pytest.raises(ValueError, match="chunk_size"):
        cc.sample_prompt_errors(mu, q, U, V, 8, 4, generator=g, chunk_size=0)
    with pytest.raises(ValueError, match="no finite MGF"):
        cc.sample_prompt_errors(sl.StudentTMeasure(2, 3.0), q, U, V, 8, 4, generator=g)
    with pytest.raises(ValueError, match="U must have shape"):
        cc.sample_prompt_errors(mu, q, torch.zeros(2, 3, dtype=F64), V, 8, 4, generator=g)
    errs = cc.sample_prompt_errors(mu, q, U, V, 8, 4, generator=g, jacobians=False)
    with pytest.raises(ValueError, match="jacobians=True"):
        errs.estimate("grad_U")
    no_ess = cc.sample_prompt_errors(mu, q, U, V, 8, 4, generator=g, ess=False)
    assert no_ess.ess is None
    with pytest.raises(ValueError, match="ess=True"):
        no_ess.estimate("ess")
    with pytest.raises(ValueError, match="query_weights must be non-negative and sum to 1"):
        errs.estimate("output", torch.ones(3, dtype=F64))
    with pytest.raises(ValueError, match="kind must be one of"):
        errs.estimate("loss")
    with pytest.raises(ValueError, match="values must be finite and positive"):
        cc.fit_power_law([1, 2, 4], [1.0, 0.0, 0.5])
    with pytest.raises(ValueError, match="weights must be non-negative"):
        cc.effective_sample_size(torch.tensor([1.0, -1.0], dtype=F64))
    with pytest.raises(ValueError, match="u_values"):
        cc.scalar_rate_sweep([-0.5], [8], 2, n_nodes=4, generator=g)
    with pytest.raises(ValueError, match="cov must be positive semi-definite"):
        cc.fixed_query_mse_expansion(q, U, V, -cov)
