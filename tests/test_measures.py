"""Token measures, log-MGFs, tilting, and the infinite-prompt limits (Lemma 2.1 and V grad Lambda)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import softlin as sl
import torch

pytestmark = pytest.mark.unit  # the library's unit tests: `make check` runs them

F64 = torch.float64


def _gaussian(gen, D=3, singular=False, mean_scale=0.5):
    B = torch.randn(D, D - 1 if singular else D, generator=gen, dtype=F64) / math.sqrt(D)
    return sl.GaussianMeasure(mean_scale * torch.randn(D, generator=gen, dtype=F64), B @ B.mT)


@pytest.mark.parametrize("singular", [False, True])
def test_autograd_limit_equals_lemma_2_1(gen, singular):
    mu = _gaussian(gen, singular=singular)
    q = torch.randn(2, 5, 3, generator=gen, dtype=F64)
    U, V = torch.randn(3, 3, generator=gen, dtype=F64), torch.randn(2, 3, generator=gen, dtype=F64)
    closed = sl.gaussian_attention_limit(q, U, V, mu.mean.expand(2, 3), mu.cov.expand(2, 3, 3))
    torch.testing.assert_close(sl.attention_limit(mu, q, U, V), closed, rtol=1e-12, atol=1e-12)


def test_gaussian_log_mgf_against_monte_carlo(gen):
    mu = _gaussian(gen)
    a = torch.tensor([0.3, -0.2, 0.1], dtype=F64)
    x = mu.sample(400_000, generator=gen)
    mc = torch.log(torch.exp(x @ a).mean())
    # MC standard error of the mean of exp(a.x) is ~ sqrt(var/n); relative error here ~2e-3; allow 5 s.e.
    assert abs(float(mc - mu.log_mgf(a))) < 5 * float(
        torch.exp(x @ a).std() / torch.exp(x @ a).mean()
    ) / math.sqrt(4e5)


def test_gaussian_sampling_moments_singular(gen):
    mu = _gaussian(gen, D=4, singular=True)
    x = mu.sample(200_000, generator=gen)
    torch.testing.assert_close(x.mean(0), mu.mean, atol=0.01, rtol=0)  # s.e. ~ 1/sqrt(2e5) ~ 2e-3
    torch.testing.assert_close(torch.cov(x.T), mu.cov, atol=0.01, rtol=0)
    # Samples lie in the range of the covariance: the component along its null vector is constant.
    null = torch.linalg.eigh(mu.cov).eigenvectors[:, 0]
    assert float(((x - mu.mean) @ null).abs().max()) < 1e-10


def test_gaussian_closed_form_tilt_matches_autograd_of_the_log_mgf(gen):
    # the closed forms m + C a and C (Lemma 2.1's completed square) against the generic path of the
    # base class: autograd of log_mgf (gradient and Hessian), which does not use them
    mu = _gaussian(gen)
    a = torch.tensor([[0.4, 0.1, -0.3], [-1.0, 0.5, 0.2]], dtype=F64)
    torch.testing.assert_close(mu.tilted_mean(a), sl.TokenMeasure.tilted_mean(mu, a))
    torch.testing.assert_close(mu.tilted_covariance(a), sl.TokenMeasure.tilted_covariance(mu, a))
    torch.testing.assert_close(mu.tilted_mean(a[0]), mu.mean + mu.cov @ a[0])


def test_empirical_limit_is_softmax_attention(gen):
    atoms = torch.randn(50, 3, generator=gen, dtype=F64)
    w = torch.rand(50, generator=gen, dtype=F64)
    q = torch.randn(4, 3, generator=gen, dtype=F64)
    U, V = torch.randn(3, 3, generator=gen, dtype=F64), torch.randn(2, 3, generator=gen, dtype=F64)
    for weights in (None, w):
        torch.testing.assert_close(
            sl.attention_limit(sl.EmpiricalMeasure(atoms, weights), q, U, V),
            sl.softmax_attention(atoms, q, U, V, weights=weights),
            rtol=1e-12,
            atol=1e-12,
        )


def test_empirical_sampling_follows_weights(gen):
    atoms = torch.tensor([[0.0], [1.0], [2.0]], dtype=F64)
    m = sl.EmpiricalMeasure(atoms, torch.tensor([1.0, 0.0, 3.0], dtype=F64))
    x = m.sample(40_000, generator=gen)
    assert not (x == 1.0).any()
    assert abs(float((x == 2.0).double().mean()) - 0.75) < 0.01  # s.e. ~ 2e-3


def test_rademacher_limit_is_tanh():
    mu = sl.RademacherMeasure(1)
    one = torch.eye(1, dtype=F64)
    z = torch.linspace(-30, 30, 61, dtype=F64)[:, None]
    torch.testing.assert_close(
        sl.attention_limit(mu, z, one, one), torch.tanh(z), rtol=1e-14, atol=1e-14
    )
    assert (
        abs(float(sl.attention_limit(mu, torch.tensor([[2.0]], dtype=F64), one, one)) - 0.9640)
        < 1e-4
    )


def test_rademacher_and_uniform_log_mgf_closed_forms():
    a = torch.tensor([[1e-6, 0.02], [0.049, 0.051], [0.7, 3.0], [25.0, -40.0]], dtype=F64)
    r = sl.RademacherMeasure(2).log_mgf(a)
    torch.testing.assert_close(r, torch.log(torch.cosh(a)).sum(-1), rtol=1e-13, atol=1e-15)
    h = math.sqrt(3.0)
    ha = (h * a).numpy()
    exact = np.log(np.sinh(ha) / ha).sum(-1)
    torch.testing.assert_close(
        sl.UniformMeasure(2).log_mgf(a), torch.from_numpy(exact), rtol=1e-10, atol=1e-14
    )


@pytest.mark.parametrize("measure", [sl.RademacherMeasure(2), sl.UniformMeasure(2)])
def test_unit_variance_measures_have_unit_tilted_covariance_at_zero(measure):
    torch.testing.assert_close(
        measure.tilted_covariance(torch.zeros(2, dtype=F64)), torch.eye(2, dtype=F64)
    )


@pytest.mark.parametrize("measure", [sl.RademacherMeasure(2), sl.UniformMeasure(2)])
def test_tilted_mean_against_reweighted_samples(gen, measure):
    a = torch.tensor([0.8, -0.4], dtype=F64)
    x = measure.sample(400_000, generator=gen)
    w = torch.softmax(x @ a, 0)
    # Self-normalised importance sampling; s.e. ~ 2e-3 here; allow 0.01.
    torch.testing.assert_close((w[:, None] * x).sum(0), measure.tilted_mean(a), atol=0.01, rtol=0)


def test_mixture_log_mgf_and_sampling(gen):
    means = torch.tensor([[-1.0, 0.0], [1.0, 0.5]], dtype=F64)
    covs = torch.stack([0.3 * torch.eye(2, dtype=F64), 0.5 * torch.eye(2, dtype=F64)])
    probs = torch.tensor([0.4, 0.6], dtype=F64)
    mix = sl.GaussianMixtureMeasure(means, covs, probs)
    a = torch.tensor([0.5, -0.2], dtype=F64)
    expected = torch.log(
        sum(p * torch.exp(m @ a + 0.5 * a @ c @ a) for p, m, c in zip(probs, means, covs))
    )
    torch.testing.assert_close(mix.log_mgf(a), expected)
    x = mix.sample(200_000, generator=gen)
    torch.testing.assert_close(x.mean(0), probs @ means, atol=0.01, rtol=0)


@pytest.mark.parametrize("measure", [sl.StudentTMeasure(2, 3.0), sl.LogNormalMeasure(2, 1.0)])
def test_heavy_tailed_measures_have_no_limit(gen, measure):
    assert float(measure.log_mgf(torch.zeros(2, dtype=F64))) == 0.0
    assert math.isinf(float(measure.log_mgf(torch.tensor([0.1, 0.0], dtype=F64))))
    with pytest.raises(ValueError, match="no finite moment generating function"):
        sl.attention_limit(
            measure, torch.ones(1, 2, dtype=F64), torch.eye(2, dtype=F64), torch.eye(2, dtype=F64)
        )
    with pytest.raises(ValueError, match="no finite moment generating function"):
        measure.tilted_covariance(torch.zeros(2, dtype=F64))
    x = measure.sample(100_000, generator=gen)
    assert x.shape == (100_000, 2) and torch.isfinite(x).all()
    assert abs(float(x.mean())) < 0.1  # centred


def test_student_t_quantiles(gen):
    from scipy import stats

    x = sl.StudentTMeasure(1, 3.0).sample(100_000, generator=gen)[:, 0].numpy()
    assert stats.kstest(x, stats.t(3.0).cdf).pvalue > 1e-3


def test_sampling_is_reproducible():
    mu = sl.GaussianMeasure(torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64))
    a = mu.sample(5, generator=torch.Generator().manual_seed(5))
    b = mu.sample(5, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


# ---------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "make, exc, needle",
    [
        (lambda: sl.GaussianMeasure([0.0], torch.eye(1)), TypeError, "mean must be a torch.Tensor"),
        (
            lambda: sl.GaussianMeasure(torch.zeros(2, dtype=F64), torch.eye(3, dtype=F64)),
            ValueError,
            "cov must have shape (D, D) = (2, 2)",
        ),
        (
            lambda: sl.GaussianMeasure(torch.zeros(1, 2, dtype=F64), torch.eye(2, dtype=F64)),
            ValueError,
            "mean must be a vector",
        ),
        (
            lambda: sl.GaussianMeasure(
                torch.zeros(2, dtype=F64), torch.tensor([[1.0, 0.5], [0.0, 1.0]], dtype=F64)
            ),
            ValueError,
            "cov must be symmetric",
        ),
        (
            lambda: sl.GaussianMeasure(
                torch.zeros(2, dtype=F64), torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=F64)
            ),
            ValueError,
            "cov must be positive semi-definite, got smallest eigenvalue -1",
        ),
        (
            lambda: sl.GaussianMeasure(
                torch.tensor([0.0, float("nan")], dtype=F64), torch.eye(2, dtype=F64)
            ),
            ValueError,
            "mean must be finite",
        ),
        (
            lambda: sl.EmpiricalMeasure(torch.zeros(0, 2, dtype=F64)),
            ValueError,
            "at least one token",
        ),
        (
            lambda: sl.EmpiricalMeasure(torch.zeros(3, 2, dtype=F64), torch.zeros(3, dtype=F64)),
            ValueError,
            "all zero",
        ),
        (lambda: sl.RademacherMeasure(0), ValueError, "dim must be a positive integer"),
        (lambda: sl.UniformMeasure(2, half_width=-1.0), ValueError, "half_width must be positive"),
        (
            lambda: sl.UniformMeasure(2, half_width=float("nan")),
            TypeError,
            "half_width must be a finite",
        ),
        (lambda: sl.StudentTMeasure(2, df=0), ValueError, "df must be positive"),
        (lambda: sl.LogNormalMeasure(2, s="1"), TypeError, "s must be a finite real number"),
    ],
)
def test_bad_measure_arguments(make, exc, needle):
    with pytest.raises(exc) as info:
        make()
    assert needle in str(info.value)


def test_gaussian_attention_limit_bad_inputs():
    q, U, V = torch.zeros(4, 3, dtype=F64), torch.eye(3, dtype=F64), torch.eye(3, dtype=F64)
    with pytest.raises(ValueError, match=r"mean must have shape \(3,\)"):
        sl.gaussian_attention_limit(q, U, V, torch.zeros(2, dtype=F64), torch.eye(3, dtype=F64))
    with pytest.raises(ValueError, match="cov must be positive semi-definite"):
        sl.gaussian_attention_limit(q, U, V, torch.zeros(3, dtype=F64), -torch.eye(3, dtype=F64))
    with pytest.raises(ValueError, match="cov must be symmetric"):
        sl.gaussian_attention_limit(
            q, U, V, torch.zeros(3, dtype=F64), torch.triu(torch.ones(3, 3, dtype=F64))
        )
    with pytest.raises(ValueError, match=r"cov must have shape \(3, 3\)"):
        sl.gaussian_attention_limit(q, U, V, torch.zeros(3, dtype=F64), torch.eye(2, dtype=F64))


def test_attention_limit_bad_inputs():
    mu = sl.GaussianMeasure(torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64))
    with pytest.raises(TypeError, match="measure must be a softlin TokenMeasure"):
        sl.attention_limit(
            "gaussian",
            torch.zeros(1, 2, dtype=F64),
            torch.eye(2, dtype=F64),
            torch.eye(2, dtype=F64),
        )
    with pytest.raises(ValueError, match="queries must have last dimension D = 2"):
        sl.attention_limit(
            mu, torch.zeros(1, 3, dtype=F64), torch.eye(2, dtype=F64), torch.eye(2, dtype=F64)
        )
    with pytest.raises(ValueError, match=r"U must have shape \(2, 2\)"):
        sl.attention_limit(
            mu, torch.zeros(1, 2, dtype=F64), torch.eye(3, dtype=F64), torch.eye(2, dtype=F64)
        )
    with pytest.raises(ValueError, match="dtype"):
        sl.attention_limit(mu, torch.zeros(1, 2), torch.eye(2), torch.eye(2))


# ------------------------------------------------------------- the range factor and the Gauss-Hermite rule
# A full-rank law, regression tokens z = (x, w^T x) (rank 2), a shifted rank-2 law, and D = 1.
_J = torch.cat([torch.eye(2, dtype=F64), torch.tensor([[0.8, -0.6]], dtype=F64)])
_GAMMA_B = _J @ torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=F64) @ _J.T
LAWS = {
    "shifted full rank": (
        torch.tensor([0.5, -0.3, 0.2], dtype=F64),
        torch.tensor([[1.0, 0.3, 0.0], [0.3, 0.8, 0.2], [0.0, 0.2, 0.5]], dtype=F64),
    ),
    "regression tokens": (torch.zeros(3, dtype=F64), _GAMMA_B),
    "shifted rank 2": (_J @ torch.tensor([0.3, 0.4], dtype=F64), _GAMMA_B),
    "D=1": (torch.tensor([0.7], dtype=F64), torch.tensor([[1.3]], dtype=F64)),
}


@pytest.mark.parametrize("name", list(LAWS))
def test_range_factor_reproduces_cov_with_rank_columns(name):
    _, cov = LAWS[name]
    B = sl.gaussian_range_factor(cov)
    assert B.shape == (cov.shape[0], int(torch.linalg.matrix_rank(cov)))
    torch.testing.assert_close(
        B @ B.T, cov, rtol=0, atol=1e-14
    )  # eigh reconstruction: rounding only


def test_range_factor_of_zero_cov_has_no_columns_and_rule_is_a_dirac():
    assert sl.gaussian_range_factor(torch.zeros(2, 2, dtype=F64)).shape == (2, 0)
    nodes, weights = sl.gauss_hermite_rule(
        torch.tensor([1.0, 2.0], dtype=F64), torch.zeros(2, 2, dtype=F64), 5
    )
    torch.testing.assert_close(nodes, torch.tensor([[1.0, 2.0]], dtype=F64))
    torch.testing.assert_close(weights, torch.ones(1, dtype=F64))


@pytest.mark.parametrize("name", list(LAWS))
def test_rule_integrates_low_degree_polynomials_exactly(name):
    mean, cov = LAWS[name]
    nodes, weights = sl.gauss_hermite_rule(mean, cov, 4)  # exact up to degree 7 per coordinate
    assert abs(float(weights.sum()) - 1) < 1e-14
    torch.testing.assert_close(weights @ nodes, mean, rtol=0, atol=1e-14)
    xc = nodes - mean
    torch.testing.assert_close(xc.T @ (weights[:, None] * xc), cov, rtol=0, atol=1e-14)
    a = torch.linspace(0.3, -0.4, mean.shape[0], dtype=F64)
    fourth = weights @ (xc @ a) ** 4  # E (a^T (X - m))^4 = 3 (a^T cov a)^2 for a Gaussian
    assert abs(float(fourth) - 3 * float(a @ cov @ a) ** 2) < 1e-13


def test_rule_nodes_of_a_singular_gaussian_stay_on_its_range():
    nodes, _ = sl.gauss_hermite_rule(torch.zeros(3, dtype=F64), _GAMMA_B, 6)
    null = torch.tensor([0.8, -0.6, -1.0], dtype=F64)  # _GAMMA_B @ null = 0
    assert nodes.shape == (36, 3)  # 6^rank nodes, rank 2
    assert float((nodes @ null).abs().max()) < 1e-12


def test_rule_rejects_bad_inputs():
    mean, cov = LAWS["shifted full rank"]
    with pytest.raises(ValueError, match="n_nodes"):
        sl.gauss_hermite_rule(mean, cov, 0)
    with pytest.raises(ValueError, match="exceeds"):
        sl.gauss_hermite_rule(torch.zeros(4, dtype=F64), torch.eye(4, dtype=F64), 60)
    with pytest.raises(ValueError, match="positive semi-definite"):
        sl.gauss_hermite_rule(mean, -cov, 5)
    with pytest.raises(ValueError, match="cov must have shape"):
        sl.gauss_hermite_rule(mean, torch.eye(2, dtype=F64), 5)
    with pytest.raises(TypeError, match="mean"):
        sl.gauss_hermite_rule([0.0, 0.0], torch.eye(2, dtype=F64), 5)


def test_linear_attention_limit_differs_from_softmax_by_the_mean_term(gen):
    """V(Gamma + m m^T) U z for linear attention; V(m + Gamma U z) for softmax: the difference is
    V(m - m m^T U z), and it vanishes for a centred law (paper-notes claim 4)."""
    mean, cov = LAWS["shifted full rank"]
    q = torch.randn(5, 3, generator=gen, dtype=F64)
    U, V = torch.randn(3, 3, generator=gen, dtype=F64), torch.randn(2, 3, generator=gen, dtype=F64)
    for m in (mean, torch.zeros(3, dtype=F64)):
        mu = sl.GaussianMeasure(m, cov)
        diff = sl.attention_limit(mu, q, U, V) - sl.linear_attention_limit(mu, q, U, V)
        torch.testing.assert_close(
            diff, (m - (q @ U.T @ m)[:, None] * m) @ V.T, rtol=1e-12, atol=1e-12
        )
