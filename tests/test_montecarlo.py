"""Monte Carlo tools: the prompt sampler, means with standard errors, paired differences, power-law fits;
and the shared Gauss-Hermite rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
import softlin as sl
import torch
from softlin import montecarlo as mc

pytestmark = pytest.mark.unit  # the library's unit tests: `make check` runs them

F64 = torch.float64


def test_prompt_batches_bound_memory_and_draw_like_one_sample():
    mu = sl.GaussianMeasure(torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64))
    batches = list(
        mc.prompt_batches(mu, 100, 25, generator=torch.Generator().manual_seed(3), max_tokens=1000)
    )
    assert [b.shape for b in batches] == [(10, 100, 2), (10, 100, 2), (5, 100, 2)]
    whole = mu.sample(2500, generator=torch.Generator().manual_seed(3)).reshape(25, 100, 2)
    torch.testing.assert_close(
        torch.cat(batches), whole, rtol=0, atol=0
    )  # the same stream of draws


def test_prompt_batches_errors():
    mu = sl.RademacherMeasure(1)
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        next(mc.prompt_batches(mu, 10, 2, generator=None))
    with pytest.raises(TypeError, match="measure must be a softlin TokenMeasure"):
        next(mc.prompt_batches("normal", 10, 2, generator=torch.Generator()))
    with pytest.raises(ValueError, match="L must be a positive integer"):
        next(mc.prompt_batches(mu, 0, 2, generator=torch.Generator()))


def test_mean_and_stderr_match_numpy_and_keep_shapes():
    x = np.random.default_rng(0).normal(size=(50, 3))
    est = mc.mean_and_stderr(x)
    np.testing.assert_allclose(est.mean.numpy(), x.mean(0), rtol=1e-14)
    np.testing.assert_allclose(est.stderr.numpy(), x.std(0, ddof=1) / math.sqrt(50), rtol=1e-12)
    one = mc.mean_and_stderr(torch.tensor(x[:, 0]))
    assert isinstance(one.mean, float) and one.n == 50
    with pytest.raises(ValueError, match="at least two samples"):
        mc.mean_and_stderr([1.0])


def test_paired_difference_removes_the_shared_variation():
    g = torch.Generator().manual_seed(1)
    shared = torch.randn(400, generator=g, dtype=F64)
    x = shared + 0.01 * torch.randn(400, generator=g, dtype=F64)
    y = shared + 0.01 * torch.randn(400, generator=g, dtype=F64) + 0.003
    d = mc.paired_difference(x, y)
    assert d.stderr < 0.1 * math.hypot(mc.mean_and_stderr(x).stderr, mc.mean_and_stderr(y).stderr)
    assert abs(d.mean + 0.003) < 4 * d.stderr  # the true difference is -0.003
    with pytest.raises(ValueError, match="same shape"):
        mc.paired_difference(x, y[:10])


def test_power_law_fit_recovers_an_exact_power_law():
    L = np.array([10, 100, 1000, 10_000])
    fit = mc.fit_power_law(L, 3.0 * L**-0.5, 1e-3 * L**-0.5)
    assert abs(fit.slope + 0.5) < 1e-12 and abs(fit.prefactor - 3.0) < 1e-10
    assert fit.chi2_dof < 1e-20
    np.testing.assert_allclose(fit.predict(L), 3.0 * L**-0.5, rtol=1e-12)


@pytest.mark.parametrize("understated", [1.0, 3.0])
def test_power_law_slope_interval_covers_the_truth(understated):
    # 400 simulated fits with log-normal noise of sd 0.05 * understated, reported as sd 0.05. With honest
    # errors the 2-sigma interval covers the true slope about 95% of the time; when the errors are
    # understated threefold, the chi-square inflation restores the coverage (without it: about 50%).
    # Binomial sd of a 95% coverage over 400 fits: 1.1%; accept [90%, 99%].
    rng = np.random.default_rng(7)
    L = np.geomspace(16, 4096, 9)
    covered = 0
    for _ in range(400):
        v = 2.0 * L**-0.8 * np.exp(rng.normal(0.0, 0.05 * understated, L.size))
        fit = mc.fit_power_law(L, v, 0.05 * v)
        covered += abs(fit.slope + 0.8) < 2 * fit.slope_stderr
    assert 0.90 <= covered / 400 <= 0.99


def test_power_law_fit_errors():
    with pytest.raises(ValueError, match="length >= 3"):
        mc.fit_power_law([1, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        mc.fit_power_law([1, 2, 3], [1.0, -2.0, 3.0])
    with pytest.raises(ValueError, match="stderr must be positive"):
        mc.fit_power_law([1, 2, 3], [1.0, 2.0, 3.0], [0.1, 0.0, 0.1])


def test_gauss_hermite_rule_integrates_polynomials_exactly_on_a_singular_range():
    # Rank-1 covariance in D = 2: the rule lives on the range; E[X X^T] and E[(a^T X)^4] are exact
    # for n_nodes >= 3 (degree 2n - 1 >= 4), to float64 rounding.
    mean = torch.tensor([0.5, -1.0], dtype=F64)
    v = torch.tensor([1.0, 2.0], dtype=F64)
    cov = torch.outer(v, v)
    nodes, w = sl.gauss_hermite_rule(mean, cov, 3)
    assert nodes.shape == (3, 2)
    torch.testing.assert_close(w.sum(), torch.tensor(1.0, dtype=F64), rtol=1e-14, atol=0)
    second = torch.einsum("k,ki,kj->ij", w, nodes, nodes)
    torch.testing.assert_close(second, cov + torch.outer(mean, mean), rtol=1e-13, atol=1e-13)
    a = torch.tensor([0.3, -0.2], dtype=F64)
    s = float(a @ cov @ a)  # (a^T X) ~ N(a^T m, s): fourth central moment 3 s^2
    torch.testing.assert_close(
        w @ ((nodes - mean) @ a) ** 4, torch.tensor(3 * s * s, dtype=F64), rtol=1e-12, atol=1e-14
    )
    with pytest.raises(ValueError, match="exceeds"):
        sl.gauss_hermite_rule(torch.zeros(3, dtype=F64), torch.eye(3, dtype=F64), 200)


def test_linear_limit_differs_from_softmax_limit_by_the_mean_term():
    # Paper-notes claim 4: for N(m, Gamma), V(Gamma + m m^T)Uz - V(m + Gamma U z) = -V(m - m m^T U z).
    g = torch.Generator().manual_seed(2)
    m = torch.randn(3, generator=g, dtype=F64)
    B = torch.randn(3, 3, generator=g, dtype=F64)
    mu = sl.GaussianMeasure(m, B @ B.T)
    z, U, V = (torch.randn(*s, generator=g, dtype=F64) for s in ((4, 3), (3, 3), (2, 3)))
    diff = sl.linear_attention_limit(mu, z, U, V) - sl.attention_limit(mu, z, U, V)
    expected = -(m - (z @ U.mT @ m)[:, None] * m) @ V.mT
    torch.testing.assert_close(diff, expected, rtol=1e-12, atol=1e-12)
    # the generic route (autograd of the log-MGF of an empirical measure) agrees with its closed form
    atoms = torch.randn(7, 3, generator=g, dtype=F64)
    emp = sl.EmpiricalMeasure(atoms)
    torch.testing.assert_close(
        sl.linear_attention_limit(emp, z, U, V),
        sl.linear_attention(atoms.expand(4, 7, 3), z[:, None], U, V)[:, 0],
        rtol=1e-12,
        atol=1e-12,
    )


def test_submodules_load_lazily_after_import_softlin():
    import softlin

    assert softlin.icl.kms_covariance(2, 0.5).shape == (2, 2)
    assert "montecarlo" in dir(softlin)
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        softlin.nonsense  # noqa: B018


# --- checks that say what failed ------------------------------------------------------------------
def test_checks_print_a_verdict_and_fail_with_their_numbers(capsys):
    mc.check_close(-0.498, -0.5, se=0.006, n_se=4, what="slope")
    assert capsys.readouterr().out.strip() == (
        "slope -0.498 ± 0.006 is 0.333 SE from -0.5: within the 4 SE allowed"
    )
    mc.check_below(np.array([0.5, 0.9]), 1.0, se=np.array([0.01, 0.02]), n_se=4, what="ratio")
    assert (
        "ratio 0.9 ± 0.02 is 5 SE below 1; the check needs 4 SE: holds (worst of 2)"
        in capsys.readouterr().out
    )
    mc.check_above(torch.tensor(3.0), 1.0, what="gap")
    assert capsys.readouterr().out.strip() == "gap 3, above 1"
    # a deliberately broken check: the error holds the numbers and the claim, nothing is printed
    with pytest.raises(
        AssertionError, match=r"slope -0\.45 ± 0\.006 is 8\.33 SE from -0\.5: NOT within the 4 SE"
    ):
        mc.check_close(-0.45, -0.5, se=0.006, n_se=4, what="slope")
    with pytest.raises(
        AssertionError,
        match=r"ratio 0\.074 ± 0\.019 is 3\.89 SE above 0: NOT above it by the required 4 SE",
    ):
        mc.check_above(0.074, 0.0, se=0.019, n_se=4, what="ratio")
    with pytest.raises(AssertionError, match=r"error 0\.2, NOT below 0\.1"):
        mc.check_below(0.2, 0.1, what="error")
    assert capsys.readouterr().out == ""


def test_checks_keep_the_strength_of_the_assert_they_replace():
    # check_close(v, r, se=se, n_se=z, slack=s) passes exactly when |v - r| <= z se + s
    mc.check_close(1.0 + 4 * 0.1, 1.0, se=0.1, n_se=4.0001)
    with pytest.raises(AssertionError):
        mc.check_close(1.0 + 4 * 0.1 + 1e-9, 1.0, se=0.1, n_se=4)
    mc.check_close(1.05, 1.0, se=0.0, slack=0.06)
    # check_below(v, b, se=se, n_se=z) passes exactly when v + z se < b; check_above when
    # v - z se > b; slack moves the bound by that much
    with pytest.raises(AssertionError):
        mc.check_below(0.6, 1.0, se=0.1, n_se=4)
    mc.check_above(0.41, 0.0, se=0.1, n_se=4)
    with pytest.raises(AssertionError):
        mc.check_above(np.array([1.0, 0.39]), 0.0, se=0.1, n_se=4)


def test_the_checks_share_one_signature_and_slack_moves_the_bound(capsys):
    import inspect

    signatures = {
        name: list(inspect.signature(getattr(mc, name)).parameters)[2:]
        for name in ("check_close", "check_below", "check_above")
    }
    assert all(v == ["se", "n_se", "slack", "what"] for v in signatures.values()), signatures
    mc.check_below(1.05, 1.0, slack=0.06, what="ratio")
    with pytest.raises(AssertionError):
        mc.check_below(1.07, 1.0, slack=0.06)
    mc.check_above(0.95, 1.0, slack=0.06)
    with pytest.raises(AssertionError):
        mc.check_above(0.93, 1.0, slack=0.06)


def test_check_true_states_a_claim_and_fails_with_its_detail(capsys):
    mc.check_true({1, 3} == {3, 1}, what="starts in the reduced basin", detail="[1, 3]")
    assert capsys.readouterr().out.strip() == "starts in the reduced basin holds: [1, 3]"
    with pytest.raises(AssertionError, match=r"check failed: exact zeros does NOT hold: 2 entries"):
        mc.check_true(torch.tensor([0.0, 1.0, 2.0]) == 0, what="exact zeros", detail="2 entries")


def test_start_trend_finds_the_slope_and_flags_a_curved_range():
    """Starts with different levels, one slope and independent noise: the mean slope is within 4 of its
    standard errors of the truth in every repetition (false alarm 6e-5 each over 50), and chi2/dof
    averages about 1; a curve (a quadratic in x) gives a chi2/dof far above 1."""
    rng = np.random.default_rng(3)
    x = np.log10([10, 20, 50, 100, 200, 500, 1000])
    chis, misses = [], 0
    for _ in range(50):
        levels = rng.normal(0, 1.0, 8)
        values = levels + (-0.7) * x[:, None] + rng.normal(0, 0.05, (7, 8))
        fit = mc.start_trend(x, values)
        misses += abs(fit.slope + 0.7) > 4 * fit.slope_stderr
        chis.append(fit.chi2_dof)
    assert misses == 0 and 0.6 < np.mean(chis) < 1.6, (misses, np.mean(chis))
    curved = -0.4 * x[:, None] - 0.3 * (x[:, None] - 2) ** 2 + rng.normal(0, 0.02, (7, 8))
    assert mc.start_trend(x, curved).chi2_dof > 20
    with pytest.raises(ValueError, match="values"):
        mc.start_trend(x, np.ones(7))


def test_fit_limit_recovers_the_limit_of_c_plus_d_over_l():
    rng = np.random.default_rng(5)
    L = np.array([200, 300, 500, 700, 1000.0])
    se = np.full(5, 0.3)
    misses = 0
    for _ in range(50):
        y = 20.3 - 600 / L + rng.normal(0, 0.3, 5)
        fit = mc.fit_limit(L, y, se)
        misses += abs(fit.limit - 20.3) > 4 * fit.limit_stderr
    assert misses == 0
    exact = mc.fit_limit(L, 20.3 - 600 / L, se)
    assert abs(exact.limit - 20.3) < 1e-9 and abs(exact.slope + 600) < 1e-6
    with pytest.raises(ValueError, match="stderr"):
        mc.fit_limit(L, L, np.zeros(5))


def test_slack_may_be_given_per_entry():
    mc.check_close(np.array([1.0, 2.0]), np.array([1.05, 2.0]), slack=np.array([0.06, 0.0]))
    with pytest.raises(AssertionError):
        mc.check_close(np.array([1.0, 2.0]), np.array([1.05, 2.1]), slack=np.array([0.06, 0.01]))
    with pytest.raises(ValueError, match="slack must be non-negative"):
        mc.check_below(1.0, 2.0, slack=np.array([-1.0]))
