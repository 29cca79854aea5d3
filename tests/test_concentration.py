"""softlin.concentration: the Monte Carlo estimator against direct computation through the attention engine,
the generic delta method against the hand-derived closed forms, the exact query averages against
quadrature, the closed forms against Monte Carlo, and the checks of chapter 3 failing on wrong constants.

Monte Carlo tolerances are 4 standard errors (a false alarm about once in 16 000 runs per check; the seeds
are fixed, so each test is deterministic) plus, where an estimate is taken at finite L, the size of the
next finite-L term of the delta-method expansion."""

from __future__ import annotations

import math

import numpy as np
import pytest
import softlin as sl
import torch
from softlin import concentration as cc
from softlin.montecarlo import mean_and_stderr

pytestmark = pytest.mark.unit  # the library's unit tests: `make check` runs them

F64 = torch.float64


def _one(x=1.0):
    return torch.full((1, 1), float(x), dtype=F64)


def _scalar_gaussian():
    return sl.GaussianMeasure(torch.zeros(1, dtype=F64), _one())


def _problem2d():
    cov = torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=F64)
    U = torch.tensor([[0.3, -0.1], [0.2, 0.25]], dtype=F64)
    V = torch.tensor([[1.0, 0.5], [-0.3, 0.8]], dtype=F64)
    mu = sl.GaussianMeasure(torch.tensor([0.5, -0.2], dtype=F64), cov)
    return mu, cov, U, V


def _query_with_tilt(U, cov, s, z0=(1.0, 1.0)):
    z0 = torch.tensor(z0, dtype=F64)
    a0 = U @ z0
    return (z0 * math.sqrt(s / float(a0 @ cov @ a0)))[None]  # (1, D) with a^T cov a = s


# --- The estimator against a direct computation ---------------------------------------------------
@pytest.mark.parametrize(
    "chunk_size", [1, 5, 23, 100]
)  # one token, a non-divisor, exactly L, more than L
@pytest.mark.parametrize("shared_queries", [True, False])
def test_sample_errors_equal_direct_computation(chunk_size, shared_queries):
    mu, cov, U, V = _problem2d()
    P, L, Q = 4, 23, 3
    shape = (Q, 2) if shared_queries else (P, Q, 2)
    queries = torch.randn(*shape, generator=torch.Generator().manual_seed(1), dtype=F64)
    errs = cc.sample_errors(
        mu,
        queries,
        U,
        V,
        L,
        P,
        generator=torch.Generator().manual_seed(5),
        jacobians=True,
        chunk_size=chunk_size,
    )
    # The same prompts: chunk k draws P * c tokens, reshaped (P, c, D).
    g, c = torch.Generator().manual_seed(5), min(chunk_size, L)
    tokens = torch.cat(
        [
            mu.sample(P * n, generator=g).reshape(P, n, 2)
            for n in [min(c, L - s) for s in range(0, L, c)]
        ],
        dim=1,
    )
    q = queries.expand(P, Q, 2)
    p = sl.softmax_weights(tokens, q, U)  # (P, Q, L), the plain softmax
    m = p @ tokens
    centred = tokens.unsqueeze(-3) - m.unsqueeze(-2)  # (P, Q, L, D)
    C_hat = torch.einsum("pql,pqld,pqle->pqde", p, centred, centred)
    m_lim = mu.mean + q @ U.mT @ cov  # Lemma 2.1
    out = sl.softmax_attention(tokens, q, U, V)
    lim = sl.gaussian_attention_limit(q, U, V, mu.mean.expand(P, 2), cov.expand(P, 2, 2))
    kw = dict(rtol=1e-9, atol=1e-12)  # online sums in another order: rounding only
    torch.testing.assert_close(errs.output, ((out - lim) ** 2).sum(-1), **kw)
    torch.testing.assert_close(errs.grad_V, 2 * ((m - m_lim) ** 2).sum(-1), **kw)
    torch.testing.assert_close(
        errs.grad_U, ((V @ (C_hat - cov)) ** 2).sum((-1, -2)) * (q**2).sum(-1), **kw
    )
    torch.testing.assert_close(errs.ess, 1 / (p**2).sum(-1), **kw)


