"""Stability along the training trajectory (softlin.stability): the control-variate risk gap and its
supremum over balls, the finite-prompt gradient flow on a fixed sample, the Hessian of R_inf and the
Grönwall bounds of Lemma D.1, and the explorer of chapter 4.

Monte Carlo tolerances are a few standard errors of the estimate they check (stated in each test); exact
identities are checked to rounding; ODE comparisons allow for the solver tolerances used."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as hst  # noqa: E402

import softlin.icl as icl  # noqa: E402
import softlin.stability as st  # noqa: E402

F64 = torch.float64
SIGMA = 0.5 * icl.kms_covariance(2, 0.5)  # the chapter's covariance
SIGMA3 = icl.kms_covariance(3, 0.3)


def _start(seed=0, alpha=1.0, d=2):
    return icl.balanced_initialisation(d, alpha, generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------------------------------
# the control-variate gap


def test_conditional_gap_plus_infinite_part_is_icl_conditional_risk(gen):
    x = torch.randn(64, 9, 3, generator=gen, dtype=F64) @ torch.linalg.cholesky(SIGMA3).T
    xq = torch.randn(64, 3, generator=gen, dtype=F64)
    A = 0.4 * torch.randn(3, 3, generator=gen, dtype=F64)
    b = torch.tensor(1.3, dtype=F64)
    for kind in ("softmax", "linear"):
        gap = st.conditional_risk_gap(A, b, x, xq, SIGMA3, kind=kind)
        c_inf = 0.5 * ((b * xq @ A.T @ SIGMA3 - xq) ** 2).sum(-1)  # 1/2 ||b Sigma A x_q - x_q||^2
        ref = icl.conditional_risk(A, b, x, xq, kind=kind)
        assert torch.allclose(gap + c_inf, ref, atol=1e-12)  # one identity: rounding only


def test_gap_coefficients_reproduce_the_per_prompt_average():
    # same seed, one chunk: the coefficients must give exactly the mean of c_L - c_inf on the same prompts
    A = torch.tensor([[0.6, -0.2], [0.3, 0.9]], dtype=F64)
    b = torch.tensor(-0.7, dtype=F64)
    coef = st.gap_coefficients(A, SIGMA, 20, n_prompts=300, generator=torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)
    xs = torch.randn(300, 21, 2, generator=g, dtype=F64) @ torch.linalg.cholesky(SIGMA).T
    per_prompt = st.conditional_risk_gap(A, b, xs[:, :20], xs[:, 20], SIGMA)
    est, se = coef.gap(float(b))
    assert abs(float(est[0]) - float(per_prompt.mean())) < 1e-12
    assert abs(float(se[0]) - float(per_prompt.std() / math.sqrt(300))) < 1e-12


@pytest.mark.parametrize("L", [5, 50])
def test_gap_at_zero_matrix_is_b2_trace_over_2L(L):
    # A = 0: uniform weights, m = mean of the inputs, gap = b^2 tr(Sigma) / (2L) exactly
    b = torch.tensor(1.5, dtype=F64)
    est, se = st.risk_gap(torch.zeros(2, 2, dtype=F64), b, SIGMA, L, n_prompts=40_000,
                          generator=torch.Generator().manual_seed(L))
    exact = float(b**2 * torch.trace(SIGMA)) / (2 * L)
    assert abs(est - exact) < 4 * se  # 4 standard errors
    # ... and the check is sharp enough to reject a formula off by a factor of two
    assert abs(est - 2 * exact) > 4 * se and abs(est - exact / 2) > 4 * se


def test_linear_attention_gap_matches_closed_form():
    # for linear attention R_L has a closed form (Gaussian fourth moments), so the gap is known exactly
    A = torch.tensor([[0.8, 0.1, 0.0], [-0.3, 0.5, 0.2], [0.0, 0.4, 0.7]], dtype=F64)
    b = torch.tensor(1.1, dtype=F64)
    for L in (5, 40):
        est, se = st.risk_gap(A, b, SIGMA3, L, n_prompts=40_000, kind="linear",
                              generator=torch.Generator().manual_seed(L))
        exact = float(icl.linear_finite_prompt_risk(A, b, SIGMA3, L) - icl.infinite_prompt_risk(A, b, SIGMA3))
        assert abs(est - exact) < 4 * se  # 4 standard errors


def test_control_variate_agrees_with_plain_estimate_and_is_more_precise():
    A0, b0 = _start()
    est, se = st.risk_gap(A0, b0, SIGMA, 100, n_prompts=20_000, generator=torch.Generator().manual_seed(1))
    plain, se_plain = icl.finite_prompt_risk(A0, b0, SIGMA, 100, n_prompts=20_000,
                                             generator=torch.Generator().manual_seed(2))
    cv = est + float(icl.infinite_prompt_risk(A0, b0, SIGMA))
    assert abs(cv - plain) < 4 * math.hypot(se, se_plain)  # independent samples: 4 combined standard errors
    assert se < se_plain / 3  # the query's own fluctuation cancels


def test_batched_gap_uses_common_prompts():
    A = torch.stack([torch.eye(2, dtype=F64), torch.eye(2, dtype=F64), 0.3 * torch.ones(2, 2, dtype=F64)])
    b = torch.tensor([1.0, 1.0, -2.0], dtype=F64)
    est, se = st.risk_gap(A, b, SIGMA, 30, n_prompts=500, generator=torch.Generator().manual_seed(3))
    assert est.shape == (3,) and se.shape == (3,)
    assert est[0] == est[1] and se[0] == se[1]  # identical parameters, identical prompts
    single, _ = st.risk_gap(A[2], b[2], SIGMA, 30, n_prompts=500, generator=torch.Generator().manual_seed(3))
    assert abs(single - float(est[2])) < 1e-12  # same prompts whether batched or not


@given(q=hst.floats(-3, 3), l=hst.floats(-3, 3), b_max=hst.floats(0.0, 4.0))
@settings(max_examples=60, deadline=None)
def test_sup_over_b_is_the_maximum_of_the_parabola(q, l, b_max):
    coef = st.GapCoefficients(A=torch.zeros(1, 2, 2, dtype=F64), quad=torch.tensor([q], dtype=F64),
                              lin=torch.tensor([l], dtype=F64), cov=torch.zeros(1, 2, 2, dtype=F64),
                              n_prompts=10, L=5)
    best, b_arg, _ = coef.sup_over_b(torch.tensor([b_max], dtype=F64))
    grid = np.linspace(-b_max, b_max, 4001)
    brute = np.abs(grid**2 * q - grid * l).max()
    assert abs(float(b_arg[0])) <= b_max + 1e-12
    assert float(best[0]) >= brute - 1e-12  # at least as good as a fine grid
    slack = (q * q + l * l + 1) * (2 * b_max / 4000) * (2 * b_max + 1)  # grid spacing x Lipschitz constant
    assert float(best[0]) <= brute + slack  # and no better


def test_uniform_risk_gap_stays_in_the_ball_and_decreases_with_L():
    gen = torch.Generator().manual_seed(11)
    kw = dict(n_directions=6, n_norms=3, n_prompts=2000, refine_steps=3, refine_prompts=400, generator=gen)
    short = st.uniform_risk_gap(SIGMA, 5, [1.0, 2.0], **kw)
    long = st.uniform_risk_gap(SIGMA, 500, [1.0, 2.0], **kw)
    for res in short + long:
        assert float((res.A**2).sum()) + res.b**2 <= res.radius**2 * (1 + 1e-9)  # inside its ball
        assert res.sup >= 0 and res.stderr >= 0 and res.grid_sup >= 0
    assert short[1].sup >= short[0].sup - 4 * math.hypot(short[0].stderr, short[1].stderr)  # larger ball
    for s, lg in zip(short, long):
        assert s.sup - lg.sup > 4 * math.hypot(s.stderr, lg.stderr)  # the chapter's check, small sizes


def test_uniform_risk_gap_without_refinement():
    res = st.uniform_risk_gap(SIGMA, 10, [1.0], n_directions=4, n_norms=2, n_prompts=200, refine_steps=0,
                              generator=torch.Generator().manual_seed(0))
    assert len(res) == 1 and res[0].L == 10 and res[0].radius == 1.0


# --------------------------------------------------------------------------------------------------
# the finite-prompt flow


@pytest.mark.parametrize("kind", ["softmax", "linear"])
@pytest.mark.parametrize("cv", [True, False])
def test_hand_written_gradient_matches_autograd(kind, cv):
    risk = st.EmpiricalRisk(SIGMA3, 12, 50, generator=torch.Generator().manual_seed(2), kind=kind,
                            control_variate=cv)
    A = 0.5 * torch.randn(3, 3, generator=torch.Generator().manual_seed(3), dtype=F64)
    b = torch.tensor(0.9, dtype=F64)
    A_ = A.clone().requires_grad_(True)
    b_ = b.clone().requires_grad_(True)
    val = risk._value_autograd(A_, b_)
    gA, gb = torch.autograd.grad(val, (A_, b_))
    hA, hb = risk.gradient(A, b)
    assert abs(risk.value(A, b) - float(val.detach())) < 1e-12
    assert torch.allclose(hA, gA, atol=1e-12) and torch.allclose(hb, gb, atol=1e-12)  # rounding only


def test_control_variate_adds_the_closed_form_correction():
    kw = dict(generator=None, kind="softmax")
    with_cv = st.EmpiricalRisk(SIGMA, 8, 200, **{**kw, "generator": torch.Generator().manual_seed(4)})
    plain = st.EmpiricalRisk(SIGMA, 8, 200, control_variate=False,
                             **{**kw, "generator": torch.Generator().manual_seed(4)})
    A, b = _start()
    M = b * SIGMA @ A - torch.eye(2, dtype=F64)
    S_hat = plain.x_query.T @ plain.x_query / 200
    correction = 0.5 * float(torch.trace(M @ (SIGMA - S_hat) @ M.T))
    assert abs(with_cv.value(A, b) - plain.value(A, b) - correction) < 1e-12
    # and the per-prompt infinite part averages to R_inf on the sample: plain - gap = mean c_inf
    c_inf = 0.5 * float(torch.trace(M @ S_hat @ M.T))
    gap = st.conditional_risk_gap(A, b, plain.x, plain.x_query, SIGMA).mean()
    assert abs(plain.value(A, b) - float(gap) - c_inf) < 1e-12


def test_gradient_gap_is_the_norm_of_the_gradient_difference():
    risk = st.EmpiricalRisk(SIGMA, 10, 100, generator=torch.Generator().manual_seed(0))
    A, b = _start()
    gA, gb = risk.gradient(A, b)
    iA, ib = icl.infinite_prompt_risk_grad(A, b, SIGMA)
    expected = math.sqrt(float(((gA - iA) ** 2).sum() + (gb - ib) ** 2))
    assert abs(risk.gradient_gap(A, b) - expected) < 1e-12


def test_flow_decreases_its_objective_and_starts_at_the_start():
    A0, b0 = _start()
    t = np.linspace(0.0, 10.0, 21)
    risk = st.EmpiricalRisk(SIGMA, 20, 200, generator=torch.Generator().manual_seed(0))
    tr = risk.flow(A0, b0, t)
    assert torch.equal(tr.A[0], A0) and float(tr.b[0]) == float(b0)
    assert np.all(np.diff(tr.risk.numpy()) <= 1e-10)  # gradient flow never increases its own objective
    assert risk.last_nfev > 0 and tr.t.shape == (21,)
    assert abs(float(tr.risk[3]) - risk.value(tr.A[3], tr.b[3])) < 1e-12


def test_linear_flow_conserves_balance_softmax_does_not():
    # linear attention depends on (A, b) only through b A: the scaling symmetry conserves ||A||^2 - b^2
    A0, b0 = _start()
    t = np.linspace(0.0, 20.0, 21)
    inv = {}
    for kind in ("linear", "softmax"):
        tr = st.finite_prompt_flow(A0, b0, SIGMA, 10, t, n_prompts=300, kind=kind, rtol=1e-9, atol=1e-11,
                                   generator=torch.Generator().manual_seed(1))
        inv[kind] = float(tr.invariant().abs().max())
    assert inv["linear"] < 1e-6  # solver tolerance 1e-9 relative over t = 20
    assert inv["softmax"] > 1e-2


def _window_distance(L, flow_inf, t, seed):
    A0, b0 = _start()
    tr = st.finite_prompt_flow(A0, b0, SIGMA, L, t, n_prompts=1000, dtype=torch.float32, rtol=1e-5, atol=1e-7,
                               generator=torch.Generator().manual_seed(seed))
    return float(st.trajectory_distance(tr, flow_inf).max())


def test_shadowing_improves_with_L_and_the_check_fails_against_a_wrong_limit():
    A0, b0 = _start()
    t = np.linspace(0.0, 10.0, 21)
    right = icl.infinite_prompt_flow(A0, b0, SIGMA, t)
    wrong = icl.infinite_prompt_flow(A0, b0, 1.2 * SIGMA, t)  # the limit flow with a wrong covariance
    d_short, d_long = _window_distance(10, right, t, 1), _window_distance(1000, right, t, 2)
    assert d_short > 10 * d_long  # the chapter's check (factor 10 between the extreme prompt lengths)
    w_short, w_long = _window_distance(10, wrong, t, 1), _window_distance(1000, wrong, t, 2)
    assert not w_short > 10 * w_long  # against a wrong limit the same check fails
    assert w_long > 5 * d_long


def test_trajectory_distance():
    A0, b0 = _start()
    t = np.linspace(0.0, 2.0, 5)
    a = icl.infinite_prompt_flow(A0, b0, SIGMA, t)
    assert torch.equal(st.trajectory_distance(a, a), torch.zeros(5, dtype=F64))
    shifted = icl.Trajectory(t=a.t, A=a.A + 0.3, b=a.b - 0.4, risk=a.risk)
    assert torch.allclose(st.trajectory_distance(a, shifted), torch.full((5,), math.sqrt(4 * 0.09 + 0.16),
                                                                          dtype=F64), atol=1e-12)
    other = icl.infinite_prompt_flow(A0, b0, SIGMA, np.linspace(0.0, 3.0, 5))
    with pytest.raises(ValueError, match="same times"):
        st.trajectory_distance(a, other)
    with pytest.raises(TypeError, match="traj_b"):
        st.trajectory_distance(a, "not a trajectory")


# --------------------------------------------------------------------------------------------------
# Hessian, Lipschitz constants and Grönwall bounds


def test_closed_form_hessian_matches_autograd(gen):
    A = torch.randn(4, 3, 3, generator=gen, dtype=F64)
    b = torch.randn(4, generator=gen, dtype=F64)
    H = st.infinite_risk_hessian(A, b, SIGMA3)
    assert H.shape == (4, 10, 10)
    for k in range(4):
        ref = torch.func.hessian(lambda th: icl.infinite_prompt_risk(th[:9].reshape(3, 3), th[9], SIGMA3))(
            torch.cat([A[k].reshape(-1), b[k][None]]))
        assert torch.allclose(H[k], ref, atol=1e-12)  # rounding only
        assert torch.allclose(st.infinite_risk_hessian(A[k], b[k], SIGMA3), H[k])


def test_hessian_at_optimum_has_one_flat_direction_along_the_zero_curve():
    A_star, b_star = icl.bayes_optimal_parameters(SIGMA3)
    norms, lam_min = st.hessian_extremes(A_star[None], b_star[None], SIGMA3)
    assert abs(float(lam_min[0])) < 1e-12 and float(norms[0]) > 0
    ev = torch.linalg.eigvalsh(st.infinite_risk_hessian(A_star, b_star, SIGMA3))
    assert float(ev[1]) > 1e-3  # only one flat direction (R_inf is zero on a curve, not a surface)


def test_max_hessian_norm_grows_with_the_radius():
    small = st.max_hessian_norm_on_ball(SIGMA, 1.0, n_points=200, generator=torch.Generator().manual_seed(0))
    large = st.max_hessian_norm_on_ball(SIGMA, 4.0, n_points=200, generator=torch.Generator().manual_seed(0))
    # same directions, radius x4: the quartic part of R_inf makes the Hessian grow, at least x4 here
    assert large > 4 * small
    A_star, b_star = icl.bayes_optimal_parameters(SIGMA)
    r_star = math.hypot(float(A_star.norm()), float(b_star))
    at_star = float(st.hessian_extremes(A_star[None], b_star[None], SIGMA)[0][0])
    assert st.max_hessian_norm_on_ball(SIGMA, 1.5 * r_star, n_points=500,
                                       generator=torch.Generator().manual_seed(1)) > at_star


def test_segment_constants_of_a_trajectory_with_itself():
    A0, b0 = _start()
    a = icl.infinite_prompt_flow(A0, b0, SIGMA, np.linspace(0.0, 5.0, 6))
    beta, mu = st.segment_constants(a, a, SIGMA, n_interp=3)
    norms, lam_min = st.hessian_extremes(a.A, a.b, SIGMA)
    assert np.allclose(beta, norms.numpy()) and np.allclose(mu, -lam_min.numpy())
    with pytest.raises(ValueError, match="n_interp"):
        st.segment_constants(a, a, SIGMA, n_interp=1)


@given(g=hst.floats(0.0, 5.0), beta=hst.floats(0.0, 3.0, allow_subnormal=False), t_max=hst.floats(0.1, 5.0))
@settings(max_examples=50, deadline=None)
def test_gronwall_envelope_constant_coefficients_is_exact_and_below_lemma(g, beta, t_max):
    t = np.linspace(0.0, t_max, 51)
    env = st.gronwall_envelope(t, g, beta)
    exact = g * np.expm1(beta * t) / beta if beta > 0 else g * t
    assert np.allclose(env, exact, rtol=1e-10, atol=1e-12)
    assert np.all(env <= st.lemma_d1_bound(t, g, beta) * (1 + 1e-12) + 1e-15)  # (e^x - 1)/x <= e^x


def test_gronwall_envelope_bounds_the_comparison_ode():
    # E' = g(t) + r(t) E with smooth coefficients: the piecewise-max envelope lies above the solution
    from scipy.integrate import solve_ivp

    t = np.linspace(0.0, 6.0, 61)
    g = 1.0 + np.sin(t)
    r = np.cos(t) - 0.3
    sol = solve_ivp(lambda s, y: [1 + math.sin(s) + (math.cos(s) - 0.3) * y[0]], (0, 6), [0.0], t_eval=t,
                    rtol=1e-10, atol=1e-12)
    env = st.gronwall_envelope(t, g, r)
    assert np.all(env >= sol.y[0] - 1e-9)
    assert env[-1] < 1.5 * sol.y[0][-1]  # and not wildly above it on a fine grid
    # a contracting rate keeps the envelope bounded: E -> g / |r|
    flat = st.gronwall_envelope(np.linspace(0.0, 50.0, 501), 2.0, -0.5)
    assert abs(flat[-1] - 4.0) < 1e-6


def test_lemma_d1_bound_and_input_checks():
    assert np.allclose(st.lemma_d1_bound([0.0, 1.0, 2.0], 0.5, 1.0), [0.0, 0.5 * math.e, math.e**2])
    with pytest.raises(ValueError, match="t must"):
        st.lemma_d1_bound([-1.0], 1.0, 1.0)
    with pytest.raises(ValueError, match="g must"):
        st.lemma_d1_bound([1.0], -1.0, 1.0)
    with pytest.raises(ValueError, match="increasing"):
        st.gronwall_envelope([0.0, 0.0], 1.0, 1.0)


def test_first_time_below():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    r = np.array([1.0, 0.5, 0.2, 0.1])
    assert st.first_time_below(t, r, 0.2) == 2.0
    assert st.first_time_below(t, r, 5.0) == 0.0
    assert st.first_time_below(t, r, 0.01) == math.inf
    with pytest.raises(ValueError, match="same length"):
        st.first_time_below(t, r[:2], 0.1)


# --------------------------------------------------------------------------------------------------
# validation and the explorer


def test_bad_inputs_are_rejected_with_the_argument_name():
    A0, b0 = _start()
    with pytest.raises(ValueError, match="Sigma"):
        st.risk_gap(A0, b0, -SIGMA, 10, n_prompts=10)
    with pytest.raises(ValueError, match="kind"):
        st.risk_gap(A0, b0, SIGMA, 10, n_prompts=10, kind="relu")
    with pytest.raises(ValueError, match="n_prompts"):
        st.risk_gap(A0, b0, SIGMA, 10, n_prompts=1)
    with pytest.raises(ValueError, match="A must"):
        st.gap_coefficients(torch.zeros(3, 3, dtype=F64), SIGMA, 10, n_prompts=10)
    with pytest.raises(ValueError, match="b must"):
        st.risk_gap(A0, torch.zeros(2, dtype=F64), SIGMA, 10, n_prompts=10)
    with pytest.raises(TypeError, match="A must be a torch.Tensor"):
        st.infinite_risk_hessian(np.eye(2), b0, SIGMA)
    with pytest.raises(ValueError, match="radius"):
        st.uniform_risk_gap(SIGMA, 10, [-1.0], n_directions=2, n_norms=2, n_prompts=10)
    with pytest.raises(ValueError, match="t_eval"):
        st.finite_prompt_flow(A0, b0, SIGMA, 5, [1.0, 0.5], n_prompts=10)
    with pytest.raises(TypeError, match="control_variate"):
        st.EmpiricalRisk(SIGMA, 5, 10, control_variate=1)
    x = torch.zeros(4, 3, 2, dtype=F64)
    with pytest.raises(ValueError, match="x_query"):
        st.conditional_risk_gap(A0, b0, x, torch.zeros(5, 2, dtype=F64), SIGMA)
    with pytest.raises(ValueError, match="dtype"):
        st.conditional_risk_gap(A0, b0, x.float(), torch.zeros(4, 2), SIGMA)


def test_plot_transfer_budget_marks_T_and_says_whether_the_budget_holds():
    fig, (ax1, ax2) = plt.subplots(1, 2)
    kw = dict(n_prompts=100, t_max=30.0, n_times=31)
    ok = st.plot_transfer_budget(ax1, L=1000, epsilon=0.05, **kw)
    bad = st.plot_transfer_budget(ax2, L=10, epsilon=0.01, **kw)
    assert ok["holds"] and not bad["holds"]
    assert ok["risk_L_at_T"] <= ok["risk_inf"][-1] + 0.05 and bad["risk_L_at_T"] > bad["risk_inf"][-1] + 0.01
    for res in (ok, bad):
        k = int(np.searchsorted(res["t"], res["T"]))
        assert res["risk_inf"][k] <= res["risk_inf"][-1] + 1e-12 + (0.05 if res is ok else 0.01) / 2
        assert k == 0 or res["risk_inf"][k - 1] > res["risk_inf"][-1] + (0.05 if res is ok else 0.01) / 2
    assert "holds" in ax1.get_title() and "fails" in ax2.get_title()
    assert len(ax1.get_lines()) >= 4
    plt.close(fig)


def test_plot_transfer_proof_draws_curves_levels_and_bars():
    fig, (ax1, ax2) = plt.subplots(1, 2)
    t = np.linspace(0.0, 10.0, 11)
    r_inf = np.exp(-t)
    st.plot_transfer_proof(ax1, ax2, t, r_inf, {10: 0.5 + r_inf, 1000: 0.01 + r_inf},
                           {10: (0.4, 0.1), 100: (0.05, -0.01), 1000: (0.004, 0.001)}, T=3.0, R_lim=0.0,
                           epsilon=0.02)
    assert len(ax1.get_lines()) == 3 + 3  # one solid, two dashed, two levels and the time T
    assert len(ax2.patches) == 2 * 3  # gap and drift bars for three prompt lengths
    assert [tk.get_text() for tk in ax2.get_xticklabels()] == ["10", "100", "1000"]
    with pytest.raises(ValueError, match="risk_L"):
        st.plot_transfer_proof(ax1, ax2, t, r_inf, {10: r_inf[:3]}, {10: (0.1, 0.1)}, T=3.0, R_lim=0.0,
                               epsilon=0.02)
    plt.close(fig)
