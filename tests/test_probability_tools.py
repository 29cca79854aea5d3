"""The statements of book/probability_tools.md, checked by computations independent of their proofs.

The page is prose (no code cells), so its claims are checked here: exact identities by quadrature
(numpy's Gauss-Hermite nodes, scipy's ``quad``) or a closed-form law, bounds by Monte Carlo with
standard errors or by an exact probability. Each test reads the constant it checks from the page where
the page states one, so an edit to the page that breaks a claim fails here.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

PAGE = (Path(__file__).resolve().parents[1] / "book" / "probability_tools.md").read_text()
HERMITE = np.polynomial.hermite_e.hermegauss(60)  # nodes, weights for the weight e^{-x^2/2}


def gauss_mean(f, dim: int = 1) -> float:
    """E f(xi) for xi ~ N(0, I_dim), by a tensor Gauss-Hermite rule (exact for polynomials of degree
    below 120 in each coordinate)."""
    x, w = HERMITE
    w = w / w.sum()
    grids = np.meshgrid(*([x] * dim), indexing="ij")
    weights = np.prod(np.meshgrid(*([w] * dim), indexing="ij"), axis=0)
    points = np.stack([g.ravel() for g in grids], axis=1)
    return float(np.sum(weights.ravel() * np.array([f(p) for p in points])))


def test_the_page_states_what_is_checked_here():
    assert "4\\sigma^2\\Big(\\ln L + \\frac D2\\ln 2\\Big)" in PAGE  # the largest token
    assert "4\\sigma^4\\big((\\ln 2L)^2 + 2\\ln 2L + 2\\big)" in PAGE  # its fourth moment
    assert "\\approx 56" in PAGE and "6\\times10^{-5}" in PAGE
    assert (
        "\\exp\\Big(-\\frac{L\\varepsilon^2}{2\\,\\mathbb E\\,\\omega^2}\\Big)" in PAGE
    )  # Bernstein


@pytest.mark.parametrize("c", [-1.0, 0.0, 0.1, 0.25, 0.3])
def test_the_gaussian_exponential_moment(c):
    """E e^{c xi^2} = (1 - 2c)^{-1/2} for c < 1/2; the integrand's Gaussian weight e^{-(1-2c)x^2/2}
    is integrated by quad, not by the formula."""
    value, _ = integrate.quad(
        lambda t: math.exp(-(1 - 2 * c) * t * t / 2) / math.sqrt(2 * math.pi), -np.inf, np.inf
    )
    assert value == pytest.approx((1 - 2 * c) ** -0.5, rel=1e-9), (c, value)


def test_the_exponential_moment_is_infinite_from_one_half_on():
    """At c = 1/2 the integral over [-T, T] grows without bound (like 2T / sqrt(2 pi))."""
    parts = [
        integrate.quad(lambda t: 1 / math.sqrt(2 * math.pi), -T, T)[0] for T in (10, 100, 1000)
    ]
    assert parts[0] < parts[1] < parts[2] and parts[2] > 700, parts


def test_the_gaussian_trick_and_the_chi_square_mgf():
    """The worked proof's two steps: E_xi e^{sqrt(2 eta) xi.x} = e^{eta |x|^2} for a fixed x, and
    E e^{eta sigma^2 |xi|^2} = (1 - 2 eta sigma^2)^{-D/2}, both by quadrature in D = 2."""
    eta, sigma = 0.1, 1.3
    x = np.array([0.7, -1.9])
    left = gauss_mean(lambda p: math.exp(math.sqrt(2 * eta) * p @ x), dim=2)
    assert left == pytest.approx(math.exp(eta * x @ x), rel=1e-9)
    mgf = gauss_mean(lambda p: math.exp(eta * sigma**2 * p @ p), dim=2)
    assert mgf == pytest.approx((1 - 2 * eta * sigma**2) ** -1.0, rel=1e-8)


def test_isserlis_in_both_forms():
    """E (eta.xi)^2 xi xi^T = |eta|^2 I + 2 eta eta^T, and for x = Sigma^{1/2} xi,
    E (a.x)^2 x x^T = (a^T Sigma a) Sigma + 2 Sigma a a^T Sigma: quadrature in three dimensions."""
    eta = np.array([0.5, -1.0, 2.0])
    lhs = np.array(
        [
            [gauss_mean(lambda p, k=k, m=m: (eta @ p) ** 2 * p[k] * p[m], dim=3) for m in range(3)]
            for k in range(3)
        ]
    )
    np.testing.assert_allclose(lhs, (eta @ eta) * np.eye(3) + 2 * np.outer(eta, eta), atol=1e-9)
    B = np.array([[1.0, 0.0, 0.0], [0.5, 0.8, 0.0], [0.2, -0.3, 0.6]])  # Sigma = B B^T
    Sigma, a = B @ B.T, np.array([0.3, 1.1, -0.4])
    lhs = np.array(
        [
            [
                gauss_mean(lambda p, k=k, m=m: (a @ B @ p) ** 2 * (B @ p)[k] * (B @ p)[m], dim=3)
                for m in range(3)
            ]
            for k in range(3)
        ]
    )
    rhs = (a @ Sigma @ a) * Sigma + 2 * np.outer(Sigma @ a, Sigma @ a)
    np.testing.assert_allclose(lhs, rhs, atol=1e-9)


@pytest.mark.parametrize("eta", np.linspace(-6, 6, 49))
def test_tokens_plus_minus_one_are_1_sub_gaussian(eta):
    assert math.cosh(eta) <= math.exp(eta**2 / 2) * (1 + 1e-15), eta


@pytest.mark.parametrize("law", ["gaussian", "rademacher"])
@pytest.mark.parametrize(("D", "sigma"), [(1, 1.0), (3, 1.0), (2, 2.0)])
@pytest.mark.parametrize("L", [2, 10, 100, 1000])
def test_the_largest_of_L_tokens(law, D, sigma, L):
    """E max_i |z_i|^2 <= 4 sigma^2 (ln L + D/2 ln 2), by Monte Carlo: the mean plus 4 standard errors
    stays below the bound (a sigma-sub-Gaussian law: N(0, sigma^2 I), or independent coordinates +-sigma).
    The bound is not tight, so the test checks the mean is also above a quarter of it, where the
    proposition's order sqrt(ln L) for the largest token puts it."""
    rng = np.random.default_rng(0)
    n = 4000
    if law == "gaussian":
        z = sigma * rng.standard_normal((n, L, D))
    else:
        z = sigma * rng.choice([-1.0, 1.0], size=(n, L, D))
    top = (z**2).sum(axis=2).max(axis=1)
    mean, se = top.mean(), top.std(ddof=1) / math.sqrt(n)
    bound = 4 * sigma**2 * (math.log(L) + D / 2 * math.log(2))
    assert mean + 4 * se <= bound, (law, D, sigma, L, mean, se, bound)
    if law == "gaussian":
        assert mean >= bound / 4, (law, D, sigma, L, mean, bound)