def test_sample_errors_non_gaussian_limit_and_reproducibility():
    # Rademacher tokens: the limit is tanh(a) coordinatewise (autograd of the log-MGF).
    mu = sl.RademacherMeasure(2)
    q = torch.randn(3, 2, generator=torch.Generator().manual_seed(0), dtype=F64)
    U, V = 0.7 * torch.eye(2, dtype=F64), torch.eye(2, dtype=F64)
    a = cc.sample_errors(
        mu, q, U, V, 40, 6, generator=torch.Generator().manual_seed(2), jacobians=True
    )
    b = cc.sample_errors(
        mu, q, U, V, 40, 6, generator=torch.Generator().manual_seed(2), jacobians=True
    )
    assert a.output.shape == a.grad_U.shape == a.ess.shape == (6, 3)
    assert torch.equal(a.output, b.output) and torch.equal(a.grad_U, b.grad_U)
    tokens = mu.sample(6 * 40, generator=torch.Generator().manual_seed(2)).reshape(6, 40, 2)
    direct = sl.softmax_attention(tokens, q.expand(6, 3, 2), U, V) - torch.tanh(q @ U.T)
    torch.testing.assert_close(a.output, (direct**2).sum(-1), rtol=1e-9, atol=1e-12)
    assert cc.sample_errors(mu, q, U, V, 40, 6, generator=torch.Generator()).grad_U is None


# --- The generic delta method against the closed forms ------------------------------------------------
@pytest.mark.parametrize("D", [1, 2, 3])
def test_delta_method_output_equals_the_lemma(D, gen):
    B_ = torch.randn(D, D, generator=gen, dtype=F64)
    cov = B_ @ B_.T / D + 0.2 * torch.eye(D, dtype=F64)
    U = 0.4 * torch.randn(D, D, generator=gen, dtype=F64)
    V = torch.randn(2, D, generator=gen, dtype=F64)
    q = torch.randn(6, D, generator=gen, dtype=F64)
    A, B = cc.fixed_query_mse_expansion(q, U, V, cov)  # derived by hand (chapter 3's lemma)
    A2, B2 = cc.delta_method_expansion(q, U, V, cov, "output")  # derivatives by torch.func
    torch.testing.assert_close(A2, A, rtol=1e-10, atol=0)
    torch.testing.assert_close(B2, B, rtol=1e-9, atol=1e-9 * float(B.abs().max()))
    # the V-Jacobian error is D_out |m_hat - m|^2: the output error with V = I, times D_out
    AV, BV = cc.delta_method_expansion(q, U, V, cov, "grad_V")
    Ai, Bi = cc.fixed_query_mse_expansion(q, U, torch.eye(D, dtype=F64), cov)
    torch.testing.assert_close(AV, 2 * Ai, rtol=1e-10, atol=0)
    torch.testing.assert_close(BV, 2 * Bi, rtol=1e-9, atol=1e-9 * float(Bi.abs().max()))


def test_delta_method_grad_U_constant_closed_form(gen):
    # C_U = |z|^2 e^s [(tr G + |c|^2)(tr(W G) + c^T W c) + tr(G W G) + 2 c^T G W c], c = G a, W = V^T V:
    # the variance of the weighted covariance, a fourth moment of the tilted Gaussian, by hand.
    _, cov, U, V = _problem2d()
    q = 2 * torch.randn(5, 2, generator=gen, dtype=F64)
    a = q @ U.T
    s, c, W = ((a @ cov) * a).sum(-1), a @ cov, V.T @ V
    quad = (
        (torch.trace(cov) + (c * c).sum(-1)) * (torch.trace(W @ cov) + ((c @ W) * c).sum(-1))
        + torch.trace(cov @ W @ cov)
        + 2 * ((c @ cov @ W) * c).sum(-1)
    )
    A, B = cc.delta_method_expansion(q, U, V, cov, "grad_U")
    torch.testing.assert_close(A, (q**2).sum(-1) * torch.exp(s) * quad, rtol=1e-10, atol=0)
    assert bool((B < 0).all())  # approached from below, like the output


@pytest.mark.parametrize("kind", cc.ERROR_KINDS)
def test_first_correction_matches_monte_carlo(kind):
    # s = 0.1, L = 32: the correction B/L is 1-7% of A, many standard errors of 40 000 prompts; allow 4
    # standard errors plus (B/L)^2 / A for the next term of the expansion.
    mu, cov, U, V = _problem2d()
    q = _query_with_tilt(U, cov, 0.1, (1.0, -0.5))
    A, B = (float(x) for x in cc.delta_method_expansion(q, U, V, cov, kind))
    L = 32
    errs = cc.sample_errors(
        mu, q, U, V, L, 40_000, generator=torch.Generator().manual_seed(4), jacobians=True
    )
    est = mean_and_stderr(getattr(errs, kind)[:, 0])
    assert abs(L * est.mean - A - B / L) <= 4 * L * est.stderr + (B / L) ** 2 / A
    if kind == "grad_U":  # without the correction the check fails: B/L is needed
        assert abs(L * est.mean - A) > 4 * L * est.stderr


