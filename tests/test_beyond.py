"""Beyond the paper (softlin.beyond): non-Gaussian regression tokens, heavy tails, temperature and
non-centred tokens.

Exact identities are checked to rounding; Monte Carlo checks use a few standard errors of the estimate
they test (stated in each test). The tests marked "key check" show that the chapter's corresponding
assertion would fail if the formula it checks were wrong.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import softlin as sl  # noqa: E402
import softlin.beyond as by  # noqa: E402
import softlin.icl as icl  # noqa: E402
from softlin import concentration as cc  # noqa: E402
from softlin import limits  # noqa: E402

F64, F32 = torch.float64, torch.float32
KMS = icl.kms_covariance(5, 0.5)


# --------------------------------------------------------------------------------------------------
# 1. sub-Gaussian, non-Gaussian inputs


def test_input_laws_have_identity_covariance_and_their_stated_names():
    laws = by.unit_variance_input_laws(3)
    assert list(laws) == ["Gaussian", "Rademacher", "uniform", "mixture"]
    zero = torch.zeros(3, dtype=F64)
    for name, mu in laws.items():
        # gradient and Hessian of the log-MGF at 0: mean 0 and covariance I (autograd, exact)
        assert torch.allclose(mu.tilted_mean(zero), zero, atol=1e-12), name
        assert torch.allclose(mu.tilted_covariance(zero), torch.eye(3, dtype=F64), atol=1e-10), name
    assert by.unit_variance_input_laws(2, dtype=F32)["mixture"].dtype == F32
    with pytest.raises(ValueError, match="d must be at most 8"):
        by.unit_variance_input_laws(9)


def test_regression_tokens_sample_labels_and_match_the_singular_gaussian(gen):
    Sigma = torch.tensor([[1.0, 0.4], [0.4, 0.7]], dtype=F64)
    w = torch.tensor([0.6, -1.1], dtype=F64)
    tokens = by.RegressionTokenMeasure(sl.GaussianMeasure(torch.zeros(2, dtype=F64), Sigma), w)
    z = tokens.sample(50, generator=gen)
    assert z.shape == (50, 3) and torch.allclose(z[:, 2], z[:, :2] @ w, atol=1e-13)
    # chapter 2's closed form with Gamma_w = J Sigma J^T (rank 2) gives the same limit
    J = torch.cat([torch.eye(2, dtype=F64), w[None]])
    U = 0.5 * torch.randn(3, 3, generator=gen, dtype=F64)
    V = torch.randn(2, 3, generator=gen, dtype=F64)
    q = torch.randn(4, 3, generator=gen, dtype=F64)
    closed = sl.gaussian_attention_limit(q, U, V, torch.zeros(3, dtype=F64), J @ Sigma @ J.T)
    assert torch.allclose(sl.attention_limit(tokens, q, U, V), closed, atol=1e-12)


def test_regression_tokens_validate():
    mu = sl.RademacherMeasure(2)
    with pytest.raises(ValueError, match="task must have shape"):
        by.RegressionTokenMeasure(mu, torch.ones(3, dtype=F64))
    with pytest.raises(ValueError, match="task has dtype"):
        by.RegressionTokenMeasure(mu, torch.ones(2, dtype=F32))
    with pytest.raises(TypeError, match="x_measure must be a softlin TokenMeasure"):
        by.RegressionTokenMeasure("gauss", torch.ones(2, dtype=F64))


def test_softmax_limit_prediction_gaussian_and_rademacher(gen):
    A = 0.7 * torch.randn(2, 2, generator=gen, dtype=F64)
    b = torch.tensor(1.3, dtype=F64)
    w = torch.randn(6, 2, generator=gen, dtype=F64)
    xq = torch.randn(6, 2, generator=gen, dtype=F64)
    laws = by.unit_variance_input_laws(2)
    gauss = by.softmax_limit_prediction(laws["Gaussian"], A, b, w, xq)
    assert torch.allclose(gauss, icl.infinite_prompt_prediction(A, b, torch.eye(2, dtype=F64), w, xq))
    rad = by.softmax_limit_prediction(laws["Rademacher"], A, b, w, xq)
    assert torch.allclose(rad, b * (w * torch.tanh(xq @ A.T)).sum(-1), atol=1e-12)  # grad log cosh
    with pytest.raises(ValueError, match="no finite moment generating function"):
        by.softmax_limit_prediction(sl.StudentTMeasure(2, 3.0), A, b, w, xq)
    with pytest.raises(ValueError, match="tasks must have shape"):
        by.softmax_limit_prediction(laws["Gaussian"], A, b, w[:3], xq)


def test_fluctuation_constant_reduces_to_the_gaussian_formula(gen):
    mu = sl.GaussianMeasure(torch.tensor([0.3, -0.2], dtype=F64),
                            torch.tensor([[1.0, 0.3], [0.3, 0.5]], dtype=F64))
    q = torch.randn(5, 2, generator=gen, dtype=F64)
    U = 0.5 * torch.randn(2, 2, generator=gen, dtype=F64)
    V = torch.randn(3, 2, generator=gen, dtype=F64)
    A_const, _ = cc.fixed_query_mse_expansion(q, U, V, mu.cov)
    assert torch.allclose(by.fluctuation_constant(mu, q, U, V), A_const, rtol=1e-10)


def test_fluctuation_constant_rademacher_closed_form_and_monte_carlo(gen):
    # D = 1, U = V = 1, query z = a: C = cosh(2a)/cosh(a)^2 (1 - tanh(2a)^2 + (tanh 2a - tanh a)^2)
    a = 1.2
    one = torch.eye(1, dtype=F64)
    C = float(by.fluctuation_constant(sl.RademacherMeasure(1), torch.tensor([[a]], dtype=F64), one, one)[0])
    t1, t2 = math.tanh(a), math.tanh(2 * a)
    assert C == pytest.approx(math.cosh(2 * a) / math.cosh(a) ** 2 * (1 - t2**2 + (t2 - t1) ** 2), rel=1e-10)
    # key check: L * MSE at L = 2000 agrees with C (4 SE + 3% for the O(1/L) correction) and rejects
    # the Gaussian formula e^{a^2}(1 + a^2) that would hold for unit-variance Gaussian tokens
    L, P = 2000, 3000
    outs = limits.finite_prompt_outputs(sl.RademacherMeasure(1), torch.tensor([[a]], dtype=F64), one, one,
                                        L, P, generator=gen)[:, 0, 0]
    e2 = (outs - math.tanh(a)) ** 2
    LM, se = L * float(e2.mean()), L * float(e2.std()) / math.sqrt(P)
    assert abs(LM - C) < 4 * se + 0.03 * C
    assert abs(LM - math.exp(a * a) * (1 + a * a)) > 4 * se + 0.03 * C


def test_softmax_limit_risk_gaussian_matches_chapter5(gen):
    mu = by.unit_variance_input_laws(2)["Gaussian"]
    A = torch.tensor([[0.8, 0.1], [0.0, 0.6]], dtype=F64)
    b = torch.tensor(1.1, dtype=F64)
    est, se = by.softmax_limit_risk(mu, A, b, mu.sample(100_000, generator=gen))
    exact = float(icl.infinite_prompt_risk(A, b, torch.eye(2, dtype=F64)))
    assert abs(est - exact) < 4 * se  # 4 Monte Carlo standard errors
    with pytest.raises(ValueError, match="at least 2 queries"):
        by.softmax_limit_risk(mu, A, b, mu.sample(1, generator=gen))


def test_isotropic_profile_zero_sets_and_quartic_expansion(gen):
    laws = by.unit_variance_input_laws(2)
    alphas = [0.05, 0.2, 0.8, 1.5]
    for name in ("Gaussian", "Rademacher"):
        b_best, risk = by.isotropic_scale_profile(laws[name], alphas, laws[name].sample(5000, generator=gen))
        assert risk.max() < 1e-12, name  # zero at every temperature
    b_rad = by.isotropic_scale_profile(laws["Rademacher"], alphas,
                                       laws["Rademacher"].sample(100, generator=gen))[0]
    assert np.allclose(b_rad, 1 / np.tanh(alphas), atol=1e-12)  # b = coth(alpha)
    for name in ("uniform", "mixture"):
        xq = laws[name].sample(100_000, generator=gen)
        _, risk = by.isotropic_scale_profile(laws[name], alphas, xq)
        k = by.quartic_bias_coefficient(laws[name])
        assert np.all(np.diff(risk) > 0) and risk[0] > 0
        # O(alpha^2) relative correction (0.25% at 0.05) + Monte Carlo (~0.5% at n = 1e5); 3% band
        assert risk[0] / (k * 0.05**4) == pytest.approx(1.0, abs=0.03)
    with pytest.raises(ValueError, match="alphas must be"):
        by.isotropic_scale_profile(laws["uniform"], [0.1, -1.0], laws["uniform"].sample(10, generator=gen))


def test_quartic_coefficient_closed_forms():
    laws = by.unit_variance_input_laws(2)
    # uniform on [-sqrt3, sqrt3]: kappa_4 = -6/5, m_4 = 9/5, m_6 = 27/7
    assert by.quartic_bias_coefficient(laws["uniform"]) == pytest.approx((1.2 / 6) ** 2 * (27 / 7 - 81 / 25),
                                                                       rel=1e-8)
    # mixture +-0.9 + N(0, 0.19): moments of a shifted Gaussian
    mu_, s2 = 0.9, 0.19
    m4 = mu_**4 + 6 * mu_**2 * s2 + 3 * s2**2
    m6 = mu_**6 + 15 * mu_**4 * s2 + 45 * mu_**2 * s2**2 + 15 * s2**3
    assert by.quartic_bias_coefficient(laws["mixture"]) == pytest.approx(((m4 - 3) / 6) ** 2 * (m6 - m4**2),
                                                                       rel=1e-8)
    assert by.quartic_bias_coefficient(laws["Rademacher"]) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="unit variance"):
        by.quartic_bias_coefficient(sl.GaussianMeasure(torch.zeros(2, dtype=F64), 2 * torch.eye(2, dtype=F64)))
    mixed = sl.GaussianMixtureMeasure(torch.tensor([[0.9, 0.0], [-0.9, 0.0]], dtype=F64),
                                      torch.diag(torch.tensor([0.19, 1.0], dtype=F64)).expand(2, 2, 2).clone(),
                                      torch.tensor([0.5, 0.5], dtype=F64))
    with pytest.raises(ValueError, match="share their cumulants"):
        by.quartic_bias_coefficient(mixed)


def test_paired_training_records_and_is_reproducible():
    mu = by.unit_variance_input_laws(2, dtype=F32)["uniform"]
    A0, b0 = 0.3 * torch.eye(2, dtype=F32), torch.tensor(0.4, dtype=F32)
    runs = [by.train_reduced_pair(mu, A0, b0, 20, steps=30, lr=0.1, batch_size=16,
                                  generator=torch.Generator().manual_seed(3), record_every=10)
            for _ in range(2)]
    r = runs[0]
    assert r.step.tolist() == [0, 10, 20, 30]
    for kind in by.KINDS:
        assert r.A[kind].shape == (4, 2, 2) and r.b[kind].shape == (4,) and r.loss[kind].shape == (4,)
        assert torch.equal(r.A[kind], runs[1].A[kind])  # same generator, same run
        assert torch.equal(r.A[kind][0], A0)  # both start from the given point
    assert not torch.equal(r.A["softmax"][-1], r.A["linear"][-1])
    A_avg, b_avg = r.averaged("softmax", 0.5)
    assert torch.allclose(A_avg, r.A["softmax"][-2:].mean(0))
    with pytest.raises(ValueError, match="fraction"):
        r.averaged("softmax", 0.0)
    with pytest.raises(ValueError, match="A0 has dtype"):
        by.train_reduced_pair(mu, A0.double(), b0.double(), 20, steps=2, lr=0.1, batch_size=4,
                              generator=torch.Generator())
    with pytest.raises(ValueError, match="lr must be > 0"):
        by.train_reduced_pair(mu, A0, b0, 20, steps=2, lr=0.0, batch_size=4, generator=torch.Generator())


def test_reduced_risks_match_chapter5_estimator(gen):
    mu = by.unit_variance_input_laws(2)["Gaussian"]
    A, b = torch.tensor([[0.9, 0.1], [0.2, 0.7]], dtype=F64), torch.tensor(1.2, dtype=F64)
    ours, se, cov = by.reduced_risks(mu, [(A, b, "softmax"), (A, b, "linear")], 30, n_prompts=20_000,
                                     generator=gen)
    ref, ref_se = icl.finite_prompt_risk(A, b, torch.eye(2, dtype=F64), 30, n_prompts=20_000, generator=gen)
    assert abs(float(ours[0]) - ref) < 4 * math.hypot(float(se[0]), ref_se)  # independent estimates
    exact_lin = float(icl.linear_finite_prompt_risk(A, b, torch.eye(2, dtype=F64), 30))
    assert abs(float(ours[1]) - exact_lin) < 4 * float(se[1])  # ZFB closed form for linear attention
    assert cov.shape == (2, 2) and torch.allclose(cov.diagonal().sqrt(), se)
    with pytest.raises(ValueError, match="kind must be one of"):
        by.reduced_risks(mu, [(A, b, "relu")], 30, n_prompts=10, generator=gen)
    with pytest.raises(TypeError, match="must be a tuple"):
        by.reduced_risks(mu, [A], 30, n_prompts=10, generator=gen)


def test_train_and_compare_rademacher_lookup_beats_linear():
    # key check of the chapter's Rademacher claim on a small run: softmax below linear by > 4 paired SE
    mu = by.unit_variance_input_laws(2, dtype=F32)["Rademacher"]
    A0, b0 = 0.4 * torch.eye(2, dtype=F32) / math.sqrt(2), torch.tensor(0.4, dtype=F32)
    t = by.train_and_compare(mu, A0, b0, 50, steps=150, lr=0.1, batch_size=64, eval_prompts=4000,
                             generator=torch.Generator().manual_seed(0))
    assert t.risk["linear"] - t.risk["softmax"] > 4 * t.diff_se
    assert set(t.A) == set(by.KINDS) and t.diff_se > 0


# --------------------------------------------------------------------------------------------------
# 2. heavy tails


def test_ess_ratio_limit_closed_forms():
    a = torch.tensor([0.7, -0.4], dtype=F64)
    g = sl.GaussianMeasure(torch.zeros(2, dtype=F64), torch.tensor([[1.0, 0.2], [0.2, 0.5]], dtype=F64))
    assert by.ess_ratio_limit(g, a) == pytest.approx(math.exp(-float(a @ g.cov @ a)), rel=1e-12)
    expected = math.prod(math.cosh(v) ** 2 / math.cosh(2 * v) for v in a.tolist())
    assert by.ess_ratio_limit(sl.RademacherMeasure(2), a) == pytest.approx(expected, rel=1e-12)
    assert by.ess_ratio_limit(sl.StudentTMeasure(2, 3.0), a) == 0.0
    assert by.ess_ratio_limit(sl.LogNormalMeasure(2), torch.zeros(2, dtype=F64)) == 1.0
    with pytest.raises(ValueError, match="a must have shape"):
        by.ess_ratio_limit(g, torch.ones(3, dtype=F64))


def test_weight_statistics_agree_with_softmax_attention(gen):
    mu = sl.GaussianMeasure(torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64))
    a = torch.tensor([0.5, -0.3], dtype=F64)
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    st = by.softmax_weight_statistics(mu, a, 40, 5, generator=g1, max_batch_tokens=80)  # 2 per batch
    z = mu.sample(200, generator=g2).reshape(5, 40, 2)
    out = sl.softmax_attention(z, a.expand(5, 1, 2), torch.eye(2, dtype=F64), torch.eye(2, dtype=F64))
    assert torch.allclose(st.output, out[:, 0], atol=1e-12)
    p = torch.softmax(z @ a, -1)
    assert torch.allclose(st.ess, 1 / (p * p).sum(-1)) and torch.allclose(st.max_weight, p.amax(-1))
    assert bool(((st.ess >= 1) & (st.ess <= 40)).all())
    with pytest.raises(ValueError, match="what must be one of"):
        st.quantiles("mean")


def test_heavy_tails_collapse_while_subgaussian_settles():
    # key check: a wrong ESS limit (e.g. e^{-a^2/2} for the Gaussian) is rejected by the simulation
    gen = torch.Generator().manual_seed(0)
    a1 = torch.tensor([1.0], dtype=F64)
    summ = {}
    for name in ("Gaussian", "Student-t (3 dof)"):
        runs = [by.softmax_weight_statistics(by.HEAVY_TAIL_LAWS[name](), a1, L, P, generator=gen)
                for L, P in ((100, 200), (1000, 60), (10_000, 20))]
        summ[name] = by.summarise_weight_statistics(runs)
    g = summ["Gaussian"]
    limit = by.ess_ratio_limit(by.HEAVY_TAIL_LAWS["Gaussian"](), a1)
    assert abs(g["ess_ratio"][-1] / limit - 1) < 0.05
    assert abs(g["ess_ratio"][-1] / math.exp(-0.5) - 1) > 0.3
    t = summ["Student-t (3 dof)"]
    assert t["ess"][-1] < 2 and t["max_weight"][-1] > 0.9 and t["iqr_slope"] > 0
    with pytest.raises(ValueError, match="increasing prompt lengths"):
        by.summarise_weight_statistics(list(reversed([by.softmax_weight_statistics(
            by.HEAVY_TAIL_LAWS["Gaussian"](), a1, L, 3, generator=gen) for L in (10, 20)])))


def test_plot_sorted_weights():
    fig, ax = plt.subplots()
    out = by.plot_sorted_weights(ax, "log-normal", 500, n_show=10, seed=1)
    w = out["weights"]
    assert w.shape == (10,) and np.all(np.diff(w) <= 0) and w.sum() <= 1 + 1e-12
    assert 1 <= out["ess"] <= 500 and ax.get_title().startswith("log-normal")
    plt.close(fig)
    with pytest.raises(ValueError, match="law must be one of"):
        by.plot_sorted_weights(None, "Cauchy", 10)


# --------------------------------------------------------------------------------------------------
# 3. temperature


def test_critical_scale_and_constant():
    assert by.critical_scale(KMS) == pytest.approx(1.9824 / math.sqrt(2), abs=2e-4)
    assert by.critical_scale(torch.eye(5, dtype=F64)) == pytest.approx(5**0.25 / math.sqrt(2), rel=1e-12)
    s_c = by.critical_scale(KMS)
    A, b = icl.bayes_optimal_parameters(KMS)
    assert by.temperature_fluctuation_constant(KMS, 1.0) == pytest.approx(icl.risk_fluctuation_constant(A, b, KMS))
    assert math.isfinite(by.temperature_fluctuation_constant(KMS, 0.99 * s_c))
    assert by.temperature_fluctuation_constant(KMS, 1.01 * s_c) == math.inf
    with pytest.raises(ValueError, match="positive definite"):
        by.critical_scale(torch.zeros(2, 2, dtype=F64))


def test_temperature_risk_matches_direct_monte_carlo(gen):
    # the radial reduction is exact in law: compare with chapter 5's estimator on a non-KMS covariance
    # whose trace is not d (so the tr(Sigma)/d factor is tested), below and above the threshold
    M = torch.randn(3, 3, generator=gen, dtype=F64)
    Sigma = M @ M.T / 3 + 0.5 * torch.eye(3, dtype=F64)
    A, b = icl.bayes_optimal_parameters(Sigma)
    s_vals = [0.6, 2.0]
    ours, se = by.temperature_risk(Sigma, s_vals, 40, 6000, generator=gen, dtype=F64)
    for s, r, e in zip(s_vals, ours, se):
        ref, ref_se = icl.finite_prompt_risk(s * A, b / s, Sigma, 40, n_prompts=40_000, generator=gen)
        assert abs(r - ref) < 4 * math.hypot(e, ref_se), s  # two independent estimates, 4 SE


def test_temperature_reduction_key_check_needs_the_perpendicular_term():
    # key check: the chapter compares R_L(A*, b*) with chapter 5's reference 0.408 +- 0.001 at L = 100.
    # The reduction passes; dropping the (d - 1) sum p_i^2 / u^2 term of the proposition fails it.
    from scipy.special import gammaln, roots_genlaguerre

    gen = torch.Generator().manual_seed(0)
    ours, se = by.temperature_risk(KMS, [1.0], 100, 6000, generator=gen)
    assert abs(ours[0] - 0.408) < 5 * math.hypot(se[0], 0.001)
    d, c = 5, float(icl.bayes_optimal_parameters(KMS)[1])
    t, wq = roots_genlaguerre(12, d / 2 - 1)
    r, wq = torch.tensor(np.sqrt(2 * t)), torch.tensor(wq / math.exp(gammaln(d / 2)))
    g = torch.randn(6000, 1, 100, generator=gen, dtype=F64)
    u = 1 / c
    p = torch.softmax(u * r[None, :, None] * g, -1)
    wrong = 0.5 * (((p * g).sum(-1) / u - r) ** 2 @ wq)  # perpendicular coordinates forgotten
    assert abs(float(wrong.mean()) - 0.408) > 5 * math.hypot(float(wrong.std()) / math.sqrt(6000), 0.001)


def test_temperature_risk_validates():
    with pytest.raises(ValueError, match="s_values"):
        by.temperature_risk(KMS, [0.0], 10, 10, generator=torch.Generator())
    with pytest.raises(ValueError, match="n_prompts must be at least 2"):
        by.temperature_risk(KMS, [1.0], 10, 1, generator=torch.Generator())
    with pytest.raises(TypeError, match="generator"):
        by.temperature_risk(KMS, [1.0], 10, 10, generator=None)


# --------------------------------------------------------------------------------------------------
# 4. non-centred tokens


def test_linear_attention_limit_gaussian_and_monte_carlo(gen):
    m = torch.tensor([0.5, -0.3, 0.2], dtype=F64)
    G = torch.tensor([[1.0, 0.3, 0.0], [0.3, 0.8, 0.2], [0.0, 0.2, 0.5]], dtype=F64)
    U = 0.4 * torch.randn(3, 3, generator=gen, dtype=F64)
    V = torch.randn(2, 3, generator=gen, dtype=F64)
    q = torch.randn(4, 3, generator=gen, dtype=F64)
    mu = sl.GaussianMeasure(m, G)
    expected = q @ U.T @ (G + torch.outer(m, m)) @ V.T
    assert torch.allclose(by.linear_attention_limit(mu, q, U, V), expected, atol=1e-12)
    # key check: the chapter's difference formula V(m - m m^T U z), and a wrong sign is rejected
    diff = sl.attention_limit(mu, q, U, V) - by.linear_attention_limit(mu, q, U, V)
    predicted = (m - (q @ U.T @ m)[:, None] * m) @ V.T
    assert torch.allclose(diff, predicted, atol=1e-12)
    outs = {k: limits.finite_prompt_outputs(mu, q, U, V, 4000, 200, generator=gen, attention=k)
            for k in by.KINDS}
    mc = (outs["softmax"] - outs["linear"]).mean(0)
    se = ((outs["softmax"].var(0) + outs["linear"].var(0)) / 200).sqrt()
    assert ((mc - predicted).abs() < 5 * se).all()
    wrong = (m + (q @ U.T @ m)[:, None] * m) @ V.T
    assert ((mc - wrong).abs() > 5 * se).any()
    # non-Gaussian law: autograd moments at 0 (Rademacher: E zz^T = I)
    assert torch.allclose(by.linear_attention_limit(sl.RademacherMeasure(3), q, U, V), q @ U.T @ V.T,
                          atol=1e-12)


def test_noncentred_risks_monte_carlo_and_centred_case(gen):
    m = torch.tensor([0.8, -0.4], dtype=F64)
    Sigma = torch.tensor([[1.0, 0.3], [0.3, 0.6]], dtype=F64)
    A = torch.tensor([[0.7, 0.1], [-0.2, 0.9]], dtype=F64)
    b = torch.tensor(0.8, dtype=F64)
    soft, lin = by.noncentred_limit_risks(A, b, m, Sigma)
    n = 200_000
    W = torch.randn(n, 2, generator=gen, dtype=F64)
    X = m + torch.randn(n, 2, generator=gen, dtype=F64) @ torch.linalg.cholesky(Sigma).T
    y = (W * X).sum(-1)
    e_soft = 0.5 * (b * (W * (m + X @ A.T @ Sigma)).sum(-1) - y) ** 2
    e_lin = 0.5 * (b * (W * (X @ A.T @ (Sigma + torch.outer(m, m)))).sum(-1) - y) ** 2
    for e, c in ((e_soft, soft), (e_lin, lin)):
        assert abs(float(e.mean()) - c) < 4 * float(e.std()) / math.sqrt(n)  # 4 SE
    zero = torch.zeros(2, dtype=F64)
    both = by.noncentred_limit_risks(A, b, zero, Sigma)
    assert both[0] == pytest.approx(both[1]) == pytest.approx(float(icl.infinite_prompt_risk(A, b, Sigma)))


def test_noncentred_floor_is_attained_and_never_beaten(gen):
    m = torch.tensor([1.0, 0.5], dtype=F64)
    Sigma = torch.tensor([[1.0, 0.2], [0.2, 0.8]], dtype=F64)
    for b_val in (0.3, 0.9, 1.7):
        b = torch.tensor(b_val, dtype=F64)
        floor, K = by.noncentred_softmax_floor(b, m, Sigma)
        kappa = float(m @ torch.linalg.solve(Sigma, m))
        assert floor == pytest.approx(0.5 * b_val**2 * float(m @ m) / (1 + kappa), rel=1e-12)
        A_opt = torch.linalg.solve(Sigma, K) / b
        assert by.noncentred_limit_risks(A_opt, b, m, Sigma)[0] == pytest.approx(floor, rel=1e-10)
        for _ in range(20):  # random A never goes below the floor
            A = A_opt + 0.5 * torch.randn(2, 2, generator=gen, dtype=F64)
            assert by.noncentred_limit_risks(A, b, m, Sigma)[0] >= floor - 1e-12
    assert by.noncentred_softmax_floor(torch.tensor(0.0, dtype=F64), m, Sigma)[0] == 0.0
    with pytest.raises(ValueError, match="mean must have shape"):
        by.noncentred_softmax_floor(torch.tensor(1.0, dtype=F64), torch.zeros(3, dtype=F64), Sigma)