@pytest.mark.parametrize("L", [2, 3, 10, 1000, 10**6])
@pytest.mark.parametrize("sigma", [0.5, 1.0])
def test_the_fourth_moment_exercise(L, sigma):
    """The solution's integral, by quad, equals its closed form; and the closed form is at most
    c_0 sigma^4 (ln L)^2 with the solution's c_0."""
    t0 = sigma * math.sqrt(2 * math.log(2 * L))
    below = integrate.quad(lambda t: 4 * t**3, 0, t0)[0]
    above = integrate.quad(
        lambda t: 4 * t**3 * 2 * L * math.exp(-(t**2) / (2 * sigma**2)), t0, np.inf
    )[0]
    ell = math.log(2 * L)
    closed = 4 * sigma**4 * (ell**2 + 2 * ell + 2)
    assert below + above == pytest.approx(closed, rel=1e-8), (L, below, above, closed)
    c0 = 4 * (4 + 4 / math.log(2) + 2 / math.log(2) ** 2)
    assert round(c0) == 56
    assert closed <= c0 * sigma**4 * math.log(L) ** 2, (L, closed)


@pytest.mark.parametrize("L", [1, 5, 20, 100, 1000])
@pytest.mark.parametrize("eps", [0.1, 0.3, 0.5, 0.9])
def test_the_one_sided_bernstein_bound(L, eps):
    """For weights omega ~ Exp(1) (mean 1, E omega^2 = 2), L times the mean is Gamma(L, 1): the exact
    lower tail is below exp(-L eps^2 / (2 E omega^2)). Weights from a lognormal (softmax weights of a
    Gaussian prompt, E omega^2 = e^s) are checked by Monte Carlo."""
    exact = stats.gamma.cdf(L * (1 - eps), a=L)
    assert exact <= math.exp(-L * eps**2 / 4), (L, eps, exact)
    s, n = 0.5, 200_000
    rng = np.random.default_rng(1)
    if L <= 100:
        omega = np.exp(math.sqrt(s) * rng.standard_normal((n // L, L)) - s / 2).mean(axis=1)
        p = (omega <= 1 - eps).mean()
        se = math.sqrt(max(p, 1 / len(omega)) / len(omega))
        assert p - 4 * se <= math.exp(-L * eps**2 * math.exp(-s) / 2), (L, eps, p, se)


def test_gronwall_is_attained_by_the_linear_equation():
    """E' = g + beta E, E(0) = 0, solved numerically, equals g (e^{beta t} - 1) / beta, which is at most
    g t e^{beta t}."""
    g, beta = 0.3, 1.7
    sol = integrate.solve_ivp(
        lambda t, E: g + beta * E, (0, 2), [0.0], rtol=1e-10, atol=1e-12, dense_output=True
    )
    t = np.linspace(0, 2, 21)
    np.testing.assert_allclose(sol.sol(t)[0], g * np.expm1(beta * t) / beta, rtol=1e-7, atol=1e-12)
    assert np.all(g * np.expm1(beta * t) / beta <= g * t * np.exp(beta * t) + 1e-15)


def test_four_standard_errors_leave_about_six_in_a_hundred_thousand():
    assert 2 * stats.norm.sf(4) == pytest.approx(6.3e-5, rel=0.01)
    assert re.search(r"6\\times10\^\{-5\}", PAGE)


def test_the_net_count():
    """A maximal set of points of a disc of radius R at mutual distances above eps, built greedily from a
    fine grid, has at most (1 + 2R/eps)^2 points, and every point of the grid is within eps of it."""
    R, eps = 1.0, 0.3
    x = np.linspace(-R, R, 81)
    grid = np.array([(a, b) for a in x for b in x if a * a + b * b <= R * R])
    net: list[np.ndarray] = []
    for p in grid:
        if all(np.linalg.norm(p - q) > eps for q in net):
            net.append(p)
    net_a = np.array(net)
    assert len(net) <= (1 + 2 * R / eps) ** 2, len(net)
    far = np.min(np.linalg.norm(grid[:, None, :] - net_a[None], axis=2), axis=1).max()
    assert far <= eps, far
    assert "(1 + 4r_\\infty/\\varepsilon)^{n}" in PAGE  # the page's ball has radius 2 r_inf


LAB3 = (Path(__file__).resolve().parents[1] / "book" / "labs" / "03_concentration.md").read_text()


@pytest.mark.parametrize("D", [1, 3])
@pytest.mark.parametrize("L", [2, 50, 10**4])
def test_lab_3_s_proof_exercise_tail_integral(D, L):
    """Lab 3's D-dimensional proof: with P(G > t) <= min(1, L 2^{D/2} e^{-t^2/(4 sigma^2)}), the tail
    integral of 4 t^3 is 16 sigma^4 (l^2 + 2 l + 2), l = ln L + D/2 ln 2 (quad, not the algebra)."""
    assert (
        "16\\,\\sigma^4(\\ell^2 + 2\\ell + 2)" in LAB3
        and "\\ell = \\ln L + \\frac D2\\ln 2" in LAB3
    )
    sigma = 1.4
    ell = math.log(L) + D / 2 * math.log(2)
    t0 = 2 * sigma * math.sqrt(ell)
    tail = lambda t: min(1.0, L * 2 ** (D / 2) * math.exp(-(t**2) / (4 * sigma**2)))  # noqa: E731
    value = integrate.quad(lambda t: 4 * t**3 * tail(t), 0, t0)[0]
    value += integrate.quad(lambda t: 4 * t**3 * tail(t), t0, np.inf)[0]
    assert value == pytest.approx(16 * sigma**4 * (ell**2 + 2 * ell + 2), rel=1e-8)


def test_lab_3_s_proof_exercise_query_average():
    """E_z e^{z^T M z} = det(I - 2M)^{-1/2} for z ~ N(0, I_2) and 2 lambda_max(M) < 1 (quadrature)."""
    assert "\\det(I - 2M)^{-1/2}" in LAB3
    M = np.array([[0.2, 0.05], [0.05, 0.1]])
    value = gauss_mean(lambda p: math.exp(p @ M @ p), dim=2)
    assert value == pytest.approx(np.linalg.det(np.eye(2) - 2 * M) ** -0.5, rel=1e-8)