# --- Query averages -------------------------------------------------------------------------------
def test_query_averaged_scalar_closed_forms():
    def term(u, k, j):  # E_z e^{k s} (t + j b), t = 1, b = u^2 z^2
        return (1 - 2 * k * u**2) ** -0.5 * (1 + j * u**2 / (1 - 2 * k * u**2))

    for u in (0.1, 0.3, 0.4):
        C, B_bar = cc.query_averaged_expansion(_one(u), _one(), _one())
        r = 1 - 2 * u**2
        assert C == pytest.approx(r**-0.5 + u**2 * r**-1.5, rel=1e-12)
        B_ref = -2 * term(u, 3, 4) + 3 * term(u, 2, 3) - term(u, 1, 1)
        assert B_bar == pytest.approx(B_ref, rel=1e-10)
    assert math.isnan(cc.query_averaged_expansion(_one(0.5), _one(), _one())[1])  # 6 u^2 >= 1
    for u in (1 / math.sqrt(2), 1.0, 1.5):  # E_z exp(u^2 z^2) diverges from u^2 = 1/2 on
        C, B_bar = cc.query_averaged_expansion(_one(u), _one(), _one(), "grad_U")
        assert math.isinf(C) and math.isnan(B_bar)


@pytest.mark.parametrize("kind", cc.ERROR_KINDS)
def test_query_averages_equal_quadrature_of_the_fixed_query_expansion(kind):
    # D = 2 and U small enough that 6 lambda_max(U^T cov U) < 1: a 60 x 60 Gauss-Hermite rule of the
    # fixed-query A(z), B(z) converges to the exact averages (its error here is ~1e-9 relative).
    _, cov, U, V = _problem2d()
    U = 0.5 * U
    qc = torch.tensor([[0.5, 0.1], [0.1, 0.3]], dtype=F64)
    for query_cov in (None, qc):
        nodes, w = sl.gauss_hermite_rule(
            torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64) if query_cov is None else qc, 60
        )
        A, B = cc.delta_method_expansion(nodes, U, V, cov, kind)
        C, B_bar = cc.query_averaged_expansion(U, V, cov, kind, query_cov)
        assert C == pytest.approx(float(w @ A), rel=1e-8)
        assert B_bar == pytest.approx(float(w @ B), rel=1e-7)


def test_query_average_with_singular_query_covariance():
    # queries on a line z = t e: the average is one-dimensional
    _, cov, U, V = _problem2d()
    e = torch.tensor([0.6, 0.8], dtype=F64)
    nodes, w = sl.gauss_hermite_rule(torch.zeros(1, dtype=F64), _one(), 60)
    A, _ = cc.delta_method_expansion(nodes * e, U, V, cov, "grad_U")
    C, _ = cc.query_averaged_expansion(U, V, cov, "grad_U", torch.outer(e, e))
    assert C == pytest.approx(float(w @ A), rel=1e-8)


# --- Closed forms against Monte Carlo -----------------------------------------------------------------
def test_zero_tilt_error_is_the_sample_mean_variance():
    # U = 0: uniform weights, T[mu_hat_L] is the sample mean of V z_i: error tr(V cov V^T) / L exactly.
    mu, cov, _, V = _problem2d()
    U0 = torch.zeros(2, 2, dtype=F64)
    q = torch.tensor([[1.0, -2.0]], dtype=F64)
    A, B = cc.fixed_query_mse_expansion(q, U0, V, cov)
    t = float(torch.trace(V @ cov @ V.T))
    assert float(A) == pytest.approx(t, rel=1e-14) and float(B) == pytest.approx(0.0, abs=1e-12)
    errs = cc.sample_errors(mu, q, U0, V, 32, 4000, generator=torch.Generator().manual_seed(0))
    est = mean_and_stderr(errs.output[:, 0])
    assert (
        abs(32 * est.mean - t) <= 4 * 32 * est.stderr
    )  # exact expectation: Monte Carlo error only
    torch.testing.assert_close(errs.ess, torch.full_like(errs.ess, 32.0), rtol=1e-13, atol=0)


def test_L_equal_one_witness_error_is_one():
    # d = 1, U = 0, V = 1, standard Gaussian tokens: T[mu_hat_1] = z_1 and T[mu] = 0, so each error is z_1^2.
    errs = cc.sample_errors(
        _scalar_gaussian(),
        torch.zeros(1, 1, dtype=F64),
        _one(0.0),
        _one(),
        1,
        20000,
        generator=torch.Generator().manual_seed(0),
    )
    est = mean_and_stderr(errs.output[:, 0])
    assert abs(est.mean - 1.0) <= 4 * est.stderr  # E z^2 = 1; standard error sqrt(2 / n)


@pytest.mark.parametrize("s", [0.25, 1.0])
def test_fixed_query_constant_matches_monte_carlo(s):
    mu, cov, U, V = _problem2d()
    q = _query_with_tilt(U, cov, s)
    A, B = (float(x) for x in cc.fixed_query_mse_expansion(q, U, V, cov))
    L = 2048
    est = mean_and_stderr(
        cc.sample_errors(mu, q, U, V, L, 3000, generator=torch.Generator().manual_seed(1)).output[
            :, 0
        ]
    )
    # 4 standard errors, plus the first finite-L correction |B| / L of the delta-method expansion.
    assert abs(L * est.mean - A) <= 4 * L * est.stderr + abs(B) / L


def test_error_approaches_its_constant_from_below():
    # s = 1, L = 64: the O(1/L^2) coefficient B is negative, and L * error is visibly below A.
    q = torch.ones(1, 1, dtype=F64)
    A, B = cc.fixed_query_mse_expansion(q, _one(), _one(), _one())
    assert float(B) < 0
    errs = cc.sample_errors(
        _scalar_gaussian(), q, _one(), _one(), 64, 20000, generator=torch.Generator().manual_seed(2)
    )
    est = mean_and_stderr(errs.output[:, 0])
    assert 64 * est.mean + 4 * 64 * est.stderr < float(A)


@pytest.mark.parametrize("s", [0.5, 1.5])
def test_ess_ratio_tends_to_exp_minus_s(s):
    q = torch.full((1, 1), math.sqrt(s), dtype=F64)
    limit, beta = cc.ess_ratio_expansion(q, _one(), _one())
    assert float(limit) == pytest.approx(math.exp(-s), rel=1e-14)
    L = 4096
    errs = cc.sample_errors(
        _scalar_gaussian(), q, _one(), _one(), L, 400, generator=torch.Generator().manual_seed(3)
    )
    est = mean_and_stderr(errs.ess[:, 0])
    assert abs(est.mean / L - float(limit)) <= 4 * est.stderr / L + abs(float(beta)) / L


def test_query_averaged_constants_match_monte_carlo():
    # D = 2, 0.6 U, random queries: L * error -> C for the three kinds; 4 standard errors + |B_bar| / L.
    mu, cov, U, V = _problem2d()
    U = 0.6 * U
    nu = sl.GaussianMeasure(torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64))
    g = torch.Generator().manual_seed(7)
    L, P = 1024, 2000
    errs = cc.sample_errors(
        mu, nu.sample(P * 8, generator=g).reshape(P, 8, 2), U, V, L, P, generator=g, jacobians=True
    )
    for kind in cc.ERROR_KINDS:
        C, B_bar = cc.query_averaged_expansion(U, V, cov, kind)
        est = mean_and_stderr(getattr(errs, kind).mean(-1))
        assert abs(L * est.mean - C) <= 4 * L * est.stderr + abs(B_bar) / L, kind


def test_fixed_query_check_rejects_wrong_constants():
    # d = 1, Gamma = V = 1, s = 1: A = e (1 + 1). Three plausible wrong formulas must fail the chapter's test.
    q = torch.ones(1, 1, dtype=F64)
    A, B = (float(x) for x in cc.fixed_query_mse_expansion(q, _one(), _one(), _one()))
    L = 4096
    errs = cc.sample_errors(
        _scalar_gaussian(), q, _one(), _one(), L, 2000, generator=torch.Generator().manual_seed(6)
    )
    est = mean_and_stderr(errs.output[:, 0])
    tol = 4 * L * est.stderr + abs(B) / L

    def passes(C):
        return abs(L * est.mean - C) <= tol

    assert passes(A)
    assert not passes(2.0)  # the exponential factor e^{a^T Gamma a} forgotten
    assert not passes(math.e)  # the |V Gamma a|^2 term forgotten
    assert not passes(math.exp(0.5) * 2)  # e^{s/2}: the MGF at a instead of at 2a
    ess = mean_and_stderr(
        cc.sample_errors(
            _scalar_gaussian(),
            q,
            _one(),
            _one(),
            L,
            400,
            generator=torch.Generator().manual_seed(7),
        ).ess[:, 0]
    )
    _, beta = cc.ess_ratio_expansion(q, _one(), _one())
    ess_tol = 4 * ess.stderr / L + float(beta) / L
    assert abs(ess.mean / L - math.exp(-1)) <= ess_tol
    assert abs(ess.mean / L - math.exp(-0.5)) > ess_tol


def test_heuristic_exponent():
    np.testing.assert_allclose(
        cc.heuristic_rate_exponent([0.3, 0.7, 1.0, 1.5]), [-1, -1, -0.5, -1 / 4.5]
    )


def test_query_averaged_rates_is_the_rule_average_of_sample_errors():
    """Specification of ``query_averaged_rates``: for each scale u and length L, fresh prompts (one block
    per u, drawn in that order), each evaluated at the nodes z > 0 of every Gauss-Hermite rule (U = 1 at
    the query u z), averaged with the folded weights 2 w; the fits are ``fit_power_law`` of the mean
    over the prompts of the first rule. Same generator state, so equal to rounding."""
    u_values, L_values, P = [0.4, 1.2], [4, 8, 16], 5
    errors, fits = cc.query_averaged_rates(
        u_values, L_values, P, nodes=(6, 4), generator=torch.Generator().manual_seed(3)
    )
    assert errors.shape == (2, 3, P, 2) and errors.dtype == F64 and len(fits) == 2
    gen = torch.Generator().manual_seed(3)
    rules = []
    for n in (6, 4):
        z, w = sl.gauss_hermite_rule(torch.zeros(1, dtype=F64), _one(), n)
        rules.append((z[z[:, 0] > 0], 2 * w[z[:, 0] > 0]))
    zs = torch.cat([z for z, _ in rules])  # (5, 1)
    queries = torch.cat([(u * zs).expand(P, -1, -1) for u in u_values])  # (2 P, 5, 1)
    for j, L in enumerate(L_values):
        err = cc.sample_errors(_scalar_gaussian(), queries, _one(), _one(), L, 2 * P, generator=gen)
        out = err.output.reshape(2, P, 5)
        torch.testing.assert_close(errors[0, j], (out[..., :3] @ rules[0][1]).T)
        torch.testing.assert_close(errors[1, j], (out[..., 3:] @ rules[1][1]).T)
    est = mean_and_stderr(errors[0], dim=1)
    for i, f in enumerate(fits):
        ref = sl.montecarlo.fit_power_law(L_values, est.mean[:, i], est.stderr[:, i])
        assert f == pytest.approx(ref)


def test_query_averaged_rates_at_u_zero_is_one_over_L_for_every_rule():
    """At u = 0 the weights are uniform and the error is the squared mean of the tokens, whatever the
    query: its mean is exactly 1/L, and both rules (weights summing to one) give the same per-prompt
    errors, since they share the prompts. 2000 prompts: L * error within 4 SE of 1, slope within 4 SE
    of -1."""
    errors, (fit,) = cc.query_averaged_rates(
        [0.0], [8, 32, 128], 2000, nodes=(8, 4), generator=torch.Generator().manual_seed(0)
    )
    torch.testing.assert_close(errors[0], errors[1])
    est = mean_and_stderr(errors[0, :, :, 0], dim=1)
    L = torch.tensor([8.0, 32.0, 128.0], dtype=F64)
    assert torch.all((L * est.mean - 1).abs() <= 4 * L * est.stderr)
    assert abs(fit.slope + 1) <= 4 * fit.slope_stderr


def test_query_averaged_rates_draws_fresh_prompts_for_every_scale():
    errors, _ = cc.query_averaged_rates(
        [0.5, 0.5], [4, 8, 16], 3, generator=torch.Generator().manual_seed(0)
    )
    assert not torch.allclose(errors[0, :, :, 0], errors[0, :, :, 1])


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"nodes": (5,)}, ValueError, "nodes\\[0\\] must be even"),
        ({"nodes": ()}, ValueError, "nodes must hold"),
        ({"L_values": [4, 8]}, ValueError, "at least 3 prompt lengths"),
        ({"L_values": [4, 0, 8]}, ValueError, "L_values\\[1\\]"),
        ({"n_prompts": 1}, ValueError, "n_prompts must be an integer >= 2"),
        ({"generator": None}, TypeError, "generator must be a torch.Generator"),
        ({"u_values": [0.5, float("nan")]}, ValueError, "u_values"),
    ],
)
def test_query_averaged_rates_rejects_bad_arguments(kwargs, error, match):
    args = {
        "u_values": [0.5],
        "L_values": [4, 8, 16],
        "n_prompts": 3,
        "generator": torch.Generator().manual_seed(0),
        **kwargs,
    }
    with pytest.raises(error, match=match):
        cc.query_averaged_rates(
            args.pop("u_values"), args.pop("L_values"), args.pop("n_prompts"), **args
        )
